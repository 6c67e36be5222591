import CLibUV
import Foundation
import Testing
@testable import Outbox

@Suite("Event loop (DESIGN: ownership and threads; SPEC C8)")
struct EventLoopTests {
    // SPEC C8: after shutdown every handle is closed and the loop closes cleanly.
    @Test func dedicatedModeClosesItsLoopWithNoHandleLeft() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try OutboxEngine(configuration: testConfiguration(dir.file()))
        try engine.trackEvent("e")
        #expect(engine.openHandleCount == 3)
        engine.shutdown()
        #expect(engine.dedicatedLoopCloseResult == 0)
        #expect(engine.openHandleCount == 0)
        #expect(try StoreReport.read(path: dir.file()).pendingNormal == 1)  // shutdown committed it
    }

    // In host mode the engine never keeps the host's loop alive, and leaves it closable after shutdown.
    @Test func hostModeLetsTheHostLoopExitAndCloseCleanly() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = dir.file()
        let done = DispatchSemaphore(value: 0)
        let results = HostLoopResults()
        // The host's thread: its own loop, its own one-shot timer, the engine registered on that loop.
        let thread = Thread {
            results.run(path: path)
            done.signal()
        }
        thread.start()
        // A hang here means an engine handle kept the host's loop alive.
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(results.firstRunReturned)
        #expect(results.hostTimerFired)
        #expect(results.trackedOnLoop)
        #expect(results.closeResult == 0)
        #expect(try StoreReport.read(path: path).pendingCritical == 1)
        #expect(try StoreReport.read(path: path).pendingNormal == 1)
    }
}

/// Runs a host program on the calling thread and records what happened.
final class HostLoopResults: @unchecked Sendable {
    var firstRunReturned = false
    var hostTimerFired = false
    var trackedOnLoop = false
    var closeResult: Int32 = -1

    func run(path: String) {
        let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        defer { loop.deallocate() }
        guard uv_loop_init(loop) == 0 else { return }
        var configuration = testConfiguration(path)
        configuration.runMode = .hostLoop(UnsafeMutableRawPointer(loop))
        guard let engine = try? OutboxEngine(configuration: configuration) else { return }

        let timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        defer { timer.deallocate() }
        uv_timer_init(loop, timer)
        let context = HostTimerContext(results: self, engine: engine)
        timer.pointee.data = Unmanaged.passRetained(context).toOpaque()
        uv_timer_start(timer, { timer in
            guard let timer, let data = timer.pointee.data else { return }
            let context = Unmanaged<HostTimerContext>.fromOpaque(data).takeRetainedValue()
            context.results.hostTimerFired = true
            // Called on the loop thread: a critical log commits inline rather than waiting for the loop.
            context.results.trackedOnLoop = (try? context.engine.trackEvent("on-loop", flags: .critical)) != nil
                && (try? context.engine.trackEvent("on-loop-normal")) != nil
            uv_close(UnsafeMutableRawPointer(timer).assumingMemoryBound(to: uv_handle_t.self), nil)
        }, 10, 0)

        // Returns once the host's own timer is done: the engine's handles are unref'd.
        uv_run(loop, UV_RUN_DEFAULT)
        firstRunReturned = true
        engine.shutdown()
        uv_run(loop, UV_RUN_DEFAULT)  // lets the close callbacks run
        closeResult = uv_loop_close(loop)
    }
}

final class HostTimerContext {
    let results: HostLoopResults
    let engine: OutboxEngine
    init(results: HostLoopResults, engine: OutboxEngine) {
        self.results = results
        self.engine = engine
    }
}
