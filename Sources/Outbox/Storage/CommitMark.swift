import Glibc

/// `<store>-mark`: the highest `seq` an append has committed, kept outside the database so that commits the
/// database no longer holds at the next open can be told from commits that never happened (SPEC S7).
///
/// Why a file beside the WAL: SQLite reads a WAL cut short while the engine was stopped (mid-frame, or its header)
/// as a torn tail, the way a power loss leaves one. It drops the frames after the last whole commit and opens a
/// consistent database: nothing is corrupt to move aside, and the logs of the dropped commits would vanish without a
/// word. The mark remembers how far the appends went; `StoreOpening` compares it with the database at open.
///
/// Written with one `pwrite` after each append transaction commits (a group commit, not a log), never synced:
/// - a killed process (`kill -9`) loses no write the kernel has, so the mark is never ahead of an intact WAL;
/// - a power loss may lose the mark's write, or the commits since the last WAL sync, or both. A mark left behind
///   its commits reports nothing (never a false loss); a mark that survived while its commits did not says that
///   those logs really were lost, which is exactly what should be reported;
/// - a mark torn or garbled (its check word does not match) or missing is started afresh, with no report.
///
/// No descriptor is held while the store is open: each read and each write opens the file, and closes it before
/// returning. A store then costs only its database's descriptors, which is what lets one process run thousands of
/// stores (`outbox fleet`); the page cache makes the open a path lookup, and the write is the same `pwrite`. A write
/// whose open fails (out of descriptors) leaves the mark behind, which reports nothing, as a lost write does.
///
/// Layout: 16 bytes, the seq and the seq XOR `checkWord`, both little-endian.
struct CommitMark {
    let path: String

    static let checkWord: UInt64 = 0x6F75_7462_6F78_6D6B // "outboxmk"

    /// Creates the mark (0600) when missing; nil when it cannot be opened (a read-only directory): the store then
    /// works without the check, as before the mark existed.
    init?(path: String) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // A mark copied from elsewhere keeps the store's rule: user data, readable by its owner only (S1).
        var info = stat()
        if fstat(fd, &info) == 0, info.st_mode & 0o077 != 0 { _ = fchmod(fd, 0o600) }
        self.path = path
    }

    /// The seq recorded, or nil when the file is missing, empty, short or garbled.
    func read() -> Int64? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 16, 0) }
        guard count == 16 else { return nil }
        let seq = Self.word(bytes, at: 0)
        guard seq ^ Self.checkWord == Self.word(bytes, at: 8), seq <= UInt64(Int64.max) else { return nil }
        return Int64(seq)
    }

    /// Records `seq`. Best effort: a failed open or write leaves the mark behind, which reports nothing.
    func write(_ seq: Int64) {
        let value = UInt64(max(0, seq))
        // Two words on the stack: no allocation on the append path.
        var words = (value.littleEndian, (value ^ Self.checkWord).littleEndian)
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        _ = withUnsafeBytes(of: &words) { pwrite(fd, $0.baseAddress, 16, 0) }
        close(fd)
    }

    private static func word(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        var value: UInt64 = 0
        for index in 0..<8 { value |= UInt64(bytes[offset + index]) << (8 * index) }
        return value
    }
}
