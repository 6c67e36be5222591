import Foundation
import Logging
import OutboxMock
import Testing
@testable import Outbox

/// Collects every log line with its metadata.
final class CollectingLogHandler: LogHandler, @unchecked Sendable {
    private let lock = NSCondition()
    private var lines: [String] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        lock.withLock {
            lines.append("\(event.level) \(event.message) \(all)")
            lock.broadcast()
        }
    }

    /// Blocks until a line containing `text` has been logged, or `timeout` passes; returns whether it was.
    func waitForLine(containing text: String, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while !lines.contains(where: { $0.contains(text) }) {
            guard lock.wait(until: deadline) else { return false }
        }
        return true
    }

    var text: String { lock.withLock { lines.joined(separator: "\n") } }
    var count: Int { lock.withLock { lines.count } }
}

@Suite("Secrets never reach the logs")
struct SecretHygieneTests {
    // DEVELOPERS "Standards": the app secret appears in no log line, at any level, on success or refusal.
    @Test func theAppSecretNeverAppearsInLogs() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario: Scenario(seed: 1, rules: [
            .init(match: .init(requests: try .init("2")), outcome: .respond(.init(status: 401, body: "bad secret"))),
        ]))
        defer { try? server.stop() }
        let handler = CollectingLogHandler()
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        let secret = "s3cr3t-\(UUID().uuidString)"
        configuration.appSecret = secret
        configuration.logger = Logger(label: "test") { _ in handler }
        let engine = try OutboxEngine(configuration: configuration)
        for index in 0..<120 { try engine.trackEvent("e", properties: ["i": .int(Int64(index))]) }
        // Wait for the event the test needs, the refusal being logged, rather than for 3 s of delivery.
        _ = handler.waitForLine(containing: "401", timeout: 30)
        engine.shutdown()
        #expect(handler.count > 0)
        #expect(handler.text.contains("401"))   // the refusal was logged…
        #expect(!handler.text.contains(secret)) // …without the secret
    }
}
