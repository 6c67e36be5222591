/// How a write that failed with SQLITE_FULL is tried again (SPEC S2, S3, S7), as a pure value: whether there is
/// another attempt, whether the disk is relieved first (`LogStore.relieveFullDisk`: the reserve given back, the WAL
/// truncated, the cap lowered to what the disk holds), and how much room the next attempt asks for. Every retry on a
/// full store or disk goes through one (`LogStore.retryingOnFull`), so that the writes differ only in their plan's
/// parameters, which the factories below name and explain.
///
/// A failed attempt rolled back whole: nothing committed is touched by it, and nothing here depends on what it did.
struct FullRetryPlan: Sendable, Equatable {
    /// What relieving a full disk is to this write.
    enum Relief: Sendable, Equatable {
        /// Never tried: the write's retries ask for more room (requeue) or fall back (dead letters).
        case never
        /// Tried before every retry, and the retry needs it: a write that frees room must not need room the disk
        /// does not have, so when the disk was not what was full there is nothing to try again.
        case required
        /// Tried before every retry, which happens either way; when the disk was not what was full, the WAL is
        /// checkpointed instead (`checkpointsWithoutRelief`), so that it is rewritten from its start, not grown.
        case everyRetry
        /// Tried at each failure until it succeeds once; the retry it buys is a retry of its own, asking no more
        /// room: what failed was the WAL's growth, which eviction cannot help.
        case untilRelieved
    }

    /// Attempts at most, the first included (a relief's retry under `untilRelieved` is not one).
    let maxAttempts: Int
    let relief: Relief
    /// The margin the second attempt adds to the room it asks for; it doubles with every attempt after.
    let firstMargin: Int
    /// The attempt about to run, from 1.
    private(set) var attempt = 1
    /// Whether the disk was relieved already (`untilRelieved`).
    private(set) var relieved = false

    init(maxAttempts: Int, relief: Relief, firstMargin: Int = 0) {
        self.maxAttempts = maxAttempts
        self.relief = relief
        self.firstMargin = firstMargin
    }

    // MARK: The writes' plans

    /// Attempts of the writes that make room by eviction (appends, requeues, small writes): after five failures in a
    /// row the cap cannot be met, and the disk is what is full.
    static let evictingAttempts = 6

    /// A write that frees room (deleting delivered logs): retried only when the disk was relieved, twice at most.
    static let freeingRoom = FullRetryPlan(maxAttempts: 3, relief: .required)

    /// An append (group commit, SPEC S2, S7): each retry relieves the disk (or checkpoints the WAL), then asks for the
    /// room the file could not grow into plus a margin that starts at `8 × pageSize` and an eighth of the batch.
    static func appending(pageSize: Int, batchBytes: Int) -> FullRetryPlan {
        FullRetryPlan(maxAttempts: evictingAttempts, relief: .everyRetry, firstMargin: 8 * pageSize + batchBytes / 8)
    }

    /// Requeued dead letters (SPEC R2): as an append, without relieving the disk.
    static func requeueing(pageSize: Int) -> FullRetryPlan {
        FullRetryPlan(maxAttempts: evictingAttempts, relief: .never, firstMargin: 8 * pageSize)
    }

    /// A small write that must not fail because logs filled the store (meta, contexts, claim marks; SPEC S7): the disk
    /// relieved once, then evictions for twice `bytes` and the budget's slack, doubling.
    static func smallWrite(bytes: Int, slackBytes: Int) -> FullRetryPlan {
        FullRetryPlan(maxAttempts: evictingAttempts, relief: .untilRelieved, firstMargin: 2 * (bytes + slackBytes))
    }

    /// Dead-lettering (SPEC R2): one attempt per way of keeping the letters (`LogStore.DeadLetterMode`), without relieving
    /// the disk.
    static let deadLettering = FullRetryPlan(maxAttempts: 3, relief: .never)

    // MARK: Deciding

    /// After a failure: whether another attempt may follow at all (checked before anything is done about it).
    var mayRetry: Bool { attempt < maxAttempts }

    /// After a failure that may be retried: whether the caller relieves the disk before deciding (`retry`).
    var triesRelief: Bool {
        switch relief {
        case .never: false
        case .required, .everyRetry: true
        case .untilRelieved: !relieved
        }
    }

    /// After a failure that may be retried, the relief tried or not (`diskRelieved`): whether the write runs again.
    /// Moves the plan to the next attempt.
    mutating func retry(diskRelieved: Bool) -> Bool {
        switch relief {
        case .required:
            guard diskRelieved else { return false }
        case .untilRelieved where diskRelieved && !relieved:
            relieved = true
            return true
        case .never, .everyRetry, .untilRelieved:
            break
        }
        attempt += 1
        return true
    }

    /// Whether, the disk not relieved, the WAL is checkpointed before the retry (`everyRetry`).
    func checkpointsWithoutRelief(diskRelieved: Bool) -> Bool { relief == .everyRetry && !diskRelieved }

    /// Whether this attempt asks for more room than the write's own (every attempt after the first).
    var asksForRoom: Bool { attempt > 1 }

    /// The margin this attempt adds: `firstMargin` at the second attempt, doubled at each one after.
    var margin: Int { asksForRoom ? firstMargin << (attempt - 2) : 0 }

    /// The bytes this attempt asks room for beyond the write's own: what the file could not grow into (the budget
    /// less what is in use, `usedBytes` read after the failure) plus the margin; 0 at the first attempt.
    func extraBytes(usedBytes: Int, budgetBytes: Int) -> Int {
        asksForRoom ? max(0, budgetBytes - usedBytes) + margin : 0
    }
}
