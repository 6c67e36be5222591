import Foundation

/// Reads lines from a pipe, blocking (child processes' output in the crash and namespace tests).
public final class LineReader {
    private let handle: FileHandle
    private var buffer = Data()

    public init(_ handle: FileHandle) { self.handle = handle }

    public func next() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = handle.availableData
            if chunk.isEmpty { return nil }
            buffer.append(chunk)
        }
    }
}

/// A directory under the repository's `Fixtures/` (this file sits two levels below the root).
public func fixturesPath(_ subdirectory: String, file: String = #filePath) -> String {
    URL(fileURLWithPath: file).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures").appendingPathComponent(subdirectory).path
}

/// The path of one of the package's built executables (they sit next to the test bundle).
public func builtProduct(_ name: String) -> String {
    let candidates = [URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
                      Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()]
    for directory in candidates {
        let path = directory.appendingPathComponent(name).path
        if FileManager.default.isExecutableFile(atPath: path) { return path }
    }
    return candidates[0].appendingPathComponent(name).path
}

/// How much the few wall-clock bounds of the tests widen (OUTBOX_TIME_SCALE, default 1): `make sanitize` sets it, as
/// TSan and ASan slow everything several times. A bound scaled here scales what it is measured against too.
public let testTimeScale: Int64 = {
    guard let text = ProcessInfo.processInfo.environment["OUTBOX_TIME_SCALE"], let scale = Int64(text), scale >= 1 else { return 1 }
    return scale
}()
