import Foundation
import Logging
import Synchronization
import Testing
@testable import Outbox

/// The README's recipe for a host's libuv loop: the host's own handle drives the app lifecycle.
@Suite("Analytics on the host's loop (host mode; SPEC A1, A5)")
struct HostLoopAnalyticsTests {
    // SPEC A1, A5: lifecycle calls made from the host's loop thread are applied in order; shutdown on that thread
    // writes $AppEnd, and the host's loop closes with no handle left.
    @Test func lifecycleCallsFromTheHostsLoopThreadAreRecordedInOrder() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let host = LifecycleHost()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread { host.run(path: dir.file()); done.signal() }
        thread.start()
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(host.closeResult == 0)

        let store = try LogStore(path: dir.file(), limits: StoreLimits(), clock: SystemClock(), logger: Logger(label: "test"))
        defer { store.close() }
        let logs = try store.allLogs().map(payloadObject)
        let kinds = logs.map { ($0["name"] as? String) ?? ($0["type"] as? String ?? "?") }
        #expect(kinds == ["startSession", "$AppStart", "$AppEnd", "$AppStart", "on-loop", "$AppEnd"])
        #expect(Set(logs.compactMap { $0["sid"] as? String }).count == 1)
    }
}

/// A host program: its loop, a 10 ms timer standing for the window manager (hidden, shown again), the engine on
/// the same loop.
final class LifecycleHost: @unchecked Sendable {
    var closeResult: Int32 = -1

    func run(path: String) {
        let outcome = runHostProgram(path: path, configure: { configuration in
            configuration.sessionTracking = .automatic
            configuration.tracksAppLifecycle = true
        }, onTimer: { engine in
            engine.enterBackground()
            engine.enterForeground()
            try? engine.trackEvent("on-loop")
        })
        closeResult = outcome?.closeResult ?? -1
    }
}

/// SPEC C7 (round 3): on the host's loop a dispatch first commits what was tracked before it.
@Suite("Dispatch on the host's loop (SPEC C7)")
struct HostLoopDispatchTests {
    // Five normal events, then `dispatch(completion:)` on the loop thread: the logs still in the intake are
    // committed and sent, and the answer is `.good`, not `.noData`.
    @Test func dispatchRightAfterNormalEventsSendsThem() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try TestHTTPServer(); defer { server.stop() }
        let result = Mutex<DispatchResult?>(nil)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            nonisolated(unsafe) var loop: UnsafeMutableRawPointer?
            _ = runHostProgram(path: dir.file(), configure: { configuration in
                loop = configuration.runMode.loopPointer
                configuration.endpoint = server.baseURL
                configuration.appSecret = "secret"
                configuration.dispatchInterval = .zero  // manual: only dispatch sends
            }, onTimer: { engine in
                guard let loop else { return }
                let hold = LoopHold(loop: loop)
                for i in 0..<5 { try? engine.trackEvent("normal", properties: ["i": .int(Int64(i))]) }
                engine.dispatch { answer in
                    result.withLock { $0 = answer }
                    hold.release()
                }
            })
            done.signal()
        }
        thread.start()
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(result.withLock { $0 } == .good)
        #expect(server.requests.count >= 1)
        let store = try LogStore(path: dir.file(), limits: StoreLimits(), clock: SystemClock(), logger: Logger(label: "test"))
        defer { store.close() }
        #expect(try store.allLogs().isEmpty, "the five logs were delivered")
    }
}

/// SPEC D1 through a real engine and a real HTTP server: the destination, the user's headers, and what status says.
@Suite("Destination through the engine (SPEC D1)")
struct DestinationEngineTests {
    @Test func theUsersHeadersAndInstallIDGoWithEveryRequestAndStatusNamesTheDestination() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try TestHTTPServer(); defer { server.stop() }
        var configuration = testConfiguration(dir.file())
        configuration.endpoint = server.baseURL
        configuration.appSecret = "secret"
        configuration.headers = [HeaderField("X-Tenant", "acme")]
        configuration.dispatchInterval = .zero
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        #expect(try await engine.status().destination == nil, "nothing sent yet")
        try engine.trackEvent("e")
        #expect(await withCheckedContinuation { continuation in engine.dispatch { continuation.resume(returning: $0) } } == .good)
        let request = try #require(server.requests.first)
        #expect(request.target == "/logs?api-version=1.0.0")
        #expect(request.header("X-Tenant") == "acme")
        #expect(request.header("Install-ID") == engine.installID.uuidString.lowercased())
        let status = try await engine.status()
        #expect(status.destination == "appcenter")
        #expect(status.serverRejected == 0)
        #expect(try StoreReport.read(path: dir.file()).destination == "appcenter", "kept in the store")
    }
}
