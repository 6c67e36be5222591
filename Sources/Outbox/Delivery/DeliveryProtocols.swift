/// The durable queue delivery works on: `LogStore` implements it over SQLite; the tests' in-memory
/// fake implements it too, so the path from a stored log to a dead letter is tested without SQLite or sockets.
/// Its counts are the only counts: delivery keeps none of its own.
protocol BatchQueue: AnyObject {
    /// Logs no batch holds, by priority.
    func waiting() throws(OutboxError) -> Waiting
    /// Marks up to `limit` logs as one batch in flight (critical first, then by seq: SPEC C4); before it, in the same
    /// transaction, deletes the delivered batch `completing`. Nil when nothing was claimable.
    func claimBatch(limit: Int, completing: Int64?) throws(OutboxError) -> ClaimedBatch?
    /// Deletes a delivered batch by its lease.
    func complete(batchID: Int64) throws(OutboxError) -> Int
    /// Deletes delivered logs by seq (the parts of a split batch).
    func complete(seqs: [Int64]) throws(OutboxError) -> Int
    /// Gives a batch's logs back to pending, claimable at once.
    func release(batchID: Int64, nextAttemptMs: Int64) throws(OutboxError) -> Int
    func release(seqs: [Int64], nextAttemptMs: Int64) throws(OutboxError) -> Int
    /// Moves refused logs to the dead letters with the server's status and reason (SPEC R2).
    func deadLetter(seqs: [Int64], status: Int, reason: String) throws(OutboxError) -> Int
    /// Deletes held logs that grew too old to send (SPEC S4).
    func expire(seqs: [Int64]) throws(OutboxError) -> Int
    /// Deletes every stored log (SPEC T6).
    func deleteAllLogs() throws(OutboxError) -> Int
    /// A device context version, for logs captured under one no longer in memory (SPEC A10).
    func context(id: Int64) throws(OutboxError) -> [UInt8]?
    /// Persists why sending is disabled, for `outbox status` in another process (SPEC R5).
    func setDisabledReason(_ reason: String?) throws(OutboxError)
    /// Persists the destination a request went to, for `outbox status` (SPEC D1).
    func recordDestination(_ name: String) throws(OutboxError)
    /// Adds to the total of logs refused inside accepted requests, kept in the store (SPEC D5).
    func addServerRejected(_ count: Int) throws(OutboxError)
}

extension BatchQueue {
    func recordDestination(_ name: String) throws(OutboxError) {}
    func addServerRejected(_ count: Int) throws(OutboxError) {}
}

/// Sends one request and reports how it ended: the curl transport implements it, and so does the tests' fake.
protocol HTTPSender: AnyObject {
    func send(_ request: HTTPRequest, completion: @escaping (TransferResult) -> Void) -> TransferID
    /// Ends a transfer early; its completion reports `.failure(.cancelled)`.
    func cancel(_ id: TransferID)
    func close()
}

/// The one timer delivery arms (a libuv timer in the engine, a manual one in tests).
protocol DeliveryTimer: AnyObject {
    var action: () -> Void { get set }
    func start(afterMs: UInt64, repeatMs: UInt64)
    func stop()
    func close()
}

extension LoopTimer: DeliveryTimer {}

extension Transport: HTTPSender {}
