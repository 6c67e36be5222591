import Logging

/// A full disk (SPEC S7): handled as S2 eviction, and delivery goes on.
///
/// Every write needs disk for the WAL, deletes of delivered logs included, and a checkpoint grows the database file
/// by the new pages the WAL holds. On a disk with no byte left, a WAL that cannot be checkpointed can never be
/// reset, so nothing could be written again — not even the deletes that would make room. Three things keep that
/// from happening:
/// - a reserve file (`<path>-reserve`, `diskReserveBytes`) allocated while there is room, and given back to the
///   disk when a write hits SQLITE_FULL with the store below its own cap: its bytes let the checkpoint finish, and
///   the WAL is then truncated, so the deletes and appends that follow have room;
/// - the store then caps itself at what the disk holds (`maxPages` lowered to the pages the file has, less what the
///   WAL needs): new logs reuse the pages of evicted and delivered ones, by S2 order, without the file growing;
/// - while the disk is short of room, the WAL is checkpointed every few frames (`WALCheckpointer.tight`), so what a
///   checkpoint needs stays within the reserve.
/// When the disk has room again, the reserve is taken back and the cap raised (`liftDiskCapIfRoom`).
extension LogStore {
    var reservePath: String { DiskReserve(path: path).reservePath }
    var diskDirectory: String { FileSystem.directory(of: path) }

    /// At open, before SQLite needs room for the -shm and -wal files: on a disk with less room than the reserve,
    /// the reserve goes (a store that cannot be opened cannot deliver what makes room).
    static func releaseReserveIfDiskFull(path: String) {
        let reserve = path + "-reserve"
        guard FileSystem.exists(reserve), let available = FileSystem.availableBytes(FileSystem.directory(of: path)),
              available < 256 * 1024 else { return }
        FileSystem.remove(reserve)
    }

    /// `DiskReserve.hold` on the store's budget.
    func holdDiskReserve(leaving: Int) {
        DiskReserve(path: path).hold(&disk, leaving: leaving, logger: logger)
    }

    /// After a write failed with SQLITE_FULL: when the disk, not the store's cap, is what is full, gives the reserve
    /// back, checkpoints and truncates the WAL, and caps the store at what the disk holds. Returns whether the disk
    /// was full (the caller then tries again; S2 eviction does the rest).
    @discardableResult
    func relieveFullDisk() -> Bool {
        let pagesBefore = (try? db.pragma("page_count")).map(Int.init) ?? disk.maxPages
        // The cap was not reached if the disk could not have held what the cap still allows.
        guard let available = FileSystem.availableBytes(diskDirectory),
              disk.diskIsShort(pages: pagesBefore, availableBytes: available) else { return false }
        if disk.reserveHeld {
            FileSystem.remove(reservePath)
            disk.reserveHeld = false
        }
        db.walCheckpointer?.tight = true
        // What the WAL holds goes into the file (the reserve's bytes are for the file's growth), then the WAL file is
        // cut to nothing, so that the next transactions have its bytes.
        let checkpointed: Bool
        do throws(OutboxError) {
            checkpointed = try !db.checkpoint(.truncate).busy
        } catch {
            checkpointed = false
        }
        let pages = (try? db.pragma("page_count")).map(Int.init) ?? pagesBefore
        let cap = disk.capOnFullDisk(pages: pages, availableBytes: FileSystem.availableBytes(diskDirectory) ?? 0)
        let wasCapped = disk.diskCapped
        disk.diskFull(cap: cap)
        record(.diskFull)
        if let cap {
            // SQLite keeps the larger of this and the page count: the file never has to grow past what it has.
            try? db.exec("PRAGMA max_page_count = \(cap)")
            if !wasCapped {
                logger.warning("the disk is full: the store keeps to the space it has, evicting the oldest logs for new ones (SPEC S7)", metadata: [
                    "outbox.store": "\(path)", "outbox.bytes": "\(cap * pageSize)", "outbox.checkpointed": "\(checkpointed)",
                ])
            }
        }
        if disk.diskCapped { db.walCheckpointer?.everyCommit = true }
        return true
    }

    /// While the disk caps the store or the reserve is missing: at most every `diskCheckIntervalNs`, takes the
    /// reserve back and raises the cap as far as the disk's room allows, up to the configured one.
    func liftDiskCapIfRoom() {
        let now = clock.monoNs()
        guard disk.checkDue(nowNs: now) else { return }
        disk.lastCheckNs = now
        guard var available = FileSystem.availableBytes(diskDirectory) else { return }
        let reserve = disk.diskReserveBytes
        if !disk.reserveHeld && available >= 3 * reserve {
            holdDiskReserve(leaving: 2 * reserve)
            if disk.reserveHeld { available -= reserve }
        }
        guard disk.diskCapped, let pages = try? db.pragma("page_count"),
              let cap = disk.capWithRoom(pages: Int(pages), availableBytes: available) else { return }
        try? db.exec("PRAGMA max_page_count = \(cap)")
        if disk.lift(to: cap) {
            db.walCheckpointer?.everyCommit = false
            logger.info("the disk has room again; the store is back to its configured cap (SPEC S7)", metadata: [
                "outbox.store": "\(path)", "outbox.bytes": "\(cap * pageSize)",
            ])
        }
    }

    /// Runs `body` (one transaction) as `plan` says (FullRetryPlan.swift): when it fails with SQLITE_FULL and the
    /// plan has another attempt, relieves the disk if the plan tries that, and runs `body` again with the plan at its
    /// next attempt (which tells `body` how much room to ask for). The one loop every write on a full store or disk
    /// goes through.
    func retryingOnFull<T>(_ plan: FullRetryPlan, _ body: (FullRetryPlan) throws(OutboxError) -> T) throws(OutboxError) -> T {
        var plan = plan
        while true {
            do throws(OutboxError) {
                return try body(plan)
            } catch {
                guard error.isStorageFull, plan.mayRetry else { throw error }
                let relieved = plan.triesRelief && relieveFullDisk()
                guard plan.retry(diskRelieved: relieved) else { throw error }
                // A checkpointed WAL is rewritten from its start instead of grown.
                if plan.checkpointsWithoutRelief(diskRelieved: relieved) { _ = try? db.checkpoint(.passive) }
                record(.retriedFull)
            }
        }
    }
}

/// The reserve file beside a store and the watch of its disk (SPEC S7, above): the store's, and the opening's
/// (`StoreOpening`), which sets them up before the store uses the connection.
struct DiskReserve {
    /// The store file's.
    let path: String

    var reservePath: String { path + "-reserve" }
    var directory: String { FileSystem.directory(of: path) }

    /// A disk with less room than a whole WAL cycle at the normal size (the WAL's pages, then as many in the database
    /// file at the checkpoint) and twice the reserve is short of room.
    func watch(_ disk: DiskBudget) -> WALCheckpointer.DiskWatch {
        WALCheckpointer.DiskWatch(
            directory: directory,
            lowWaterBytes: 2 * disk.walAutocheckpointPages * disk.pageSize + 2 * disk.diskReserveBytes,
            tightPages: Int32(max(8, disk.diskReserveBytes / (2 * disk.pageSize))))
    }

    /// Allocates the reserve file when it is missing and the disk has `leaving` bytes beyond it (best effort: a disk
    /// already full gets none until it has room; the store's own writes come first).
    func hold(_ disk: inout DiskBudget, leaving: Int, logger: Logger) {
        let bytes = disk.diskReserveBytes
        if (FileSystem.size(reservePath) ?? 0) >= bytes {
            disk.reserveHeld = true
            return
        }
        let available = FileSystem.availableBytes(directory) ?? 0
        disk.reserveHeld = available >= bytes + leaving && FileSystem.allocate(reservePath, bytes: bytes)
        if !disk.reserveHeld {
            logger.info("no room on the disk for the store's reserve; taken when there is", metadata: [
                "outbox.store": "\(path)", "outbox.bytes": "\(bytes)",
            ])
        }
    }
}
