import Foundation

/// A fresh directory for one test's files, made with `mkdtemp` (unique even when tests run in parallel);
/// `remove()` deletes it and everything in it.
///
/// ```swift
/// let dir = TempDirectory(); defer { dir.remove() }
/// let store = try LogStore(path: dir.file(), ...)
/// ```
public struct TempDirectory: Sendable {
    public let path: String

    /// `name` (the test's function name by default) appears in the directory's name, for whoever finds it
    /// left behind; `base` is where it is made (the system's temporary directory by default).
    public init(_ name: String = #function, base: String = NSTemporaryDirectory()) {
        let safe = String(name.filter { $0.isLetter || $0.isNumber }.prefix(40))
        let parent = base.hasSuffix("/") ? String(base.dropLast()) : base
        var template = Array("\(parent)/outbox-test-\(safe)-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { buffer in mkdtemp(buffer.baseAddress!) }
        precondition(created != nil, "mkdtemp in \(parent) failed: \(String(cString: strerror(errno)))")
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The path of `name` inside the directory (the engine's store file by default).
    public func file(_ name: String = "store.outbox") -> String { "\(path)/\(name)" }

    /// The names of the directory's entries, sorted.
    public func contents() -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: path).sorted()) ?? [] }

    public func remove() { try? FileManager.default.removeItem(atPath: path) }
}
