import FoundationEssentials
import Logging

/// Dead letters (SPEC R2, X6): the logs the server refused, listed, put back in the queue or deleted.
///
/// ```swift
/// let letters = try await engine.deadLetters()
/// let fixed = letters.filter { $0.status == 422 }.map(\.id)
/// try await engine.requeueDeadLetters(ids: fixed)   // sent again with the next batches
/// try await engine.purgeDeadLetters()               // forget the rest
/// ```
///
/// Callable from any thread. The work runs on the loop thread, in one transaction each; from the loop's own
/// thread (host mode) it runs inline.
extension OutboxEngine {
    /// The dead letters, oldest first; `ids` limits them to those logs (ids not there are skipped), `destination` to
    /// that destination's (SPEC D18; a name the store does not serve is refused).
    public func deadLetters(ids: [UUID]? = nil, destination: String? = nil) async throws -> [DeadLetterRecord] {
        let keys = ids?.map(UUIDBytes.init)
        return try await onLoopThread { core in try core.store.deadLetterRecords(ids: keys, destination: destination) }
    }

    /// Moves dead letters (all, or those of `ids`) back into the queue as pending logs with a fresh retry state:
    /// each keeps its id, priority and capture time and is sent with the next batches. The storage limits apply
    /// (SPEC S2): a letter the store cannot take stays a dead letter. Returns how many were requeued.
    @discardableResult
    public func requeueDeadLetters(ids: [UUID]? = nil, destination: String? = nil) async throws -> Int {
        let keys = ids?.map(UUIDBytes.init)
        return try await onLoopThread { core in
            let result = try core.store.requeueDeadLetters(ids: keys, destination: destination)
            if result.requeued > 0 { core.delivery?.stored() }
            return result.requeued
        }
    }

    /// Deletes dead letters (all, or those of `ids`). Returns how many were deleted.
    @discardableResult
    public func purgeDeadLetters(ids: [UUID]? = nil, destination: String? = nil) async throws -> Int {
        let keys = ids?.map(UUIDBytes.init)
        return try await onLoopThread { core in try core.store.purgeDeadLetters(ids: keys, destination: destination) }
    }

    // MARK: - On a store file, without an engine (the command line, SPEC X6)

    /// The dead letters of the store at `path`, read without taking the store over: works while an engine runs
    /// on it, as `StoreReport.read` does.
    /// A sealed store (SPEC K1) needs its `storeKey`: `storeKeyInvalid` without it.
    public static func deadLetters(inStoreAt path: String, ids: [UUID]? = nil, destination: String? = nil,
                                   storeKey: StoreKey? = nil) throws -> [DeadLetterRecord] {
        try LogStore.inspectDeadLetters(path: path, key: storeKey, ids: ids?.map(UUIDBytes.init), destination: destination)
    }

    /// `requeueDeadLetters(ids:)` on the store at `path`, which no engine may have open (`storeLocked`
    /// otherwise). The logs are sent by the next engine that opens the store.
    public static func requeueDeadLetters(inStoreAt path: String, ids: [UUID]? = nil, destination: String? = nil, storeKey: StoreKey? = nil,
                                          logger: Logger = Logger(label: "outbox", factory: { _ in SwiftLogNoOpLogHandler() })) throws -> Int {
        try withOwnedStore(path: path, key: storeKey, logger: logger) { store in
            try store.requeueDeadLetters(ids: ids?.map(UUIDBytes.init), destination: destination).requeued
        }
    }

    /// `purgeDeadLetters(ids:)` on the store at `path`, which no engine may have open (`storeLocked` otherwise).
    public static func purgeDeadLetters(inStoreAt path: String, ids: [UUID]? = nil, destination: String? = nil, storeKey: StoreKey? = nil,
                                        logger: Logger = Logger(label: "outbox", factory: { _ in SwiftLogNoOpLogHandler() })) throws -> Int {
        try withOwnedStore(path: path, key: storeKey, logger: logger) { store in
            try store.purgeDeadLetters(ids: ids?.map(UUIDBytes.init), destination: destination)
        }
    }

    /// Opens the store at `path` for a maintenance write. The app's limits are not known here, and an open
    /// enforces the limits it is given: so the cap is set well above what the file holds (nothing is evicted to
    /// meet it) and no age limit applies (nothing expires). The app's own limits apply again at its next open.
    private static func withOwnedStore<T>(path: String, key: StoreKey?, logger: Logger,
                                          _ body: (LogStore) throws -> T) throws -> T {
        guard FileSystem.exists(path) else {
            throw OutboxError.io(path: path, message: "no store at this path (check --store)")
        }
        var limits = StoreLimits()
        let held = (FileSystem.size(path) ?? 0) + (FileSystem.size(path + "-wal") ?? 0)
        limits.maxStorageSize = max(limits.maxStorageSize, 2 * held)
        limits.maxAgeMs = .max
        limits.key = key
        let store = try LogStore(path: path, limits: limits, clock: SystemClock(), logger: logger)
        defer { store.close() }
        return try body(store)
    }

    /// Runs `body` with the core on the loop thread (inline when already there) and returns its result.
    private func onLoopThread<T: Sendable>(_ body: @escaping (EngineCore) throws -> T) async throws -> T {
        if loop.isOnLoopThread {
            guard !core.isStopped else { throw OutboxError.shutDown }
            return try body(core)
        }
        let core = self.core
        return try await withCheckedThrowingContinuation { continuation in
            do {
                try intake.submit(.task {
                    guard !core.isStopped else { continuation.resume(throwing: OutboxError.shutDown); return }
                    continuation.resume(with: Result { try body(core) })
                })
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }
}
