import Foundation
import Logging
@testable import Outbox

/// Builders shared by the storage tests.
enum Fixture {
    static let baseWallMs: Int64 = 1_700_000_000_000

    static func log(_ ordinal: Int, priority: Priority = .normal, payloadBytes: Int = 100,
                    wallMs: Int64 = baseWallMs, context: Int64 = 0) -> NewLog {
        let head = Array("{\"i\":\(ordinal),\"pad\":\"".utf8)
        let tail = Array("\"}".utf8)
        let padding = max(0, payloadBytes - head.count - tail.count)
        let payload = head + [UInt8](repeating: UInt8(ascii: "x"), count: padding) + tail
        return NewLog(id: UUIDBytes(high: 0xA1B2_C3D4_0000_0000 | UInt64(ordinal), low: UInt64(ordinal) &* 0x9E37_79B9_7F4A_7C15),
                      priority: priority, wallMs: wallMs, monoNs: Int64(ordinal) * 1_000_000, boot: 42,
                      context: context, payload: payload)
    }

    /// The ordinal written into a payload by `log(_:)`.
    static func ordinal(of log: StoredLog) -> Int {
        let text = String(decoding: log.payload, as: UTF8.self)
        guard let start = text.range(of: "\"i\":"), let end = text[start.upperBound...].firstIndex(of: ",") else { return -1 }
        return Int(text[start.upperBound..<end]) ?? -1
    }

    static let quietLogger = Logger(label: "outbox.test", factory: { _ in SwiftLogNoOpLogHandler() })

    static func open(_ path: String, limits: StoreLimits = StoreLimits(), clock: any OutboxClock = ManualClock(wallMs: baseWallMs),
                     logger: Logger = quietLogger) throws -> LogStore {
        try LogStore(path: path, limits: limits, clock: clock, logger: logger)
    }

    /// Scribbles over every page of an open store's file but the first, and shrinks its cache to one page, so that
    /// the next query reads the damage from the file (corruption found mid-session, SPEC S7).
    static func scribbleOverAllButTheFirstPage(_ store: LogStore, path: String) throws {
        try store.db.exec("PRAGMA cache_size = 1")
        let size = FileSystem.size(path) ?? 0
        guard let handle = FileHandle(forWritingAtPath: path) else { throw CocoaError(.fileNoSuchFile) }
        try handle.seek(toOffset: 4096)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: max(0, Int(size) - 4096)))
        try handle.close()
    }
}

