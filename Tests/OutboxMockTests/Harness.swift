import Foundation
@_exported import OutboxTestSupport
import Testing
@testable import OutboxMock

/// Runs `body` against a server on 127.0.0.1 with a free port, and stops it afterwards.
func withServer<T>(_ configuration: MockServer.Configuration = .init(threads: 2),
                   _ body: (MockServer) throws -> T) throws -> T {
    let server = try MockServer(configuration: configuration)
    try server.start()
    defer { try? server.stop() }
    return try body(server)
}

func withServer<T>(scenario: String, _ body: (MockServer) throws -> T) throws -> T {
    try withServer(.init(scenario: try Scenario.decode(from: Data(scenario.utf8)), threads: 2), body)
}

/// `/_mock/stats` as the client sees it.
func statsJSON(_ port: Int) throws -> [String: Any] {
    try HTTP.get(port, "/_mock/stats").json
}

func requestLines(_ port: Int) throws -> [[String: Any]] {
    try HTTP.get(port, "/_mock/requests").jsonLines
}

/// Waits (polling, bounded) until `condition` holds: for facts only observable from outside, such as
/// a port accepting connections again.
func eventually(timeout: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(10_000)
    }
    return condition()
}

/// The client's view of one exchange: a status, or how it failed.
func outcome(_ work: () throws -> TestResponse) -> String {
    do {
        return String(try work().status)
    } catch let error as ClientError {
        switch error {
        case .refused: return "refused"
        case .reset: return "reset"
        case .closedWithoutAnswer: return "closed"
        case .timeout: return "timeout"
        case .malformed: return "malformed"
        case .io(let e): return "io(\(e))"
        }
    } catch {
        return "\(error)"
    }
}

/// Runs `work` on `n` threads at once (real threads: blocking sockets must not starve a shared pool)
/// and returns the results in index order.
func concurrently<T>(_ n: Int, _ work: @escaping @Sendable (Int) -> T) -> [T] {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    for i in 0..<n {
        let thread = Thread {
            let r = work(i)
            box.lock.lock()
            box.results[i] = r
            box.lock.unlock()
            done.signal()
        }
        thread.start()
    }
    for _ in 0..<n { done.wait() }
    return (0..<n).compactMap { box.results[$0] }
}

private final class ResultBox<T>: @unchecked Sendable {
    let lock = NSLock()
    var results: [Int: T] = [:]
}
