import CLibUV
import Foundation
import Logging
import Testing
@testable import Outbox

/// The README's recipe for a host's libuv loop: the host's own handle drives the app lifecycle.
@Suite("Analytics on the host's loop (DESIGN host mode; SPEC A1, A5)")
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
        let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        defer { loop.deallocate() }
        guard uv_loop_init(loop) == 0 else { return }
        var configuration = testConfiguration(path)
        configuration.runMode = .hostLoop(UnsafeMutableRawPointer(loop))
        configuration.sessionTracking = .automatic
        configuration.tracksAppLifecycle = true
        guard let engine = try? OutboxEngine(configuration: configuration) else { return }

        let timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        defer { timer.deallocate() }
        uv_timer_init(loop, timer)
        timer.pointee.data = Unmanaged.passUnretained(engine).toOpaque()
        uv_timer_start(timer, { timer in
            guard let timer, let data = timer.pointee.data else { return }
            let engine = Unmanaged<OutboxEngine>.fromOpaque(data).takeUnretainedValue()
            engine.enterBackground()
            engine.enterForeground()
            try? engine.trackEvent("on-loop")
            uv_close(UnsafeMutableRawPointer(timer).assumingMemoryBound(to: uv_handle_t.self), nil)
        }, 10, 0)

        uv_run(loop, UV_RUN_DEFAULT)   // returns when the host's timer is done: the engine's handles are unref'd
        engine.shutdown()
        uv_run(loop, UV_RUN_DEFAULT)
        closeResult = uv_loop_close(loop)
    }
}
