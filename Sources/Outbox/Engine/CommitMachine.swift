/// Group commit (SPEC T5) as a pure value, tested by its action lists without a loop, a timer or a store: the shell
/// (`EngineCore`) feeds it what happened and carries out what it returns, in order. It decides when the intake is
/// drained into one transaction — at once for urgent, full or long queues, at the end of the commit window for a
/// trickle — when the loop polls the intake on a short timer instead of being woken for every admit, and when a
/// failed transaction is tried again. It owns the one commit timer: armed at most once, never stopped early.
///
/// The invariant it exists for: while callers count on the loop polling (`polling`), the timer is armed or a
/// commit is running whose end re-arms it. Last round a commit made outside the machine's path stopped the armed
/// timer and left admits waiting for an unrelated wake-up; here every trigger goes through `handle`.
struct CommitMachine: Sendable, Equatable {
    struct Settings: Sendable, Equatable {
        /// SPEC T5: the group-commit window.
        var windowNs: Int64
        /// A queue this long is committed at once (the intake's `commitThreshold`).
        var threshold: Int
        /// After a failed transaction, the logs kept for it are tried again this much later.
        var retryDelayMs: UInt64 = 1000

        /// While logs keep arriving the intake is drained this often: inside the window, at most every 5 ms.
        var pollMs: UInt64 { UInt64(max(1, min(windowNs / 1_000_000, 5))) }
    }

    /// What the intake holds when the loop is woken (`Intake.peek()`).
    struct Queue: Sendable, Equatable {
        var count: Int
        /// A critical log or a barrier waits for its commit.
        var urgent = false
        /// The intake was closed (shutdown).
        var closed = false
        /// Callers wait for room.
        var full = false
    }

    /// Why a commit runs: what the machine does once it has.
    enum Trigger: Sendable, Equatable {
        /// The loop was woken, or its polling timer fired: afterwards, keep polling or stop.
        case intake
        /// The commit timer fired (window ended, poll tick, retry): the same, and delivery looks at the store.
        case timer
        /// A caller on the loop thread needs its items stored now (a critical log, a barrier, a status read, a
        /// dispatch, a drain): the timer and the polling are left as they are.
        case caller
        /// The engine stops.
        case shutdown
    }

    enum Event: Sendable, Equatable {
        /// The intake's async handle fired.
        case wake(Queue, nowNs: Int64)
        case timerFired
        /// See `Trigger.caller`.
        case commitRequested
        /// The commit asked for ended having taken `taken` items from the intake.
        case committed(taken: Int, nowNs: Int64)
        /// A transaction of that commit failed; what it held is kept for the next one.
        case failed
        /// The answer to `.stopPolling`: items admitted between the last drain and the switch (they woke no one).
        case pollingStopped(admitted: Int)
        /// The engine stops.
        case shutdown
    }

    enum Action: Sendable, Equatable {
        /// Drain the intake into the store; answer with `.committed` (and `.failed` for a failed transaction).
        case commit(Trigger)
        case armTimer(afterMs: UInt64)
        /// Tell the intake that admits need not wake the loop: its polling timer will drain them.
        case startPolling
        /// Tell the intake to wake the loop again; answer with `.pollingStopped`.
        case stopPolling
        /// Delivery looks at the store (a backlog, or what the timer's commit stored).
        case pumpDelivery
        /// Close everything; nothing follows.
        case close
    }

    let settings: Settings
    private(set) var timerArmed = false
    private(set) var polling = false
    /// The commit running now, if any: a commit asked for meanwhile (a callback of this one) takes nothing.
    private(set) var running: Trigger?
    private(set) var lastCommitNs: Int64 = 0
    private(set) var isStopped = false

    init(settings: Settings) {
        self.settings = settings
    }

    /// At start: a backlog from an earlier run is due at once, so delivery gets a first look from the timer.
    mutating func start(withDelivery: Bool) -> [Action] {
        guard withDelivery else { return [] }
        return arm(afterMs: 0)
    }

    mutating func handle(_ event: Event) -> [Action] {
        guard !isStopped else { return [] }
        switch event {
        case .wake(let queue, let nowNs):
            if queue.closed { return shutdown() }
            guard queue.count > 0 else { return [] }
            if queue.urgent || queue.full || queue.count >= settings.threshold || nowNs - lastCommitNs >= settings.windowNs {
                return commit(.intake)
            }
            // A trickle shares the window's one transaction.
            return arm(afterMs: UInt64(max(1, (lastCommitNs + settings.windowNs - nowNs) / 1_000_000)))
        case .timerFired:
            timerArmed = false
            return commit(.timer)
        case .commitRequested:
            return commit(.caller)
        case .committed(let taken, let nowNs):
            guard let trigger = running else { return [] }
            running = nil
            lastCommitNs = nowNs
            switch trigger {
            case .caller, .shutdown:
                return []
            case .intake:
                return keepPolling(after: taken)
            case .timer:
                return [.pumpDelivery] + keepPolling(after: taken)
            }
        case .failed:
            return arm(afterMs: settings.retryDelayMs)
        case .pollingStopped(let admitted):
            return admitted > 0 ? commit(.intake) : []
        case .shutdown:
            return shutdown()
        }
    }

    private mutating func commit(_ trigger: Trigger) -> [Action] {
        guard running == nil else { return [] }
        running = trigger
        return [.commit(trigger)]
    }

    /// The timer is armed once and left to fire: stopping it early is what lost a wake-up (see the type).
    private mutating func arm(afterMs: UInt64) -> [Action] {
        guard !timerArmed else { return [] }
        timerArmed = true
        return [.armTimer(afterMs: afterMs)]
    }

    /// While logs keep arriving, drain on a short timer instead of being woken for each first log after a drain;
    /// once a tick finds nothing, go back to waiting for a wake-up.
    private mutating func keepPolling(after taken: Int) -> [Action] {
        if taken > 0 {
            var actions: [Action] = polling ? [] : [.startPolling]
            polling = true
            actions += arm(afterMs: settings.pollMs)
            return actions
        }
        // Also when not polling: the intake answers with what was admitted meanwhile, which nothing else would take.
        polling = false
        return [.stopPolling]
    }

    private mutating func shutdown() -> [Action] {
        isStopped = true
        // Asked from inside a commit (a task of the intake shut the engine down), that commit is the last one.
        return commit(.shutdown) + [.close]
    }
}
