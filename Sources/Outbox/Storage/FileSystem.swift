import Glibc

/// The few POSIX file operations the store needs (the library does not depend on Foundation).
enum FileSystem {
    static func errnoText(_ code: Int32 = errno) -> String {
        String(cString: strerror(code))
    }

    static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    /// Size in bytes, or nil when the file does not exist.
    static func size(_ path: String) -> Int? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int(info.st_size)
    }

    /// Permission bits (`0o600`), or nil when the file does not exist.
    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & 0o7777
    }

    /// Creates `path` with `mode` when it does not exist yet; never truncates an existing file.
    ///
    /// SQLite creates `-wal` and `-shm` with the permissions of the main file (os_unix.c, findCreateFileMode),
    /// so creating the main file 0600 ourselves makes all three 0600 without touching the process umask,
    /// which is shared by every thread of the host.
    static func createIfMissing(_ path: String, mode: mode_t) throws(OutboxError) {
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        if fd >= 0 {
            close(fd)
            return
        }
        let code = errno
        if code == EEXIST { return }
        throw .io(path: path, message: "cannot create the store file: \(errnoText(code))")
    }

    static func chmod(_ path: String, _ mode: mode_t) {
        _ = Glibc.chmod(path, mode)
    }

    /// Renames when `from` exists; a missing source is not an error (a WAL may not exist).
    static func moveIfPresent(_ from: String, to: String) throws(OutboxError) {
        guard exists(from) else { return }
        if rename(from, to) != 0 {
            throw .io(path: from, message: "cannot move aside to \(to): \(errnoText())")
        }
    }

    static func remove(_ path: String) {
        _ = unlink(path)
    }

    /// Bytes an unprivileged writer may still use on the filesystem holding `path` (`statvfs`'s `f_bavail`),
    /// or nil when it cannot be read.
    static func availableBytes(_ path: String) -> Int? {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        return Int(info.f_bavail) * Int(info.f_frsize)
    }

    /// The directory part of `path` ("." when there is none).
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Makes `path` hold `bytes` of allocated disk blocks (created 0600 if missing). Returns false when the
    /// filesystem has not that much room; the file is then removed, so that no half reserve is left.
    static func allocate(_ path: String, bytes: Int) -> Bool {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        let result = posix_fallocate(fd, 0, off_t(bytes))
        close(fd)
        if result != 0 { remove(path) }
        return result == 0
    }
}
