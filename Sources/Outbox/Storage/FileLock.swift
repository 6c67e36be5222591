import Glibc

/// An exclusive `flock` on a file, held until `unlock()` (or deinit).
///
/// `flock` locks belong to the open file description, so a second `open` of the same file in the same
/// process conflicts just as another process does — which is what "one engine per store" needs. The lock
/// goes away with the process, so a crash never leaves a stale lock behind (unlike a PID file).
/// The lock file itself is never deleted: deleting it would let two processes lock two different inodes.
///
/// A lock that is taken is waited for a little (`patienceMs`) before `held` is thrown: a child process that the
/// host spawns while the store is open shares the lock's file description from `fork` until its `exec` closes it
/// (`O_CLOEXEC` acts only then), so closing a store and opening it again at once can find the lock still taken for
/// a moment by a process that never meant to hold it.
final class FileLock {
    let path: String
    private var fd: Int32

    enum Failure: Error {
        case held
        case io(String)
    }

    /// How long a taken lock is waited for by default, in milliseconds.
    static let defaultPatienceMs = 250

    init(path: String, mode: mode_t = 0o600, patienceMs: Int = FileLock.defaultPatienceMs) throws(Failure) {
        self.path = path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode)
        if fd < 0 { throw .io(FileSystem.errnoText()) }
        // An existing lock file may predate us with a looser mode; the umask may also have made it tighter,
        // which is fine.
        var info = stat()
        if fstat(fd, &info) == 0, info.st_mode & 0o077 != 0 {
            _ = fchmod(fd, mode)
        }
        var waitedMs = 0
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            if code == EINTR { continue }
            if code == EWOULDBLOCK && waitedMs < patienceMs {
                var pause = timespec(tv_sec: 0, tv_nsec: 5_000_000)
                nanosleep(&pause, nil)
                waitedMs += 5
                continue
            }
            close(fd)
            if code == EWOULDBLOCK { throw .held }
            throw .io(FileSystem.errnoText(code))
        }
        self.fd = fd
    }

    deinit { unlock() }

    var isHeld: Bool { fd >= 0 }

    func unlock() {
        guard fd >= 0 else { return }
        // Closing the descriptor releases the lock.
        close(fd)
        fd = -1
    }
}
