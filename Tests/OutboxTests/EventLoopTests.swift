import Foundation
import Testing
@testable import Outbox

@Suite("Event loop (ownership and threads; SPEC C8)")
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
        let outcome = runHostProgram(path: path) { engine in
            self.hostTimerFired = true
            // Called on the loop thread: a critical log commits inline rather than waiting for the loop.
            self.trackedOnLoop = (try? engine.trackEvent("on-loop", flags: .critical)) != nil
                && (try? engine.trackEvent("on-loop-normal")) != nil
        }
        firstRunReturned = outcome?.firstRunReturned ?? false
        closeResult = outcome?.closeResult ?? -1
    }
}
