import Dispatch
import FoundationEssentials
import Glibc

/// An event validated on the caller's thread, waiting for the loop to give it an id and store it.
struct EventDraft {
    var priority: Priority
    var wallMs: Int64
    var monoNs: Int64
    /// The log-specific JSON (see `EventValidator`) of the loop's own logs (sessions, lifecycle). Callers' logs
    /// leave it empty: `Intake.admit` takes their JSON apart and copies it into the batch's byte arena.
    var body: [UInt8]
    /// Where `admit` put the body in the arena of the `IntakeBatch` that carries this draft.
    var bodyRange: Range<Int> = 0..<0
    /// Set when this event introduced a name that must be remembered (SPEC T4), persisted with the log.
    var newName: String?
    /// Set for critical logs: the caller waits for the commit (SPEC T5).
    var waiter: CommitWaiter?
    /// SPEC W2: events, and the screen, userProperties and location logs of the analytics model.
    var type: LogType = .event
    /// The sealed payload the caller built (`CallerPayloads`), in the batch's arena; empty when it left it to the loop.
    var payloadRange: Range<Int> = 0..<0
    /// The epoch the caller built it under, its id, and the key it sealed it under.
    var epoch: UInt64 = 0
    var id = UUIDBytes(high: 0, low: 0)
    var sealedUnder: UInt32?
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

/// What the loop takes from the intake in one drain: the items in queue order, and the bytes of the events'
/// bodies (`EventDraft.bodyRange`). Handed back through `Intake.recycle` once the loop is done with it.
struct IntakeBatch {
    var items: [IntakeItem]
    var bytes: [UInt8]

    /// Both buffers are written once here (on the loop thread, after the first), so that the callers who fill
    /// them later never take their page faults.
    init(itemCapacity: Int, byteCapacity: Int) {
        items = [IntakeItem](repeating: .setEnabled(true), count: itemCapacity)
        items.removeAll(keepingCapacity: true)
        bytes = [UInt8](repeating: 0, count: byteCapacity)
        bytes.removeAll(keepingCapacity: true)
    }

    /// The body of an event taken from this batch.
    func body(of draft: EventDraft) -> ArraySlice<UInt8> {
        draft.body.isEmpty ? bytes[draft.bodyRange] : draft.body[...]
    }

    /// The payload the caller built for an event of this batch; nil when it left it to the loop.
    func payload(of draft: EventDraft) -> [UInt8]? {
        draft.payloadRange.isEmpty ? nil : Array(bytes[draft.payloadRange])
    }
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

/// The locked queue between any thread and the loop (docs/ARCHITECTURE.md, "Who owns what"). Callers append and wake
/// the loop with `uv_async_send`; libuv coalesces wake-ups, so the loop drains everything each time.
/// The lock is held for microseconds: an append, a copy of the body, a set look-up, at most one `uv_async_send`.
///
/// Memory crosses threads in one direction only: the loop allocates the queue's buffers (and recycles them after
/// each drain), callers copy into them. A caller never hands the loop a buffer of its own to free: a free from
/// another thread goes back to the caller's malloc arena under that arena's lock, and those frees made the
/// caller's slowest calls (SPEC T1's latency budget).
final class Intake: @unchecked Sendable {
    /// What callers and the loop share, read and written under `mutex` only.
    private struct Shared {
        var pending = IntakeBatch(itemCapacity: Intake.minimumItems, byteCapacity: Intake.minimumBytes)
        var queuedEvents = 0
        var urgent = false
        var closed = false
        /// Set by the loop while logs keep arriving: it will drain on its own short timer, so normal admits need
        /// not wake it (an `eventfd` write that wakes a sleeping thread costs the caller microseconds).
        var loopPolling = false
        var enabled: Bool
        var names: Set<String>
        var wake: (() -> Void)?
    }

    // The lock, its condition and the shared state live in memory of their own rather than in stored properties:
    // every access to a class's `var` is checked at run time for overlapping accesses (`swift_beginAccess`, ten of
    // them per admit, on the caller's hot path), and a pthread mutex must not move, which `&property` does not
    // promise.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let roomAvailable = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private let shared = UnsafeMutablePointer<Shared>.allocate(capacity: 1)

    // The loop's own: only the loop touches these.
    /// The buffers of the last drain, emptied and waiting to be swapped in again (already faulted in).
    private var spare: IntakeBatch?
    /// Items and body bytes taken by the last drain (size the next buffers).
    private var lastDrain = 0
    private var lastDrainBytes = 0

    /// Names the set `Shared.names` holds, for a look-up without the lock (SPEC T4).
    private let knownNames: KnownNames
    /// SPEC K1: `Shared.names` holds the hashes of names, as the sealed store keeps them.
    private let nameHasher: NameHasher?
    private let maxNames: Int
    private let capacity: Int
    /// Bytes of event bodies the queue holds at most: callers wait for room beyond it, as beyond `capacity` logs.
    /// It bounds the queue's memory (two buffers of it at most, one filling, one being stored) and keeps each
    /// drain small enough that its buffers are reused rather than allocated anew.
    static let defaultByteCapacity = 4 << 20
    private let byteCapacity: Int
    private static let minimumItems = 1024
    private static let minimumBytes = 256 << 10
    /// Queue length at which the loop is woken even inside the group-commit window.
    let commitThreshold: Int

    /// `names`: the stored event names — in a sealed store (SPEC K1) their hashes, which `nameHasher` makes of a name.
    init(enabled: Bool, names: Set<String>, nameHasher: NameHasher? = nil, maxNames: Int, capacity: Int,
         byteCapacity: Int = Intake.defaultByteCapacity) {
        self.byteCapacity = byteCapacity
        self.maxNames = maxNames
        self.capacity = capacity
        self.nameHasher = nameHasher
        self.commitThreshold = min(1024, capacity)
        shared.initialize(to: Shared(enabled: enabled, names: names))
        knownNames = KnownNames(expected: maxNames)
        // Hashes are not names: a sealed store's names become known as they are tracked.
        if nameHasher == nil { for name in names { knownNames.insert(name) } }
        // Adaptive: a caller that finds the lock taken spins briefly before sleeping. The lock is held for a few
        // hundred nanoseconds, far less than a futex sleep and wake-up costs the waiting caller.
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        pthread_cond_init(roomAvailable, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        pthread_cond_destroy(roomAvailable)
        mutex.deallocate()
        roomAvailable.deallocate()
        shared.deinitialize(count: 1)
        shared.deallocate()
    }

    /// Runs `body` on the shared state under the lock.
    private func locked<T, E: Error>(_ body: (inout Shared) throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&shared.pointee)
    }

    /// Installs the loop's wake-up (a `uv_async_send`), called under the lock so that it never races `close`.
    func setWake(_ wake: @escaping () -> Void) {
        locked { $0.wake = wake }
    }

    enum Admission { case accepted, disabled }

    /// Admits one log, copying `body` (its JSON) into the queue; the draft's own `body` is not used. Throws for a
    /// new event name beyond the limit (SPEC T4) or after shutdown; `name` is nil for logs that are not events
    /// (screens, user properties, locations: SPEC T4 counts event names only).
    /// On the loop thread (host mode) it never waits for room: the caller commits inline instead.
    /// `built`: the sealed payload the caller built (`CallerPayloads`), copied too.
    func admit(name: String?, draft: consuming EventDraft, body: UnsafeRawBufferPointer, built: CallerPayloads.Built? = nil,
               onLoopThread: Bool) throws(OutboxError) -> Admission {
        // SPEC T4: a name admitted before needs no look-up under the lock (the set stays the rule for the others).
        // (Not `name.map(knownNames.contains)`: that closure would retain and release the table, an object all
        // callers share, bouncing its reference count between their cores.)
        let knownName = if let name { knownNames.contains(name) } else { true }
        // Outside the lock: a sealed store's name is looked up by its HMAC, once per name and process.
        let nameKey = knownName ? nil : name.map { nameHasher?.hash($0) ?? $0 }
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        let state = shared
        while !onLoopThread && isFull(state.pointee) && !state.pointee.closed {
            pthread_cond_wait(roomAvailable, mutex)
        }
        guard !state.pointee.closed else { throw .shutDown }
        guard state.pointee.enabled else { return .disabled }
        if !knownName, let name, let nameKey {
            if !state.pointee.names.contains(nameKey) {
                guard state.pointee.names.count < maxNames else { throw .tooManyEventNames(name: name, limit: maxNames) }
                state.pointee.names.insert(nameKey)
                draft.newName = name
            }
            // Published before the unlock: a caller that finds the name queues its event after this one.
            knownNames.insert(name)
        }
        let isUrgent = draft.waiter != nil
        if let built {
            let start = state.pointee.pending.bytes.count
            state.pointee.pending.bytes.append(contentsOf: built.payload)
            draft.payloadRange = start..<state.pointee.pending.bytes.count
            draft.epoch = built.epoch
            draft.id = built.id
            draft.sealedUnder = built.keyID
        }
        // Also beside a built payload: the loop builds it again from the body if the stamp changed meanwhile.
        let start = state.pointee.pending.bytes.count
        state.pointee.pending.bytes.append(contentsOf: body)
        draft.bodyRange = start..<state.pointee.pending.bytes.count
        state.pointee.pending.items.append(.event(consume draft))
        state.pointee.queuedEvents += 1
        wakeIfNeeded(&state.pointee, urgent: isUrgent)
        return .accepted
    }

    /// Appends a control item; `urgent` makes the loop commit now rather than at the end of the window.
    func submit(_ item: IntakeItem, urgent isUrgent: Bool = true) throws(OutboxError) {
        try locked { (state: inout Shared) throws(OutboxError) in
            guard !state.closed else { throw .shutDown }
            if case .setEnabled(let value) = item { state.enabled = value }
            state.pending.items.append(item)
            wakeIfNeeded(&state, urgent: isUrgent)
        }
    }

    /// Under the lock.
    private func isFull(_ state: borrowing Shared) -> Bool {
        state.queuedEvents >= capacity || state.pending.bytes.count >= byteCapacity
    }

    /// Under the lock. Wakes on the first item after a drain, on urgent items, each time the queue reaches the
    /// commit threshold and when it is full; otherwise the loop is already awake or has a commit timer armed.
    private func wakeIfNeeded(_ state: inout Shared, urgent isUrgent: Bool) {
        let wasUrgent = state.urgent
        if isUrgent { state.urgent = true }
        if (state.pending.items.count == 1 && !state.loopPolling) || (isUrgent && !wasUrgent)
            || state.queuedEvents % commitThreshold == 0 || isFull(state) {
            state.wake?()
        }
    }

    /// For the loop: start or stop polling. Stopping returns how many items arrived meanwhile (the loop then drains
    /// them itself, since their admits did not wake it).
    func setLoopPolling(_ polling: Bool) -> Int {
        locked { state in
            state.loopPolling = polling
            return state.pending.items.count
        }
    }

    var isEnabled: Bool {
        locked { $0.enabled }
    }

    /// Whether admits count on the loop's polling timer instead of waking it (tests).
    var isLoopPolling: Bool {
        locked { $0.loopPolling }
    }

    /// For the loop: how much waits and whether it must be committed now (`full`: callers are waiting for room).
    func peek() -> (count: Int, urgent: Bool, closed: Bool, full: Bool) {
        locked { state in (state.pending.items.count, state.urgent, state.closed, isFull(state)) }
    }

    /// For the loop: takes everything queued.
    func takeAll() -> IntakeBatch {
        // The next buffers are ready before taking the lock: the last drain's, recycled, or fresh ones with room
        // for four times the last drain. Callers then seldom grow (copy) the queue, and never wait on the lock
        // while the loop allocates.
        var fresh = spare ?? IntakeBatch(
            itemCapacity: min(max(lastDrain * 4, Self.minimumItems), capacity + 16),
            byteCapacity: min(max(lastDrainBytes * 4, Self.minimumBytes), byteCapacity + 64 << 10))
        spare = nil
        locked { state in
            let wasFull = isFull(state)
            swap(&fresh, &state.pending)
            state.queuedEvents = 0
            state.urgent = false
            if wasFull { pthread_cond_broadcast(roomAvailable) }
        }
        lastDrain = fresh.items.count
        lastDrainBytes = fresh.bytes.count
        return fresh
    }

    /// For the loop, once it has stored a drained batch: its buffers serve the next drain (only the loop touches
    /// `spare`). Buffers grown by a burst are let go once drains are small again.
    func recycle(_ batch: inout IntakeBatch) {
        guard spare == nil, batch.bytes.capacity <= 8 * max(lastDrainBytes, Self.minimumBytes),
              batch.items.capacity <= 8 * max(lastDrain, Self.minimumItems) else { return }
        batch.items.removeAll(keepingCapacity: true)
        batch.bytes.removeAll(keepingCapacity: true)
        spare = batch
        batch = IntakeBatch(itemCapacity: 0, byteCapacity: 0)
    }

    /// Refuses every later call; the loop drains what is left. Returns false if it was already closed.
    func close() -> Bool {
        locked { state in
            guard !state.closed else { return false }
            state.closed = true
            pthread_cond_broadcast(roomAvailable)
            state.wake?()
            return true
        }
    }

    /// For the loop, after it closed its async handle: no caller may wake it any more.
    func detachWake() {
        locked { $0.wake = nil }
    }
}
