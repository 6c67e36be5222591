import CLibUV
import Foundation
import Logging
import Synchronization
import Testing
@_spi(CInterface) @testable import Outbox

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
            _ = runHostProgram(path: dir.file(), configure: { configuration in
                configuration.endpoint = server.baseURL
                configuration.appSecret = "secret"
                configuration.dispatchInterval = .zero  // manual: only dispatch sends
            }, onTimer: { engine in
                for i in 0..<5 { try? engine.trackEvent("normal", properties: ["i": .int(Int64(i))]) }
                engine.dispatch { answer in result.withLock { $0 = answer } }
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

    // SPEC C7 (round 4): a host with no handle of its own tracks five events, dispatches and runs its loop. The
    // pending dispatch holds the loop as a libuv request does: `uv_run` returns only after the completion ran; a
    // dispatch without a completion holds it until its requests finished; an idle engine holds nothing.
    @Test func aPendingDispatchHoldsTheHostsLoopUntilItHasAnswered() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try TestHTTPServer(); defer { server.stop() }
        let host = DispatchingHost()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread { host.run(path: dir.file(), endpoint: server.baseURL); done.signal() }
        thread.start()
        // A hang here means a handle of the engine kept the loop alive while nothing was pending.
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(host.answerWhenRunReturned == .good, "uv_run returned before the completion ran")
        #expect(host.pendingAfterPlainDispatch == 0, "uv_run returned before the plain dispatch's requests finished")
        #expect(host.closeResult == 0)
        let store = try LogStore(path: dir.file(), limits: StoreLimits(), clock: SystemClock(), logger: Logger(label: "test"))
        defer { store.close() }
        #expect(try store.allLogs().isEmpty, "the ten logs were delivered")
    }

    // SPEC C7, C8: the C interface's drain holds the host's loop until `finished` ran, which may shut the engine
    // down; the loop then ends with no handle of the engine left.
    @Test func aDrainHoldsTheHostsLoopUntilFinished() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try TestHTTPServer(); defer { server.stop() }
        let host = DispatchingHost()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread { host.runDrain(path: dir.file(), endpoint: server.baseURL); done.signal() }
        thread.start()
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(host.drained == true)
        #expect(host.closeResult == 0)
        #expect(try StoreReport.read(path: dir.file()).pendingNormal == 0)
    }
}

/// A host with no libuv handle of its own: the engine on its loop, five events tracked before the loop runs.
final class DispatchingHost: @unchecked Sendable {  // used on the host's thread only
    var answer: DispatchResult?
    var answerWhenRunReturned: DispatchResult?
    var pendingAfterPlainDispatch = -1
    var drained: Bool?
    var closeResult: Int32 = -1

    private func open(_ loop: UnsafeMutablePointer<uv_loop_t>, path: String, endpoint: String) -> OutboxEngine? {
        var configuration = testConfiguration(path)
        configuration.runMode = .hostLoop(UnsafeMutableRawPointer(loop))
        configuration.endpoint = endpoint
        configuration.appSecret = "secret"
        configuration.dispatchInterval = .zero  // manual: only dispatch sends
        guard let engine = try? OutboxEngine(configuration: configuration) else { return nil }
        for i in 0..<5 { try? engine.trackEvent("normal", properties: ["i": .int(Int64(i))]) }
        return engine
    }

    func run(path: String, endpoint: String) {
        let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        defer { loop.deallocate() }
        guard uv_loop_init(loop) == 0 else { return }
        guard let engine = open(loop, path: path, endpoint: endpoint) else { _ = uv_loop_close(loop); return }
        engine.dispatch { self.answer = $0 }
        uv_run(loop, UV_RUN_DEFAULT)
        answerWhenRunReturned = answer
        for i in 5..<10 { try? engine.trackEvent("normal", properties: ["i": .int(Int64(i))]) }
        engine.dispatch()
        uv_run(loop, UV_RUN_DEFAULT)
        pendingAfterPlainDispatch = (try? engine.statusWaiting()).map { $0.pendingNormal + $0.inFlight } ?? -1
        uv_run(loop, UV_RUN_DEFAULT)  // idle: returns at once
        engine.shutdown()
        uv_run(loop, UV_RUN_DEFAULT)
        closeResult = uv_loop_close(loop)
    }

    func runDrain(path: String, endpoint: String) {
        let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        defer { loop.deallocate() }
        guard uv_loop_init(loop) == 0 else { return }
        guard let engine = open(loop, path: path, endpoint: endpoint) else { _ = uv_loop_close(loop); return }
        engine.drain(forMs: 10_000) { drained in
            self.drained = drained
            engine.shutdown()
        }
        uv_run(loop, UV_RUN_DEFAULT)
        closeResult = uv_loop_close(loop)
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
