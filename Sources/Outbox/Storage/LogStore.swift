import CSQLite
import Logging

/// The durable queue of logs (SPEC S1–S7, C4, C9, R2): one SQLite file in WAL mode, one connection, owned
/// by the engine's loop thread.
///
/// ```swift
/// let store = try LogStore(path: "/var/lib/app/outbox.sqlite", limits: StoreLimits(),
///                          clock: SystemClock(), logger: logger)
/// let result = try store.append(logs)                 // one transaction (group commit)
/// if let batch = try store.claim(limit: 50, nowMs: clock.wallMs()) {
///     // send batch.logs …
///     try store.complete(batchID: batch.batchID)      // or release(batchID:nextAttemptMs:)
/// }
/// store.close()
/// ```
///
/// Not thread-safe and not `Sendable`: every call must come from the thread that owns the store.
/// Every method throws `OutboxError` only.
final class LogStore {
    let path: String
    let limits: StoreLimits
    let clock: any OutboxClock
    let logger: Logger

    /// The path the corrupt database was moved to, when this store had to start afresh (SPEC S7).
    var recoveredFromCorruption: String?
    /// Logs whose commits the database lost while the engine was stopped (a WAL cut short, SPEC S7), found at open
    /// by the commit mark and reported once.
    var lostAtOpen = 0
    /// Whether this open created the store file (there was none).
    var createdAtOpen = false
    /// `<path>-mark` (see CommitMark.swift); nil when it cannot be opened.
    var commitMark: CommitMark?
    /// Whether the open ran `PRAGMA quick_check` (it does unless the last session closed the file cleanly).
    var checkedAtOpen = true

    /// Logs evicted by S2/S5 since this store was opened.
    var evictedTotal = 0
    /// Logs deleted by S4 since this store was opened.
    var expiredTotal = 0
    /// Logs moved to the dead-letter table since this store was opened.
    var deadLetteredTotal = 0
    /// Dead letters dropped (oldest first) to keep the table under its cap since this store was opened.
    var deadLettersDroppedTotal = 0
    /// Writes (appends, claims, releases, dead letters, meta) that hit SQLITE_FULL — the hard cap or a full
    /// disk — and were retried with more room: a measure of how good the soft size estimate is. Diagnostic.
    var fullRetriesTotal = 0

    var db: Database
    /// The owner's thread check (the engine's loop), run at every entry in debug builds. One connection,
    /// one thread: SQLite is opened without its own mutex.
    var assertOwner: () -> Void = {}
    private var lock: FileLock?

    /// Page size of the database file (chosen at creation, see `StoreOpener.pageSize(for:)`).
    var pageSize: Int
    /// `max_page_count`, the hard cap (S2): the configured one, or lower while a full disk caps the store (S7).
    var maxPages: Int
    /// The configured cap in pages (`maxStorageSize / pageSize`).
    var configuredMaxPages = 0
    /// SPEC S7: the disk filled up before the store reached its cap, so `maxPages` is what the disk holds and
    /// S2 eviction keeps the store within it. Lifted when the disk has room again (`liftDiskCapIfRoom`).
    var diskCapped = false
    /// Whether `<path>-reserve` holds its bytes (see LogStore+Disk.swift).
    var diskReserveHeld = false
    /// When `liftDiskCapIfRoom` last read the disk (monotonic ns): at most once a `diskCheckIntervalNs`.
    var lastDiskCheckNs: Int64 = 0
    /// Times a write found the disk full (S7). Diagnostic.
    var diskFullTotal = 0
    /// Next `seq` to assign. Kept in memory rather than with AUTOINCREMENT: AUTOINCREMENT reads and writes
    /// `sqlite_sequence` on every insert. Within one session a seq is never reused (so an engine holding seqs
    /// of an evicted in-flight batch cannot touch newer rows); across sessions it restarts above the largest
    /// stored seq, which keeps C4's order.
    var nextSeq: Int64 = 1
    /// Rows in `logs`, maintained on every change so S5 needs no COUNT(*) per append.
    var logCount = 0
    /// Lower bounds of the stored logs' ages (SPEC S4). Let `expire` skip its full scan when nothing can be old
    /// enough (it runs before every claim).
    var expiryBound = ExpiryBound()
    /// The boot id logs captured now carry: their age is measured on CLOCK_BOOTTIME (SPEC S4).
    var boot: Int64 = BootID.current
    var lastBatchID: Int64 = 0
    /// The highest batch id stored in meta (`lastBatchKey`). Ids are reserved a block at a time, so that a claim
    /// writes the meta row (one more b-tree update and WAL page) once per `batchIDBlock` claims, not every time.
    /// A restart continues above the reservation: ids never repeat, and some are skipped.
    var reservedBatchID: Int64 = 0
    static let batchIDBlock: Int64 = 4096
    /// Whether `retryTimesKey` is stored: written with the first retry time of a session, cleared at open.
    var retryTimesFlagged = false
    /// The batches in flight (C9), as recorded in the `leases` table.
    var leases = Leases()
    /// Per priority (by raw value), a seq below which no row of that priority is pending: the claim starts its
    /// scan there instead of walking past the rows in flight at the head of the table (two or three batches for
    /// every batch claimed). Raised by a claim that took every pending row below it, lowered by a release.
    var claimFloor: [Int64] = [0, 0]
    /// Logs no batch holds, by priority: what delivery decides on (`BatchQueue.waiting`). Changed only where a
    /// transaction that changes it has committed; nil after a change of unknown shape (eviction, expiry, a release,
    /// a dead letter, a requeue), and counted again at the next read.
    var pending: Waiting?
    /// Bytes the schema takes before any log (one page per table and index, plus the schema page).
    var baseBytes = 0

    /// Number of WAL pages after which SQLite checkpoints on commit (a quarter of the cap, at most SQLite's
    /// default of 1000; for caps above 64 MiB a sixteenth, at most 4096 pages = 16 MiB), and the size the WAL file
    /// is truncated back to when it is reset after a checkpoint. Together they bound the -wal file at about the
    /// larger of twice the checkpoint size and the biggest single transaction. The limit is twice the checkpoint
    /// size so the file is not cut and regrown every cycle. A checkpoint syncs twice on the loop thread, and
    /// meanwhile nothing is sent: large stores checkpoint less often, in larger steps.
    var walAutocheckpointPages: Int { max(16, min(1000, maxPages / 4), min(4096, maxPages / 16)) }
    var walSizeLimit: Int { max(1024 * 1024, 2 * walAutocheckpointPages * pageSize) }

    /// Smallest accepted `maxStorageSize` (SPEC S2).
    static let minimumStorageSize = 24 * 1024
    static let schemaVersion = LogSchema.version

    /// Opens (creating if needed) the store at `path` and takes its lock. See the type's documentation.
    init(path: String, limits: StoreLimits, clock: any OutboxClock, logger: Logger) throws(OutboxError) {
        try Self.validate(limits)
        self.path = path
        self.limits = limits
        self.clock = clock
        self.logger = logger

        // Before anything is created at or beside the path: a file that is not a store stays untouched (S7).
        _ = try StorePathCheck.classify(path)
        let lock: FileLock
        do {
            lock = try FileLock(path: path + ".lock")
        } catch {
            switch error {
            case .held: throw .storeLocked(path: path)
            case .io(let message): throw .io(path: path + ".lock", message: "cannot lock the store: \(message)")
            }
        }

        Self.releaseReserveIfDiskFull(path: path)
        // A store file created now has no commits to lose: a mark left by a deleted store is no loss of this one.
        self.createdAtOpen = !FileSystem.exists(path)
        let opened = try StoreOpener.openOrRecover(path: path, limits: limits, clock: clock, logger: logger)
        self.lock = lock
        self.db = opened.db
        self.recoveredFromCorruption = opened.movedAside
        self.checkedAtOpen = opened.checked
        self.pageSize = 4096
        self.maxPages = 0
        do throws(OutboxError) {
            do throws(OutboxError) {
                try configureOpenedDatabase()
            } catch where error.isCorruption && recoveredFromCorruption == nil {
                // Damage that the start-up's own reads found (the row count reads every leaf): the same
                // treatment as at any other moment (S7). Likelier when the open skipped quick_check.
                try recoverFromCorruption(cause: error)
            }
        } catch {
            db.close()
            lock.unlock()
            throw error
        }
        // In exclusive mode SQLite holds the database's lock from the open's first read until `close()`: the `.lock`
        // file only kept two openers from racing through the open, and its descriptor need not stay (SPEC F4).
        if limits.exclusiveLock {
            lock.unlock()
            self.lock = nil
        }
    }

    deinit { close() }

    /// Closes the database (SQLite checkpoints and removes the WAL when the last connection closes) and
    /// releases the lock. Idempotent; every later call throws `shutDown`.
    func close() {
        guard db.isOpen || lock != nil else { return }
        markClosedCleanly()
        db.close()
        commitMark = nil
        // SPEC S7: the WAL file is gone now; its room is the next open's reserve, should the disk be full by then.
        if !diskReserveHeld && pageSize > 0 { holdDiskReserve(leaving: 0) }
        lock?.unlock()
        lock = nil
    }

    var isOpen: Bool { db.isOpen }

    static func validate(_ limits: StoreLimits) throws(OutboxError) {
        if limits.maxStorageSize < minimumStorageSize {
            throw .invalidConfiguration("maxStorageSize must be at least \(minimumStorageSize) bytes (24 KiB), got \(limits.maxStorageSize)")
        }
        if let count = limits.maxLogCount, count < 1 {
            throw .invalidConfiguration("maxLogCount must be at least 1 when set, got \(count)")
        }
        if limits.maxAgeMs <= 0 {
            throw .invalidConfiguration("maxAgeMs must be positive, got \(limits.maxAgeMs)")
        }
        if limits.maxDeadLetterBytes < 0 {
            throw .invalidConfiguration("maxDeadLetterBytes must not be negative, got \(limits.maxDeadLetterBytes)")
        }
    }

    /// Runs `body`; when the database turns out to be corrupt mid-session, moves it aside, starts a fresh one
    /// (SPEC S7) and runs `body` once more.
    func guarded<T>(_ body: () throws(OutboxError) -> T) throws(OutboxError) -> T {
        #if DEBUG
        assertOwner()
        #endif
        guard db.isOpen else { throw .shutDown }
        do throws(OutboxError) {
            return try body()
        } catch {
            guard error.isCorruption else { throw error }
            try recoverFromCorruption(cause: error)
            return try body()
        }
    }

    // MARK: Claiming (C4, C9)

    /// Marks up to `limit` claimable logs as one in-flight batch and returns them: critical logs first, then
    /// normal ones, each in ascending `seq` (C4). Claimable: not in flight and `next_attempt_ms <= nowMs`.
    /// `priority` restricts the claim to one priority. Expired logs (S4) are deleted first.
    /// `nowMs` and `nextAttemptMs` are in the caller's clock; the store only compares them.
    func claim(limit: Int, nowMs: Int64, priority: Priority? = nil) throws(OutboxError) -> ClaimedBatch? {
        try claim(limit: limit, nowMs: nowMs, priority: priority, completing: nil).batch
    }

    /// `claim`, and before it, in the same transaction, what `complete(batchID: completing)` does: delivery deletes a
    /// delivered batch with the claim of the next one, one commit per request instead of two (each commit writes
    /// the `leases` page and the WAL's bookkeeping again). Returns the claimed batch (nil when nothing was
    /// claimable; the delivered one is deleted all the same) and how many of `completing`'s rows were deleted.
    func claim(limit: Int, nowMs: Int64, priority: Priority? = nil,
               completing: Int64?) throws(OutboxError) -> (batch: ClaimedBatch?, completed: Int) {
        guard limit > 0 else {
            guard let completing else { return (nil, 0) }
            return (nil, try complete(batchID: completing))
        }
        return try guarded { () throws(OutboxError) -> (batch: ClaimedBatch?, completed: Int) in
            _ = try expireOnce(nowMs: clock.wallMs())
            let delivered = completing.map { leases.stretches(of: $0) } ?? []
            // A lease is a row of its own: at the cap that can need a page.
            let (claimed, completed) = try withRoom(bytes: 64 * min(limit, 1000)) { () throws(OutboxError) -> ((ClaimedBatch, [LeaseStretch], reserved: Int64?)?, Int) in
                var completed = 0
                if let completing { completed = try deleteDelivered(completing, delivered) }
                var logs: [StoredLog] = []
                logs.reserveCapacity(min(limit, 512))
                var stretches: [LeaseStretch] = []
                let batchID = lastBatchID + 1
                for candidate in [Priority.critical, .normal] where priority == nil || priority == candidate {
                    guard logs.count < limit else { break }
                    let scan = try db.cachedStatement(LogSchema.claimScan[candidate.rawValue])
                    defer { scan.reset() }
                    try scan.bind(claimFloor[candidate.rawValue], at: 1)
                    var leased = LeaseCursor(leases.stretches(candidate))
                    var open: LeaseStretch?
                    while logs.count < limit, try scan.step() {
                        let seq = scan.int64(at: 0)
                        // A log that cannot be taken ends the stretch: the next one taken starts another.
                        if leased.covers(seq) || scan.int64(at: 8) > nowMs {
                            if let stretch = open { stretches.append(stretch) }
                            open = nil
                            continue
                        }
                        logs.append(Self.readLog(scan))
                        if open == nil {
                            open = LeaseStretch(batch: batchID, priority: candidate, first: seq, last: seq)
                        } else {
                            open?.last = seq
                        }
                    }
                    if let stretch = open { stretches.append(stretch) }
                }
                guard !logs.isEmpty else { return (nil, completed) }
                try record(stretches)
                var reserved: Int64?
                if batchID > reservedBatchID {
                    let reservation = batchID + Self.batchIDBlock - 1
                    try writeMeta(Self.lastBatchKey, String(reservation))
                    reserved = reservation
                }
                return ((ClaimedBatch(batchID: batchID, logs: logs), stretches, reserved), completed)
            }
            if let completing {
                leases.remove(batch: completing)
                logCount -= completed
            }
            guard let (batch, stretches, reserved) = claimed else { return (nil, completed) }
            lastBatchID = batch.batchID
            if let reserved { reservedBatchID = reserved }
            if pending != nil {
                let critical = batch.logs.reduce(0) { $0 + ($1.priority == .critical ? 1 : 0) }
                pending?.critical -= critical
                pending?.normal -= batch.logs.count - critical
            }
            leases.add(stretches)
            // With every pending row claimable (nowMs = Int64.max, as delivery claims), the claim took the lowest
            // pending rows of each priority: none is left below the last one taken.
            if nowMs == Int64.max {
                for candidate in Priority.allCases {
                    if let last = batch.logs.last(where: { $0.priority == candidate }) {
                        claimFloor[candidate.rawValue] = max(claimFloor[candidate.rawValue], last.seq + 1)
                    }
                }
            }
            return (batch, completed)
        }
    }

    /// Deletes a delivered batch. Returns the number of rows deleted (fewer than claimed when some were
    /// evicted or expired meanwhile).
    @discardableResult
    func complete(batchID: Int64) throws(OutboxError) -> Int {
        try guarded { () throws(OutboxError) -> Int in
            let stretches = leases.stretches(of: batchID)
            let deleted = try retryingOnFullDisk { () throws(OutboxError) -> Int in
                try db.transaction { () throws(OutboxError) -> Int in try deleteDelivered(batchID, stretches) }
            }
            leases.remove(batch: batchID)
            logCount -= deleted
            return deleted
        }
    }

    /// Deletes a delivered batch's rows and its leases, in the caller's transaction (which updates `leases` and
    /// `logCount` once it has committed).
    private func deleteDelivered(_ batchID: Int64, _ stretches: [LeaseStretch]) throws(OutboxError) -> Int {
        let deleted = try run(LogSchema.deleteStretch, over: stretches)
        try db.execute("DELETE FROM leases WHERE batch = ?", [.integer(batchID)])
        try keepSeqHigh(deletingThrough: stretches.lazy.map(\.last).max())
        return deleted
    }

    /// Deletes the given logs (part of a split batch that was delivered).
    @discardableResult
    func complete(seqs: [Int64]) throws(OutboxError) -> Int {
        guard !seqs.isEmpty else { return 0 }
        return try guarded { () throws(OutboxError) -> Int in
            let cut = leases.cutting(seqs)
            let deleted = try retryingOnFullDisk { () throws(OutboxError) -> Int in try db.transaction { () throws(OutboxError) -> Int in
                let delete = try db.cachedStatement("DELETE FROM logs WHERE seq = ?")
                var deleted = 0
                for seq in seqs {
                    try delete.bind(seq, at: 1)
                    try delete.run()
                    deleted += db.changes
                }
                try rewriteLeases(cut)
                try keepSeqHigh(deletingThrough: seqs.max())
                return deleted
            } }
            cut.forEach { leases.replace(batch: $0.batch, with: $0.stretches) }
            logCount -= deleted
            return deleted
        }
    }

    /// Returns a batch's logs to pending, claimable again from `nextAttemptMs` (C9, R3).
    @discardableResult
    func release(batchID: Int64, nextAttemptMs: Int64) throws(OutboxError) -> Int {
        try guarded { () throws(OutboxError) -> Int in
            let stretches = leases.stretches(of: batchID)
            let released = try withRoom(bytes: 4 * pageSize) { () throws(OutboxError) -> Int in
                let released = try run(LogSchema.releaseStretch, over: stretches) { (update: Statement) throws(OutboxError) in
                    try update.bind(nextAttemptMs, at: 3)
                }
                try db.execute("DELETE FROM leases WHERE batch = ?", [.integer(batchID)])
                try flagRetryTimes(nextAttemptMs)
                return released
            }
            if nextAttemptMs != 0 { retryTimesFlagged = true }
            leases.remove(batch: batchID)
            claimFloor = [0, 0]  // rows below the floor are pending again
            pending = nil
            return released
        }
    }

    /// Returns the given logs to pending, claimable again from `nextAttemptMs` (splitting a batch, R1).
    @discardableResult
    func release(seqs: [Int64], nextAttemptMs: Int64) throws(OutboxError) -> Int {
        guard !seqs.isEmpty else { return 0 }
        return try guarded { () throws(OutboxError) -> Int in
            let cut = leases.cutting(seqs)
            let released = try withRoom(bytes: 16 * seqs.count + 64 * cut.count + 64) { () throws(OutboxError) -> Int in
                let update = try db.cachedStatement("UPDATE logs SET next_attempt_ms = ? WHERE seq = ?")
                var released = 0
                for seq in seqs {
                    try update.bind(nextAttemptMs, at: 1)
                    try update.bind(seq, at: 2)
                    try update.run()
                    released += db.changes
                }
                try rewriteLeases(cut)
                try flagRetryTimes(nextAttemptMs)
                return released
            }
            if nextAttemptMs != 0 { retryTimesFlagged = true }
            cut.forEach { leases.replace(batch: $0.batch, with: $0.stretches) }
            claimFloor = [0, 0]  // rows below the floor are pending again
            pending = nil
            return released
        }
    }

    /// Stores `retryTimesKey` with the session's first retry time, in the caller's transaction (which sets
    /// `retryTimesFlagged` once it has committed).
    private func flagRetryTimes(_ nextAttemptMs: Int64) throws(OutboxError) {
        if nextAttemptMs != 0 && !retryTimesFlagged { try writeMeta(Self.retryTimesKey, "1") }
    }

    /// Writes the stretches `Leases.cutting` left to each batch in place of its old ones. Part of the caller's
    /// transaction; the caller updates `leases` once it has committed.
    private func rewriteLeases(_ cut: [(batch: Int64, stretches: [LeaseStretch])]) throws(OutboxError) {
        guard !cut.isEmpty else { return }
        let drop = try db.cachedStatement("DELETE FROM leases WHERE batch = ?")
        for (batch, stretches) in cut {
            try drop.bind(batch, at: 1)
            try drop.run()
            try record(stretches)
        }
    }

    /// Inserts lease stretches into the `leases` table (part of the caller's transaction).
    private func record(_ stretches: [LeaseStretch]) throws(OutboxError) {
        let mark = try db.cachedStatement("INSERT INTO leases (batch, priority, first, last) VALUES (?, ?, ?, ?)")
        for stretch in stretches {
            try mark.bind(stretch.batch, at: 1)
            try mark.bind(stretch.priority.rawValue, at: 2)
            try mark.bind(stretch.first, at: 3)
            try mark.bind(stretch.last, at: 4)
            try mark.run()
        }
    }

    /// Runs, for each stretch, the statement `sql[priority]` with the stretch's first and last seqs as `?1` and
    /// `?2` (and whatever `bind` adds). Returns the rows changed.
    private func run(_ sql: [String], over stretches: [LeaseStretch],
                     bind: (Statement) throws(OutboxError) -> Void = { _ in }) throws(OutboxError) -> Int {
        var changed = 0
        for stretch in stretches {
            let statement = try db.cachedStatement(sql[stretch.priority.rawValue])
            try bind(statement)
            try statement.bind(stretch.first, at: 1)
            try statement.bind(stretch.last, at: 2)
            try statement.run()
            changed += db.changes
        }
        return changed
    }

    // MARK: Expiry (S4)

    /// Deletes logs older than `maxAgeMs` (SPEC S4: boot-time age under this boot, wall-clock age before `nowMs`
    /// otherwise), counts and logs them. Returns how many were deleted.
    @discardableResult
    func expire(nowMs: Int64) throws(OutboxError) -> Int {
        try guarded { () throws(OutboxError) -> Int in try expireOnce(nowMs: nowMs) }
    }

    func expireOnce(nowMs: Int64) throws(OutboxError) -> Int {
        let wallCutoff = nowMs &- limits.maxAgeMs
        let monoCutoff = clock.monoNs() &- limits.maxAgeMs &* 1_000_000
        guard expiryBound.mayHaveExpired(wallCutoff: wallCutoff, monoCutoff: monoCutoff) else { return 0 }
        // SPEC S4: a log of this boot ages on CLOCK_BOOTTIME, so that a wall clock stepped by NTP expires nothing
        // by itself; a log of an earlier boot can only age on the wall clock. No index on either column (it would
        // cost every insert): this scan runs only when a bound says something may have expired, and re-tightens them.
        let expired = try db.transaction { () throws(OutboxError) -> Int in
            try db.execute("DELETE FROM logs WHERE CASE WHEN boot = ?1 THEN mono_ns < ?2 ELSE wall_ms < ?3 END",
                           [.integer(boot), .integer(monoCutoff), .integer(wallCutoff)])
            let deleted = db.changes
            if deleted > 0 { try keepSeqHighAfterDelete() }
            expiryBound = try Self.readExpiryBound(db, boot: boot)
            return deleted
        }
        guard expired > 0 else { return 0 }
        pending = nil
        logCount -= expired
        expiredTotal += expired
        logger.info("deleted logs older than the maximum age (SPEC S4)", metadata: [
            "outbox.expired": "\(expired)",
            "outbox.max_age_ms": "\(limits.maxAgeMs)",
        ])
        return expired
    }

    static func readExpiryBound(_ db: Database, boot: Int64) throws(OutboxError) -> ExpiryBound {
        ExpiryBound(otherBootWallMs: try db.int64("SELECT min(wall_ms) FROM logs WHERE boot != ?", [.integer(boot)]),
                    thisBootMonoNs: try db.int64("SELECT min(mono_ns) FROM logs WHERE boot = ?", [.integer(boot)]))
    }

    // MARK: Inspection (X4)

    func counts() throws(OutboxError) -> StoreCounts {
        try guarded { () throws(OutboxError) -> StoreCounts in try StoreInspector.readCounts(db) }
    }

    /// Logs waiting to be claimed, by priority, from the row count kept in memory, the critical logs' index and
    /// the leases: unlike `counts()`, no scan of the table (`count(*)` and `min(wall_ms)` read every page, which a
    /// large store would pay at every engine start).
    func waitingCounts() throws(OutboxError) -> (normal: Int, critical: Int) {
        try guarded { () throws(OutboxError) -> (normal: Int, critical: Int) in
            let split = try Self.splitByState(db, total: logCount, inFlightSQL: LogSchema.countInFlight)
            return (split.pendingNormal, split.pendingCritical)
        }
    }

    /// Splits `total` stored logs into pending normal, pending critical and in flight: the critical logs are counted
    /// through their index, the in-flight ones by `inFlightSQL` (count, critical count).
    static func splitByState(_ db: Database, total: Int, inFlightSQL: String)
        throws(OutboxError) -> (pendingNormal: Int, pendingCritical: Int, inFlight: Int) {
        let critical = Int(try db.int64("SELECT count(*) FROM logs WHERE priority = 1") ?? 0)
        let inFlight = try db.cachedStatement(inFlightSQL)
        defer { inFlight.reset() }
        var inFlightTotal = 0
        var inFlightCritical = 0
        if try inFlight.step() {
            inFlightTotal = inFlight.int(at: 0)
            inFlightCritical = inFlight.int(at: 1)
        }
        return (total - critical - (inFlightTotal - inFlightCritical), critical - inFlightCritical, inFlightTotal)
    }

    /// `(page_count − freelist_count) × page_size`: what the database holds, free pages excluded.
    static func usedBytes(_ db: Database) throws(OutboxError) -> Int {
        let pages = try db.pragma("page_count")
        let free = try db.pragma("freelist_count")
        let size = try db.pragma("page_size")
        return Int(pages - free) * Int(size)
    }

    /// Every stored log in ascending `seq` (tests and inspection; loads everything).
    func allLogs() throws(OutboxError) -> [StoredLog] {
        try guarded { () throws(OutboxError) -> [StoredLog] in
            let select = try db.cachedStatement("SELECT \(LogSchema.logColumns) FROM logs ORDER BY seq")
            defer { select.reset() }
            var logs: [StoredLog] = []
            while try select.step() { logs.append(Self.readLog(select)) }
            return logs
        }
    }


    // MARK: Opt-out (T6)

    /// Deletes every stored log and dead letter (the user opted out), then rebuilds the file and truncates the
    /// WAL so that the deleted content does not linger in free pages. Meta, event names and device contexts
    /// stay. Returns the number of logs deleted.
    @discardableResult
    func deleteAllLogs() throws(OutboxError) -> Int {
        try guarded { () throws(OutboxError) -> Int in
            let deleted = try db.transaction { () throws(OutboxError) -> Int in
                try db.execute("DELETE FROM logs")
                let deleted = db.changes
                try keepSeqHigh(deletingThrough: nextSeq - 1)
                try db.execute("DELETE FROM leases")
                try db.execute("DELETE FROM dead_letters")
                return deleted
            }
            leases.removeAll()
            logCount = 0
            pending = Waiting()
            expiryBound = ExpiryBound()
            // The deletion is what the user asked for and it is committed; the rebuild only scrubs free pages, so
            // its failure (e.g. a full disk) is reported, not thrown.
            do throws(OutboxError) {
                try db.exec("VACUUM")
                try db.checkpoint(.truncate)
            } catch {
                logger.info("could not rebuild the store after deleting its logs; deleted content may remain in free pages until reused",
                            metadata: ["outbox.error": "\(error)"])
            }
            return deleted
        }
    }

    // MARK: WAL

    /// Copies the WAL back into the database and truncates it (housekeeping). Returns false when a reader
    /// (`inspect` in another process) kept it from finishing: not an error, the next checkpoint catches up.
    /// Never waits: the loop thread must not block on another process.
    @discardableResult
    func checkpoint() throws(OutboxError) -> Bool {
        guard db.isOpen else { throw .shutDown }
        return try !db.checkpoint(.truncate).busy
    }

    /// Size of the -wal file now (0 when absent).
    var walFileSize: Int { FileSystem.size(path + "-wal") ?? 0 }

    // MARK: Row decoding

    static func readLog(_ row: Statement) -> StoredLog {
        StoredLog(seq: row.int64(at: 0),
                  id: readID(row, column: 6),
                  priority: Priority(rawValue: row.int(at: 1)) ?? .normal,
                  wallMs: row.int64(at: 2),
                  monoNs: row.int64(at: 3),
                  boot: row.int64(at: 4),
                  context: row.int64(at: 5),
                  payload: row.blob(at: 7))
    }

    /// The 16 bytes are the UUID in its canonical (big-endian) order; a shorter blob reads as zero-padded
    /// rather than trapping.
    static func readID(_ row: Statement, column: Int32) -> UUIDBytes {
        row.withBlob(at: column) { bytes -> UUIDBytes in
            var words: (UInt64, UInt64) = (0, 0)
            withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes.prefix(16))) }
            return UUIDBytes(high: UInt64(bigEndian: words.0), low: UInt64(bigEndian: words.1))
        }
    }
}
