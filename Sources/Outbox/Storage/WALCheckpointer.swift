import CFileSync
import CSQLite
import Glibc

/// SQLite's automatic checkpoint, plus the WAL written back to the disk ahead of it (SPEC S1: on the loop thread).
///
/// In WAL mode with `synchronous = NORMAL` the only syncs are the checkpoint's, which SQLite runs inside the commit
/// that crosses the threshold: it syncs the WAL, copies its pages into the database file and syncs that. A
/// drain writes the WAL without ever syncing it, so at the checkpoint the kernel still holds all of it (up to
/// 16 MiB) dirty, and the loop waits while the WAL's sync writes it out — with no request leaving meanwhile.
/// Here, every `writeBackPages` new frames the kernel is told to start writing the
/// WAL out (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, which does not wait for the device), so the checkpoint's
/// sync finds it written. Durability is unchanged: the same syncs happen at the same moments.
///
/// Registered with `sqlite3_wal_hook`, which replaces SQLite's own hook (`PRAGMA wal_autocheckpoint`); the
/// checkpoint rule is that hook's: a PASSIVE checkpoint once the WAL holds `checkpointPages` frames.
final class WALCheckpointer {
    let checkpointPages: Int32
    let writeBackPages: Int32
    private let walPath: String
    /// Our own read-only descriptor of the WAL file, opened at the first write-back. SQLite takes no POSIX locks
    /// on the WAL file (they are on the database and the -shm), so closing it releases none of SQLite's.
    private var fd: Int32 = -1
    private var openFailed = false
    /// Whether `fd` stays open between write-backs (the default). A store of a fleet (`exclusiveLock`, SPEC F4) opens
    /// it for each write-back instead, so that it does not hold a descriptor more while it runs.
    var keepsDescriptor = true
    /// WAL frames already handed to the kernel's write-back; reset when the WAL starts again from its beginning.
    private var writtenBackFrames: Int32 = 0
    /// Write-backs started and checkpoints run since the connection opened (diagnostics, tests).
    private(set) var writeBacks = 0
    private(set) var checkpoints = 0

    /// SPEC S7: with little room left on the disk, the WAL is checkpointed every `tightPages` frames instead.
    /// A checkpoint grows the database file by the new pages the WAL holds, and the WAL file itself keeps its
    /// size: on a nearly full disk a full-size cycle (a quarter of the cap) could need more than there is, and a
    /// WAL that cannot be checkpointed blocks every later write, deletes of delivered logs included.
    let disk: DiskWatch?
    struct DiskWatch {
        /// The directory of the database, for `statvfs`.
        var directory: String
        /// Below this many available bytes the WAL cycles at `tightPages`; above twice as many, normally again.
        var lowWaterBytes: Int
        var tightPages: Int32
    }
    /// Whether the disk is short of room (see `disk`). Set by the store too, when a write hit a full disk.
    var tight = false
    /// While a full disk caps the store (SPEC S7): a checkpoint after every commit, which then needs no room (the file
    /// does not grow), so the WAL is rewritten from its start and never needs more than one transaction's frames.
    var everyCommit = false

    init(walPath: String, checkpointPages: Int, writeBackPages: Int, disk: DiskWatch? = nil) {
        self.walPath = walPath
        self.checkpointPages = Int32(clamping: max(1, checkpointPages))
        self.writeBackPages = Int32(clamping: max(1, writeBackPages))
        self.disk = disk
        checkDisk()
    }

    deinit {
        if fd >= 0 { Glibc.close(fd) }
    }

    /// Every `writeBackBytes` of new WAL (1 MiB), and at least four times per checkpoint: often enough that the
    /// checkpoint's sync finds the WAL written, rarely enough that the write-back calls cost less than they save.
    static let writeBackBytes = 1 << 20

    static func writeBackPages(checkpointPages: Int, pageSize: Int) -> Int {
        max(1, min(writeBackBytes / max(1, pageSize), checkpointPages / 4))
    }

    /// After each commit that wrote to the WAL: `frames` is the number of frames the WAL now holds.
    func committed(_ db: OpaquePointer, frames: Int32) {
        if frames < writtenBackFrames { writtenBackFrames = 0 }
        if everyCommit || frames >= (tight ? min(checkpointPages, disk?.tightPages ?? checkpointPages) : checkpointPages) {
            // As SQLite's own hook: errors are left to the next checkpoint (a reader may hold it back).
            TestingPhase.enter(.checkpoint)
            _ = sqlite3_wal_checkpoint(db, nil)
            TestingPhase.leave(.checkpoint)
            checkpoints += 1
            checkDisk()
            return
        }
        if frames - writtenBackFrames >= writeBackPages {
            writtenBackFrames = frames
            startWriteBack()
            // Once per write-back interval (1 MiB of WAL): one statvfs, nothing per commit.
            if checkDisk(), let tightPages = disk?.tightPages, frames >= tightPages {
                TestingPhase.enter(.checkpoint)
                _ = sqlite3_wal_checkpoint(db, nil)
                TestingPhase.leave(.checkpoint)
                checkpoints += 1
            }
        }
    }

    /// Reads the room left on the disk and sets `tight`. Returns whether it just became tight.
    @discardableResult
    func checkDisk() -> Bool {
        guard let disk, let available = FileSystem.availableBytes(disk.directory) else { return false }
        let wasTight = tight
        if available < disk.lowWaterBytes { tight = true } else if available >= 2 * disk.lowWaterBytes { tight = false }
        return tight && !wasTight
    }

    private func startWriteBack() {
        if fd < 0 {
            guard !openFailed else { return }
            fd = open(walPath, O_RDONLY | O_CLOEXEC)
            if fd < 0 { openFailed = true; return }
        }
        if outbox_start_write_back(fd) == 0 { writeBacks += 1 }
        if !keepsDescriptor {
            // The write-back the kernel started goes on without the descriptor.
            Glibc.close(fd)
            fd = -1
        }
    }
}
