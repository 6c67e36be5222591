import CLibUV
import Foundation
import Testing
@testable import Outbox

/// A host program on its own libuv loop with the engine in host mode, driven by a 1 ms host timer: it catches
/// the engine polling (it has just committed, and admits do not wake it), commits inline on the loop thread
/// with a critical log, then tracks a normal one and measures how long that log waits in the intake.
private final class PollingProgram {
    let engine: OutboxEngine
    var step = 0
    var attempts = 0
    var queuedAt: UInt64 = 0
    var waitedMs: Double?
    var caughtPolling = false
    var timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)

    init(engine: OutboxEngine) { self.engine = engine }
    deinit { timer.deallocate() }

    func tick() {
        let now = DispatchTime.now().uptimeNanoseconds
        switch step {
        case 0:
            attempts += 1
            for i in 0..<3 { _ = try? engine.trackEvent("before-\(i)") }
            step = 1
        case 1:
            // Committed, and polling: the state in which a commit on the loop thread used to disarm the poll.
            guard engine.intake.peek().count == 0 else { return }
            guard engine.intake.isLoopPolling else {
                if attempts < 50 { step = 0 } else { stop() }  // the poll tick came first: try again
                return
            }
            caughtPolling = true
            _ = try? engine.trackEvent("critical", flags: .critical)  // commits inline, on this thread
            _ = try? engine.trackEvent("late")
            queuedAt = now
            step = 2
        default:
            if engine.intake.peek().count == 0 {
                waitedMs = Double(now - queuedAt) / 1e6
                stop()
            } else if now - queuedAt > 3_000_000_000 {
                stop()  // waitedMs stays nil: the log was not drained within 3 s
            }
        }
    }

    func stop() {
        uv_timer_stop(timer)
        uv_close(UnsafeMutableRawPointer(timer).assumingMemoryBound(to: uv_handle_t.self), nil)
    }
}

@Suite("Intake wake-ups (SPEC T5)")
struct IntakeWakeTests {
    // SPEC T5: a log tracked right after a commit on the loop thread (host mode: a critical log) is still drained
    // by the loop's next poll, within the commit window, not when something unrelated wakes the loop.
    @Test func aCommitOnTheLoopThreadKeepsTheLoopPolling() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        defer { loop.deallocate() }
        try #require(uv_loop_init(loop) == 0)
        var configuration = testConfiguration(dir.file())
        configuration.runMode = .hostLoop(UnsafeMutableRawPointer(loop))
        let program = PollingProgram(engine: try OutboxEngine(configuration: configuration))
        uv_timer_init(loop, program.timer)
        program.timer.pointee.data = Unmanaged.passUnretained(program).toOpaque()
        uv_timer_start(program.timer, { timer in
            guard let data = timer?.pointee.data else { return }
            Unmanaged<PollingProgram>.fromOpaque(data).takeUnretainedValue().tick()
        }, 1, 1)
        uv_run(loop, UV_RUN_DEFAULT)  // until the program stops its timer: the engine's handles are unref'd
        program.engine.shutdown()
        uv_run(loop, UV_RUN_DEFAULT)
        #expect(uv_loop_close(loop) == 0)

        try #require(program.caughtPolling, "never caught the engine polling in \(program.attempts) attempts")
        let waited = try #require(program.waitedMs, "the log tracked after the inline commit was not drained in 3 s")
        // The poll interval is 5 ms and the window 50 ms; a lost wake-up waits for the next unrelated one.
        #expect(waited < 1000)
    }
}
