import CStoreSeal
import Glibc
import Synchronization

/// In a sealed store (SPEC K1), a log's payload built and sealed on the caller's thread rather than the loop's.
///
/// The loop is every log's bottleneck (one thread stores them all), and sealing a payload costs about a tenth of its
/// commit there (BENCHMARKS.md); callers are many and mostly idle. But the payload carries the session and user current
/// in queue order (SPEC T7), which only the loop knows for sure. So the loop publishes here the stamp it holds, with an
/// epoch that changes whenever the stamp or the store key does. A caller builds under the published stamp and records
/// the epoch; when the loop reaches the log and the epoch is still its own, nothing can have changed the stamp in
/// between (a change publishes a new epoch first), and the caller's sealed payload is stored as it is. Otherwise — a
/// session or user change queued ahead of the log, a new key — the loop builds and seals it again from the body, which
/// the intake keeps for that.
///
/// A plain store's callers leave their payloads to the loop: there it is one concatenation, cheaper on the loop than
/// the lock and the copies of handing it over cost a caller (BENCHMARKS.md). Callers share one lock here, held for a
/// copy of the stamp and an id; the sealing runs outside it, each caller with a sealer of its own from a small pool
/// (a libcrypto context is not thread-safe).
final class CallerPayloads: @unchecked Sendable {
    /// What a caller copies under the lock. Raw memory, not arrays: callers on several cores would otherwise retain
    /// and release the same buffers and bounce their reference counts between them (see `Intake`).
    private struct Published {
        /// 0: nothing published yet; callers leave their payloads to the loop.
        var epoch: UInt64 = 0
        var stamp = UnsafeMutableRawBufferPointer.allocate(byteCount: CallerPayloads.maxStampBytes, alignment: 8)
        var stampCount = 0
        var key: [UInt8]?
        var keyID: UInt32 = 0
        /// Sealers under `key` that no caller holds.
        var idle: [OpaquePointer] = []
        var ids: IDGenerator
    }

    /// A longer stamp (a user id of many escaped characters) is not published: the loop builds those payloads.
    static let maxStampBytes = 1024
    private static let maxIdleSealers = 8

    /// Whether callers build: a sealed store with a published stamp. Read without the lock.
    private let sealing = Atomic<Bool>(false)
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let state = UnsafeMutablePointer<Published>.allocate(capacity: 1)

    /// `idSeed`: the tests' fixed ids (`Configuration.testingIDSeed`); the callers' ids are a stream of their own.
    init(idSeed: UInt64?) {
        state.initialize(to: Published(ids: idSeed.map { IDGenerator(seed: $0 &+ 0x5EED) } ?? IDGenerator()))
        // Adaptive, as the intake's: held for a copy of a few dozen bytes, far less than a futex sleep costs a caller.
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        for sealer in state.pointee.idle { outbox_sealer_free(sealer) }
        state.pointee.stamp.deallocate()
        state.deinitialize(count: 1)
        state.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    // MARK: - The loop's side

    /// For the loop: from now on callers build under `stamp` and `key` (nil: a plain store), named `epoch`.
    func publish(epoch: UInt64, stamp: [UInt8], key: StoreKey?) {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        let published = state
        if stamp.count <= Self.maxStampBytes {
            published.pointee.epoch = epoch
            stamp.withUnsafeBytes { published.pointee.stamp.copyMemory(from: $0) }
            published.pointee.stampCount = stamp.count
        } else {
            published.pointee.epoch = 0
        }
        if key?.id != published.pointee.keyID || (key == nil) != (published.pointee.key == nil) {
            for sealer in published.pointee.idle { outbox_sealer_free(sealer) }
            published.pointee.idle.removeAll()
            // The configuration's own bytes (an array shared, not copied): the key is in memory while the engine runs.
            published.pointee.key = key?.bytes
            published.pointee.keyID = key?.id ?? 0
        }
        sealing.store(published.pointee.epoch != 0 && published.pointee.key != nil, ordering: .relaxed)
    }

    // MARK: - The caller's side

    /// A payload built by `build`, sealed under the store key.
    struct Built {
        var epoch: UInt64
        var id: UUIDBytes
        /// The id of the key the payload is sealed under.
        var keyID: UInt32
        /// The payload as it is to be stored.
        var payload: UnsafeRawBufferPointer
    }

    /// Builds and seals the payload of a log of `type` with `body` (its own JSON fields) and hands it to `admit`; hands
    /// nil in a plain store or before anything is published (the loop then builds it). Everything lives on this
    /// thread's stack until `admit` returns.
    func build<R, E: Error>(type: LogType, body: UnsafeRawBufferPointer,
                            _ admit: (Built?) throws(E) -> R) throws(E) -> R {
        // A plain store's callers never take the lock: the loop's own concatenation costs it less than handing it over.
        guard sealing.load(ordering: .relaxed) else { return try admit(nil) }
        let prefix = type.payloadPrefix
        let headCount = prefix.count + UUIDBytes.textLength + 1
        pthread_mutex_lock(mutex)
        let published = state
        let epoch = published.pointee.epoch
        guard epoch != 0, published.pointee.key != nil else {
            pthread_mutex_unlock(mutex)
            return try admit(nil)
        }
        let stampCount = published.pointee.stampCount
        let plainCount = headCount + stampCount + (body.isEmpty ? 0 : body.count + 1) + 1
        // Sized to the log, not to the longest stamp: under a page, the standard library keeps it on the stack.
        return try withUnsafeTemporaryAllocation(byteCount: 2 * plainCount + StoreSealer.overhead, alignment: 16) {
            (buffer: UnsafeMutableRawBufferPointer) throws(E) -> R in
            guard let base = buffer.baseAddress else {
                pthread_mutex_unlock(mutex)
                return try admit(nil)
            }
            let plain = base.assumingMemoryBound(to: UInt8.self)
            UnsafeMutableRawBufferPointer(start: plain + headCount, count: stampCount)
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: published.pointee.stamp[..<stampCount]))
            let id = published.pointee.ids.uuid()
            let keyID = published.pointee.keyID
            let sealer = published.pointee.idle.popLast()
                ?? published.pointee.key?.withUnsafeBufferPointer { outbox_sealer_new($0.baseAddress) }
            pthread_mutex_unlock(mutex)
            // A sealer libcrypto could not set up leaves the payload to the loop, which reports the failure.
            guard let sealer else { return try admit(nil) }
            defer { giveBack(sealer, keyID: keyID) }

            UnsafeMutableRawBufferPointer(start: plain, count: prefix.count).copyMemory(from: UnsafeRawBufferPointer(prefix))
            id.write(to: plain + prefix.count)
            plain[headCount - 1] = UInt8(ascii: "\"")
            var at = headCount + stampCount
            if !body.isEmpty, let source = body.baseAddress {
                plain[at] = UInt8(ascii: ",")
                UnsafeMutableRawPointer(plain + at + 1).copyMemory(from: source, byteCount: body.count)
                at += body.count + 1
            }
            plain[at] = UInt8(ascii: "}")
            let out = plain + plainCount
            guard StoreSealer.seal(UnsafeRawBufferPointer(start: plain, count: plainCount), .log(id), keyID: keyID,
                                   handle: sealer, into: out) else { return try admit(nil) }
            let sealed = UnsafeRawBufferPointer(start: out, count: plainCount + StoreSealer.overhead)
            return try admit(Built(epoch: epoch, id: id, keyID: keyID, payload: sealed))
        }
    }

    private func giveBack(_ sealer: OpaquePointer, keyID: UInt32) {
        pthread_mutex_lock(mutex)
        let keep = state.pointee.key != nil && state.pointee.keyID == keyID && state.pointee.idle.count < Self.maxIdleSealers
        if keep { state.pointee.idle.append(sealer) }
        pthread_mutex_unlock(mutex)
        if !keep { outbox_sealer_free(sealer) }
    }
}
