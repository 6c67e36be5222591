import CStoreSeal
import Glibc

/// SPEC K1: the key a store is sealed with — 32 bytes, from the host (`Configuration.storeKey`) or a key file
/// (`StoreKey(contentsOfFile:)`: the C interface's `storeKeyFile`, the CLI's `--store-key-file`).
///
/// ```swift
/// configuration.storeKey = try StoreKey(contentsOfFile: "/etc/myapp/outbox.key")
/// ```
///
/// Its description names the key by its id, never by its bytes, so a logged configuration shows no secret.
public struct StoreKey: Sendable, Equatable, CustomStringConvertible {
    public static let byteCount = 32

    let bytes: [UInt8]
    /// Names the key without revealing it: the first 4 bytes of HMAC-SHA-256(key, "outbox store key id"). Every
    /// sealed value carries it (`StoreSealer`), so a row tells which key sealed it, and a store which key it needs.
    let id: UInt32

    /// Throws `invalidConfiguration` unless `bytes` holds exactly 32 bytes.
    public init(bytes: [UInt8]) throws(OutboxError) {
        guard bytes.count == Self.byteCount else {
            throw .invalidConfiguration("storeKey must be \(Self.byteCount) bytes, got \(bytes.count)")
        }
        self.bytes = bytes
        var digest = [UInt8](repeating: 0, count: 32)
        let label = Array("outbox store key id".utf8)
        _ = outbox_hmac_sha256(bytes, bytes.count, label, label.count, &digest)
        id = digest.prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// Reads a key file: 32 raw bytes, or 64 hex digits with an optional final newline, in a regular file that
    /// only its owner may read (a file readable by its group or others is refused: the key is what protects the
    /// store). Errors name the file and what is wrong with it, never the key.
    public init(contentsOfFile path: String) throws(OutboxError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            let code = errno
            throw .invalidConfiguration("storeKeyFile \(path): cannot open it: \(String(cString: strerror(code)))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw .invalidConfiguration("storeKeyFile \(path): cannot read its mode: \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw .invalidConfiguration("storeKeyFile \(path) is not a regular file")
        }
        let mode = info.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            throw .invalidConfiguration(
                "storeKeyFile \(path) is readable by its group or others (mode \(String(mode, radix: 8))): chmod 600 it")
        }
        // One byte more than the longest valid file, so that a longer one is told from a valid one.
        var contents = [UInt8](repeating: 0, count: 66)
        var length = 0
        while length < contents.count {
            let got = contents[length...].withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if got < 0 {
                if errno == EINTR { continue }
                throw .invalidConfiguration("storeKeyFile \(path): cannot read it: \(String(cString: strerror(errno)))")
            }
            if got == 0 { break }
            length += got
        }
        defer { contents.withUnsafeMutableBytes { outbox_wipe($0.baseAddress, $0.count) } }
        self = try Self.parse(contents.prefix(length), path: path)
    }

    /// The key file's rules on its contents (the fuzz target's entry): 32 raw bytes, or 64 hex digits and at most one
    /// final newline.
    static func parse(_ contents: ArraySlice<UInt8>, path: String) throws(OutboxError) -> StoreKey {
        if contents.count == byteCount { return try StoreKey(bytes: Array(contents)) }
        var text = contents
        if text.last == UInt8(ascii: "\n") { text = text.dropLast() }
        guard text.count == 2 * byteCount else {
            throw .invalidConfiguration(
                "storeKeyFile \(path) holds \(contents.count) bytes: it must hold 32 raw bytes or 64 hex digits (and a newline)")
        }
        var bytes = [UInt8](repeating: 0, count: byteCount)
        defer { bytes.withUnsafeMutableBytes { outbox_wipe($0.baseAddress, $0.count) } }
        var index = text.startIndex
        for position in 0..<byteCount {
            guard let high = hexValue(text[index]), let low = hexValue(text[index + 1]) else {
                throw .invalidConfiguration("storeKeyFile \(path) holds 64 characters that are not all hex digits")
            }
            bytes[position] = high << 4 | low
            index += 2
        }
        return try StoreKey(bytes: bytes)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// The key id in hex, as `meta` keeps it and messages show it.
    var idText: String {
        let hex = String(id, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }

    public var description: String { "StoreKey(id \(idText))" }

    /// A new random key (the event-name key of a sealed store, tests).
    static func random() throws(OutboxError) -> StoreKey {
        var bytes = [UInt8](repeating: 0, count: byteCount)
        guard outbox_random_bytes(&bytes, bytes.count) == 0 else {
            throw .storage(code: 1, message: "libcrypto could not draw random bytes for a key")
        }
        return try StoreKey(bytes: bytes)
    }
}
