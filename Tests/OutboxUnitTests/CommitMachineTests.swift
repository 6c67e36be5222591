import Testing
@testable import Outbox

/// Group commit (SPEC T5) by its action lists: what the machine asks the shell to do for each event.
@Suite("Commit machine (SPEC T5)")
struct CommitMachineTests {
    static let windowNs: Int64 = 50_000_000
    static let settings = CommitMachine.Settings(windowNs: windowNs, threshold: 1024)

    /// A machine that has committed once at `lastNs` after being woken, and is polling with its timer armed.
    static func polling(lastNs: Int64 = 0) -> CommitMachine {
        var machine = CommitMachine(settings: settings)
        _ = machine.handle(.wake(.init(count: 1, urgent: true), nowNs: lastNs))
        let actions = machine.handle(.committed(taken: 1, nowNs: lastNs))
        #expect(actions == [.startPolling, .armTimer(afterMs: 5)])
        return machine
    }

    // SPEC T5: an urgent item, a full intake or a long queue is committed at once.
    @Test func urgentFullOrLongQueuesCommitAtOnce() {
        for queue in [CommitMachine.Queue(count: 1, urgent: true), .init(count: 1, full: true), .init(count: 1024)] {
            var machine = CommitMachine(settings: Self.settings)
            // The window since the last commit (at 0) has not passed at 10 ms.
            #expect(machine.handle(.wake(queue, nowNs: 10_000_000)) == [.commit(.intake)])
        }
    }

    // SPEC T5: a trickle waits for the end of the window since the last commit, with one timer.
    @Test func aTrickleWaitsForTheEndOfTheWindow() {
        var machine = CommitMachine(settings: Self.settings)
        #expect(machine.handle(.wake(.init(count: 1), nowNs: Self.windowNs)) == [.commit(.intake)])
        #expect(machine.handle(.committed(taken: 1, nowNs: Self.windowNs)) == [.startPolling, .armTimer(afterMs: 5)])
        #expect(machine.handle(.timerFired) == [.commit(.timer)])
        // The tick found nothing: back to being woken.
        #expect(machine.handle(.committed(taken: 0, nowNs: Self.windowNs + 5_000_000)) == [.pumpDelivery, .stopPolling])
        #expect(machine.handle(.pollingStopped(admitted: 0)) == [])
        #expect(!machine.polling && !machine.timerArmed)
        // 10 ms later a first log: it waits the 45 ms left of the window; a second wake arms nothing more.
        let now = Self.windowNs + 15_000_000
        #expect(machine.handle(.wake(.init(count: 1), nowNs: now)) == [.armTimer(afterMs: 40)])
        #expect(machine.handle(.wake(.init(count: 2), nowNs: now + 1_000_000)) == [])
        #expect(machine.handle(.timerFired) == [.commit(.timer)])
    }

    // SPEC T5: items admitted between the drain and the switch back to wake-ups woke no one: they are taken now.
    @Test func itemsAdmittedWhilePollingEndsAreTaken() {
        var machine = Self.polling()
        #expect(machine.handle(.timerFired) == [.commit(.timer)])
        #expect(machine.handle(.committed(taken: 0, nowNs: 5_000_000)) == [.pumpDelivery, .stopPolling])
        #expect(machine.handle(.pollingStopped(admitted: 2)) == [.commit(.intake)])
        #expect(machine.handle(.committed(taken: 2, nowNs: 6_000_000)) == [.startPolling, .armTimer(afterMs: 5)])
    }

    // SPEC T5, the lost wake-up of round 2: a commit a caller asks for on the loop thread (host mode: a critical
    // log) while the loop polls leaves the polling timer armed, so the next normal log is drained by the next tick.
    @Test func aCallersCommitWhilePollingKeepsTheTimerArmed() {
        var machine = Self.polling()
        #expect(machine.handle(.commitRequested) == [.commit(.caller)])
        #expect(machine.handle(.committed(taken: 1, nowNs: 1_000_000)) == [])
        #expect(machine.polling && machine.timerArmed)
        #expect(machine.handle(.timerFired) == [.commit(.timer)])
    }

    // A commit asked for from inside a commit (a callback it runs) takes nothing: its items would overtake.
    @Test func aCommitInsideACommitIsRefused() {
        var machine = CommitMachine(settings: Self.settings)
        #expect(machine.handle(.wake(.init(count: 1, urgent: true), nowNs: 0)) == [.commit(.intake)])
        #expect(machine.handle(.commitRequested) == [])
        #expect(machine.handle(.timerFired) == [])
    }

    // A failed transaction keeps its logs; they are tried again after the retry delay, on the one timer.
    @Test func aFailedTransactionIsRetriedLater() {
        var machine = CommitMachine(settings: Self.settings)
        #expect(machine.handle(.commitRequested) == [.commit(.caller)])
        #expect(machine.handle(.failed) == [.armTimer(afterMs: 1000)])
        #expect(machine.handle(.committed(taken: 1, nowNs: 0)) == [])
        #expect(machine.handle(.failed) == [])  // armed already
        #expect(machine.handle(.timerFired) == [.commit(.timer)])
    }

    // SPEC C8: shutdown commits what waits once, closes, and nothing happens after.
    @Test func shutdownCommitsOnceAndEndsEverything() {
        var machine = Self.polling()
        #expect(machine.handle(.wake(.init(count: 3, closed: true), nowNs: 1)) == [.commit(.shutdown), .close])
        #expect(machine.isStopped)
        for event: CommitMachine.Event in [.timerFired, .commitRequested, .failed, .shutdown, .committed(taken: 3, nowNs: 2),
                                           .wake(.init(count: 1, urgent: true), nowNs: 3)] {
            #expect(machine.handle(event) == [])
        }
    }

    // A backlog from an earlier run is due at once: with delivery, the timer gives it a first look.
    @Test func startArmsTheTimerOnlyWithDelivery() {
        var machine = CommitMachine(settings: Self.settings)
        #expect(machine.start(withDelivery: true) == [.armTimer(afterMs: 0)])
        var storeOnly = CommitMachine(settings: Self.settings)
        #expect(storeOnly.start(withDelivery: false) == [])
    }

    // The invariant the machine exists for, over many event orders: while the intake counts on polling, the timer
    // is armed or a commit is running (whose end re-arms it).
    @Test func pollingAlwaysHasATimerOrARunningCommit() {
        var random = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            var machine = CommitMachine(settings: Self.settings)
            var now: Int64 = 0
            var awaiting: [CommitMachine.Event] = []
            for _ in 0..<60 {
                now += Int64.random(in: 0...20_000_000, using: &random)
                let event: CommitMachine.Event
                if let next = awaiting.popLast(), Bool.random(using: &random) {
                    event = next
                } else {
                    event = [.wake(.init(count: Int.random(in: 0...3, using: &random),
                                        urgent: Int.random(in: 0..<8, using: &random) == 0), nowNs: now),
                             .timerFired, .commitRequested, .failed][Int.random(in: 0..<4, using: &random)]
                    // A timer that is not armed does not fire.
                    if case .timerFired = event, !machine.timerArmed { continue }
                }
                for action in machine.handle(event) {
                    switch action {
                    case .commit: awaiting.insert(.committed(taken: Int.random(in: 0...2, using: &random), nowNs: now), at: 0)
                    case .stopPolling: awaiting.insert(.pollingStopped(admitted: Int.random(in: 0...1, using: &random)), at: 0)
                    default: break
                    }
                }
                #expect(!machine.polling || machine.timerArmed || machine.running != nil)
            }
        }
    }
}
