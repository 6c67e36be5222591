import CSQLite
import Glibc

/// What lies at a store path before the engine creates or changes anything there (SPEC S7): Outbox opens its own
/// files only. A mistyped `--store` that names a user's notes, or another program's SQLite database, is refused and
/// left byte-for-byte as it was, with nothing created beside it; only a file that was a store is ever moved aside
/// when it turns out to be damaged.
enum StorePathCheck {
    /// `PRAGMA application_id` of every store: "OBX1". A store's header then says whose file it is, even when the
    /// rest of the file can no longer be read.
    static let applicationID: Int64 = 0x4F42_5831

    enum Kind: Equatable {
        /// Nothing there yet, an empty file, or a SQLite database with no table: the engine makes a store of it.
        case new
        /// A store, or what is left of one (its header or companion files say so): opened, and moved aside if damaged.
        case store
    }

    /// The files a store keeps beside its main file. Any of them there means a store lived at this path.
    static func companions(of path: String) -> [String] {
        [path + "-wal", path + "-shm", path + "-mark", path + ".lock"]
    }

    /// Classifies `path`, or throws the reason the engine must not touch it: `notAStore`, or `io` naming the path or
    /// its directory and what is wrong with it. `reading`: only to read it (`outbox status`), which needs no
    /// writable directory (a store on a read-only file system is read all the same).
    static func classify(_ path: String, reading: Bool = false) throws(OutboxError) -> Kind {
        var info = stat()
        if stat(path, &info) != 0 {
            let code = errno
            guard code == ENOENT || code == ENOTDIR else {
                throw .io(path: path, message: "cannot read the store file: \(FileSystem.errnoText(code))")
            }
            try checkDirectory(of: path, writable: !reading)
            return .new
        }
        if info.st_mode & S_IFMT == S_IFDIR {
            throw .io(path: path, message: "is a directory, not a store file: give the path of a file inside it, such as \(path)/outbox.sqlite")
        }
        try checkDirectory(of: path, writable: !reading)
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw .notAStore(path: path, reason: "it is not a regular file")
        }
        if info.st_size == 0 { return .new }
        if companions(of: path).contains(where: FileSystem.exists) { return .store }
        guard let header = readHeader(path) else {
            throw .io(path: path, message: "cannot read the store file: \(FileSystem.errnoText())")
        }
        guard header.count >= 100, header.prefix(16).elementsEqual(Array("SQLite format 3\0".utf8)) else {
            throw .notAStore(path: path, reason: "it is not a SQLite database")
        }
        // Bytes 68–71 of SQLite's header: the application id, big-endian.
        let application = header[68..<72].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        if application == applicationID { return .store }
        if application != 0 {
            throw .notAStore(path: path, reason: "it is another program's SQLite database (application_id \(application))")
        }
        // Stores written before the application id existed: their tables tell.
        guard let tables = tableNames(path) else { return .store }  // unreadable: damaged, treated as S7 always did
        if tables.isEmpty { return .new }
        if tables.contains("meta") { return .store }
        let listed = tables.prefix(5).joined(separator: ", ") + (tables.count > 5 ? ", …" : "")
        throw .notAStore(path: path, reason: "it is a SQLite database without Outbox's tables (it holds \(listed))")
    }

    /// The store's directory must exist, be a directory and let the engine create its files there (the WAL, the lock).
    static func checkDirectory(of path: String, writable: Bool = true) throws(OutboxError) {
        let directory = FileSystem.directory(of: path)
        var info = stat()
        guard stat(directory, &info) == 0 else {
            let code = errno
            if code == ENOENT {
                throw .io(path: directory, message: "the store's directory does not exist: create it first")
            }
            if code == ENOTDIR {
                throw .io(path: directory, message: "is not a directory (a part of the store path is a file)")
            }
            throw .io(path: directory, message: "cannot reach the store's directory: \(FileSystem.errnoText(code))")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw .io(path: directory, message: "is not a directory (a part of the store path is a file)")
        }
        guard !writable || access(directory, W_OK | X_OK) == 0 else {
            throw .io(path: directory, message: "the store's directory is not writable: \(FileSystem.errnoText())")
        }
    }

    /// The first 100 bytes (SQLite's header), fewer when the file is shorter; nil when it cannot be read.
    private static func readHeader(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var header = [UInt8](repeating: 0, count: 100)
        var filled = 0
        while filled < header.count {
            let n = header.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { break }
            filled += n
        }
        return Array(header.prefix(filled))
    }

    /// The names of the file's tables, read without writing, locking or creating anything (`immutable=1`: no
    /// `-shm`, no `-wal` is made for the look); nil when SQLite cannot read the schema.
    private static func tableNames(_ path: String) -> [String]? {
        var db: OpaquePointer?
        defer { sqlite3_close_v2(db) }
        let uri = "file:" + uriEscaped(path) + "?immutable=1"
        guard sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nil) == SQLITE_OK else { return nil }
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(db, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name", -1,
                                 &statement, nil) == SQLITE_OK else { return nil }
        var names: [String] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return names }
            guard rc == SQLITE_ROW, let text = sqlite3_column_text(statement, 0) else { return nil }
            names.append(String(cString: text))
        }
    }

    /// A path as the path of a `file:` URI: `%`, `?` and `#` percent-encoded, the rest as it is.
    static func uriEscaped(_ path: String) -> String {
        var out = ""
        for character in path.unicodeScalars {
            switch character {
            case "%": out += "%25"
            case "?": out += "%3f"
            case "#": out += "%23"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }
}
