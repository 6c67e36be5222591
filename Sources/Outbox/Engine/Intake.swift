import Foundation
import Glibc

/// An event validated on the caller's thread, waiting for the loop to give it an id and store it.
struct EventDraft {
    var priority: Priority
    var wallMs: Int64
    var monoNs: Int64
    /// The event-specific JSON (see `EventValidator`).
    var body: [UInt8]
    /// Set when this event introduced a name that must be remembered (SPEC T4), persisted with the log.
    var newName: String?
    /// Set for critical logs: the caller waits for the commit (SPEC T5).
    var waiter: CommitWaiter?
    /// SPEC W2: events, and the screen, userProperties and location logs of the analytics model.
    var type: LogType = .event
}

enum IntakeItem {
    case event(EventDraft)
    /// Signalled after everything before it is committed (`persisted()`).
    case barrier(CommitWaiter)
    case setEnabled(Bool)
    /// Sessions, lifecycle, user and device context (SPEC A1–A10), applied in queue order.
    case analytics(AnalyticsCommand)
    /// Work that must run on the loop thread (status queries, tests).
    case task(() -> Void)
}

/// A one-shot rendezvous between the loop and a caller.
final class CommitWaiter: @unchecked Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private var continuation: CheckedContinuation<OutboxError?, Never>?
    private(set) var error: OutboxError?

    init() {}
    init(continuation: CheckedContinuation<OutboxError?, Never>) { self.continuation = continuation }

    func signal(_ error: OutboxError?) {
        self.error = error
        if let continuation {
            self.continuation = nil
            continuation.resume(returning: error)
        } else {
            semaphore.signal()
        }
    }

    func wait() -> OutboxError? {
        semaphore.wait()
        return error
    }
}

/// The locked queue between any thread and the loop (DESIGN "Ownership and threads"). Callers append and wake
/// the loop with `uv_async_send`; libuv coalesces wake-ups, so the loop drains everything each time.
/// The lock is held for microseconds: an append, a set look-up, at most one `uv_async_send`.
final class Intake: @unchecked Sendable {
    private var mutex = pthread_mutex_t()
    private var roomAvailable = pthread_cond_t()
    private var items: [IntakeItem] = []
    private var queuedEvents = 0
    private var urgent = false
    private var closed = false
    /// Set by the loop while logs keep arriving: it will drain on its own short timer, so normal admits need not
    /// wake it (an `eventfd` write that wakes a sleeping thread costs the caller microseconds).
    private var loopPolling = false
    /// Items taken by the last drain (sizes the next buffer).
    private var lastDrain = 0
    private var enabled: Bool
    private var names: Set<String>
    private let maxNames: Int
    private let capacity: Int
    /// Queue length at which the loop is woken even inside the group-commit window.
    let commitThreshold: Int
    private var wake: (() -> Void)?

    init(enabled: Bool, names: Set<String>, maxNames: Int, capacity: Int) {
        self.enabled = enabled
        self.names = names
        self.maxNames = maxNames
        self.capacity = capacity
        self.commitThreshold = min(1024, capacity)
        pthread_mutex_init(&mutex, nil)
        pthread_cond_init(&roomAvailable, nil)
    }

    deinit {
        pthread_mutex_destroy(&mutex)
        pthread_cond_destroy(&roomAvailable)
    }

    /// Installs the loop's wake-up (a `uv_async_send`), called under the lock so that it never races `close`.
    func setWake(_ wake: @escaping () -> Void) {
        lock(); defer { unlock() }
        self.wake = wake
    }

    private func lock() { pthread_mutex_lock(&mutex) }
    private func unlock() { pthread_mutex_unlock(&mutex) }

    enum Admission { case accepted, disabled }

    /// Admits one log. Throws for a new event name beyond the limit (SPEC T4) or after shutdown; `name` is nil for
    /// logs that are not events (screens, user properties, locations: SPEC T4 counts event names only).
    /// On the loop thread (host mode) it never waits for room: the caller commits inline instead.
    func admit(name: String?, draft: EventDraft, onLoopThread: Bool) throws(OutboxError) -> Admission {
        var draft = draft
        lock()
        while !onLoopThread && queuedEvents >= capacity && !closed {
            pthread_cond_wait(&roomAvailable, &mutex)
        }
        guard !closed else { unlock(); throw .shutDown }
        guard enabled else { unlock(); return .disabled }
        if let name, !names.contains(name) {
            guard names.count < maxNames else { unlock(); throw .tooManyEventNames(name: name, limit: maxNames) }
            names.insert(name)
            draft.newName = name
        }
        let isUrgent = draft.waiter != nil
        items.append(.event(draft))
        queuedEvents += 1
        wakeIfNeeded(urgent: isUrgent)
        unlock()
        return .accepted
    }

    /// Appends a control item; `urgent` makes the loop commit now rather than at the end of the window.
    func submit(_ item: IntakeItem, urgent isUrgent: Bool = true) throws(OutboxError) {
        lock(); defer { unlock() }
        guard !closed else { throw .shutDown }
        if case .setEnabled(let value) = item { enabled = value }
        items.append(item)
        wakeIfNeeded(urgent: isUrgent)
    }

    /// Under the lock. Wakes on the first item after a drain, on urgent items and each time the queue reaches
    /// the commit threshold; otherwise the loop is already awake or has a commit timer armed.
    private func wakeIfNeeded(urgent isUrgent: Bool) {
        let wasUrgent = urgent
        if isUrgent { urgent = true }
        if (items.count == 1 && !loopPolling) || (isUrgent && !wasUrgent) || queuedEvents % commitThreshold == 0 {
            wake?()
        }
    }

    /// For the loop: start or stop polling. Stopping returns how many items arrived meanwhile (the loop then drains
    /// them itself, since their admits did not wake it).
    func setLoopPolling(_ polling: Bool) -> Int {
        lock(); defer { unlock() }
        loopPolling = polling
        return items.count
    }

    var isEnabled: Bool {
        lock(); defer { unlock() }
        return enabled
    }

    /// For the loop: how much waits and whether it must be committed now.
    func peek() -> (count: Int, urgent: Bool, closed: Bool) {
        lock(); defer { unlock() }
        return (items.count, urgent, closed)
    }

    /// For the loop: takes everything queued.
    func takeAll() -> [IntakeItem] {
        // The next buffer is allocated before taking the lock, with room for twice the last drain: callers then
        // never pay for growing (copying) the queue, and never wait on the lock while the loop allocates.
        var fresh: [IntakeItem] = []
        fresh.reserveCapacity(min(max(lastDrain * 2, 1024), capacity + 16))
        lock()
        let taken = items
        items = fresh
        lastDrain = taken.count
        let wasFull = queuedEvents >= capacity
        queuedEvents = 0
        urgent = false
        if wasFull { pthread_cond_broadcast(&roomAvailable) }
        unlock()
        return taken
    }

    /// Refuses every later call; the loop drains what is left. Returns false if it was already closed.
    func close() -> Bool {
        lock(); defer { unlock() }
        guard !closed else { return false }
        closed = true
        pthread_cond_broadcast(&roomAvailable)
        wake?()
        return true
    }

    /// For the loop, after it closed its async handle: no caller may wake it any more.
    func detachWake() {
        lock(); defer { unlock() }
        wake = nil
    }
}
