/// The store's room, as a pure value (SPEC S2, S3, S7): the configured cap and the one a full disk imposes, the soft
/// budget appends keep under, the WAL's checkpoint size, the disk reserve — and what to do when the disk fills up or
/// has room again, decided from numbers the caller read (page count, free bytes), so that it is tested without
/// SQLite or a full disk. `LogStore+Disk.swift` reads those numbers and carries the decisions out.
struct DiskBudget: Sendable, Equatable {
    /// Page size of the database file (chosen at creation, see `StoreOpener.pageSize(for:)`).
    private(set) var pageSize: Int
    /// `max_page_count`, the hard cap (S2): the configured one, or lower while a full disk caps the store (S7).
    private(set) var maxPages: Int
    /// The configured cap in pages (`maxStorageSize / pageSize`).
    private(set) var configuredMaxPages: Int
    /// SPEC S7: the disk filled up before the store reached its cap, so `maxPages` is what the disk holds.
    private(set) var diskCapped = false
    /// Whether `<path>-reserve` holds its bytes.
    var reserveHeld = false
    /// When the disk was last read for room (monotonic ns): at most once a `checkIntervalNs`.
    var lastCheckNs: Int64 = 0
    /// Bytes the schema takes before any log (one page per table and index, plus the schema page).
    var baseBytes = 0
    private let configuredReserveBytes: Int?
    private let maxStorageSize: Int

    static let checkIntervalNs: Int64 = 500_000_000
    /// Bytes a row takes beyond its payload: record header, the small columns, the 16-byte id, the cell's size and
    /// rowid varints and its 2-byte pointer.
    static let rowOverheadBytes = 64

    /// Before the file is open: no room at all until `opened(pageSize:)`.
    init(limits: StoreLimits) {
        pageSize = 4096
        maxPages = 0
        configuredMaxPages = 0
        maxStorageSize = limits.maxStorageSize
        configuredReserveBytes = limits.diskReserveBytes
    }

    /// The hard cap in bytes (`max_page_count × page_size`).
    var capacityBytes: Int { maxPages * pageSize }
    /// Room kept below the hard cap for what the estimate does not see: interior b-tree pages, pages left partly
    /// full, and rows that grow when claimed or released.
    var slackBytes: Int { 2 * pageSize + capacityBytes / 64 }
    /// What the soft check keeps the used bytes under.
    var budgetBytes: Int { capacityBytes - slackBytes }
    /// A log whose row is estimated larger than this can never fit, even in an empty store: `logTooLarge`, and
    /// nothing is evicted for it (App Center learnt this: CHANGELOG 1.12.0).
    var maxSingleLogBytes: Int { budgetBytes - baseBytes }

    /// Number of WAL pages after which SQLite checkpoints on commit (a quarter of the cap, at most SQLite's default of
    /// 1000; for caps above 64 MiB a sixteenth, at most 4096 pages = 16 MiB), and the size the WAL file is truncated
    /// back to after a checkpoint. Together they bound the -wal file at about the larger of twice the checkpoint size
    /// and the biggest single transaction. A checkpoint syncs twice on the loop thread, and meanwhile nothing is
    /// sent: large stores checkpoint less often, in larger steps.
    var walAutocheckpointPages: Int { max(16, min(1000, maxPages / 4), min(4096, maxPages / 16)) }
    var walSizeLimit: Int { max(1024 * 1024, 2 * walAutocheckpointPages * pageSize) }

    /// SPEC S7: the bytes `<path>-reserve` holds, given back when the disk is full so that the store can still commit
    /// (and delete): the configured size, at least 16 pages; by default 256 KiB or 64 pages.
    var diskReserveBytes: Int {
        guard let configuredReserveBytes else { return max(256 * 1024, 64 * pageSize) }
        return max(configuredReserveBytes, 16 * pageSize)
    }

    /// The bytes a row with `payload` bytes takes in a table b-tree, including overflow pages when the row does not
    /// fit on one page (SQLite keeps between minLocal and maxLocal bytes on the leaf).
    ///
    /// Rows appended in order fill leaf pages until the next one does not fit, so a page wastes about half a row on
    /// average: r²/2U per row of r bytes on pages of U bytes (12 % for 1 KB rows on 4 KiB pages). Without that term,
    /// appends of large rows near the cap hit SQLITE_FULL and had to be retried.
    static func estimatedRowBytes(payload: Int, pageSize: Int) -> Int {
        let record = payload + rowOverheadBytes
        let maxLocal = pageSize - 35
        if record <= maxLocal { return record + record * record / (2 * pageSize) }
        let minLocal = (pageSize - 12) * 32 / 255 - 23
        let perOverflowPage = pageSize - 4
        var local = minLocal + (record - minLocal) % perOverflowPage
        if local > maxLocal { local = minLocal }
        let overflowPages = (record - local + perOverflowPage - 1) / perOverflowPage
        return local + overflowPages * pageSize
    }

    func estimatedRowBytes(payload: Int) -> Int { Self.estimatedRowBytes(payload: payload, pageSize: pageSize) }

    // MARK: Plans (SPEC S7)

    /// After SQLITE_FULL with `pages` in the file and `availableBytes` free on its disk: whether the disk, not the cap,
    /// was what stopped the write — it could not have held what the cap still allows.
    func diskIsShort(pages: Int, availableBytes: Int) -> Bool {
        availableBytes < max(0, maxPages - pages) * pageSize + diskReserveBytes
    }

    /// The cap a full disk holds the store to — the pages it has plus what the disk can still take, keeping twice the
    /// reserve free — when that is lower than the cap now; nil otherwise.
    func capOnFullDisk(pages: Int, availableBytes: Int) -> Int? {
        let cap = min(configuredMaxPages, pages + max(0, availableBytes - 2 * diskReserveBytes) / pageSize)
        return cap < maxPages ? cap : nil
    }

    /// While capped by the disk: the higher cap its room allows now, when there is one.
    func capWithRoom(pages: Int, availableBytes: Int) -> Int? {
        guard diskCapped else { return nil }
        let cap = min(configuredMaxPages, pages + max(0, availableBytes - 2 * diskReserveBytes) / pageSize)
        return cap > maxPages ? cap : nil
    }

    /// Whether the disk is due to be read for room again.
    func checkDue(nowNs: Int64) -> Bool { lastCheckNs == 0 || nowNs - lastCheckNs >= Self.checkIntervalNs }

    // MARK: Changes

    /// The file was opened (at start, or afresh after a corrupt one was moved aside): its page size sets the caps,
    /// and a full disk's cap from before is gone (`max_page_count` is not stored in the file).
    mutating func opened(pageSize: Int) {
        self.pageSize = pageSize
        maxPages = max(1, maxStorageSize / pageSize)
        configuredMaxPages = maxPages
        diskCapped = false
    }

    /// The disk filled up: the store keeps to `cap` pages (`nil`: the cap stays, the disk is still short). Counted in
    /// the store's ledger (`StoreLedger.Totals.diskFull`).
    mutating func diskFull(cap: Int?) {
        if let cap {
            maxPages = cap
            diskCapped = true
        }
    }

    /// The disk has room for `cap` pages; back to the configured cap when it allows that. Returns whether it did.
    mutating func lift(to cap: Int) -> Bool {
        maxPages = cap
        if cap == configuredMaxPages { diskCapped = false }
        return !diskCapped
    }
}
