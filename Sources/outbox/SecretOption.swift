import ArgumentParser
import FoundationEssentials
import Glibc

/// A secret given on the command line, in a file, or in the environment (SPEC F5): a value in argv is seen by
/// every local user through `ps`, so each secret flag has a file form and an environment form too.
struct SecretOption: Sendable {
    /// `--app-secret`.
    let flag: String
    /// `OUTBOX_APP_SECRET`.
    let environment: String

    static let appSecret = SecretOption(flag: "--app-secret", environment: "OUTBOX_APP_SECRET")

    /// The secret: the flag's value, else the file's content (one final newline dropped), else the environment
    /// variable's; nil when none is given. Two forms at once, an empty secret or an unreadable file are usage errors
    /// that name the flag, never the secret.
    func resolve(value: String?, file: String?) throws -> String? {
        if value != nil && file != nil {
            throw ValidationError("give \(flag) or \(flag)-file, not both")
        }
        if let value {
            guard !value.isEmpty else { throw ValidationError("\(flag) is empty") }
            return value
        }
        if let file {
            var text = try Self.read(file, flag: "\(flag)-file")
            if text.hasSuffix("\n") { text.removeLast() }
            if text.hasSuffix("\r") { text.removeLast() }
            guard !text.isEmpty else { throw ValidationError("\(flag)-file \(file) is empty") }
            return text
        }
        if let raw = getenv(environment), raw[0] != 0 { return String(cString: raw) }
        return nil
    }

    /// The file's text, or a usage error that names `flag`, the file and errno's text.
    static func read(_ path: String, flag: String) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ValidationError("\(flag): cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw ValidationError("\(flag): cannot read \(path): \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            bytes.append(contentsOf: buffer[0..<n])
            if bytes.count > 64 * 1024 { throw ValidationError("\(flag): \(path) is larger than 64 KiB; it must hold the secret alone") }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
