import COutboxSupport
import Glibc
import Logging
import Synchronization

/// SPEC E3: `outbox_set_log_handler`'s function, or stderr.
public typealias CLogFunction = @convention(c) (Int32, UnsafePointer<CChar>?, UnsafeMutableRawPointer?) -> Void

struct CLogTarget: @unchecked Sendable {
    var function: CLogFunction?
    var context: UnsafeMutableRawPointer?
}

/// Process wide, as the header says; an engine takes a copy when it opens, so a later change never races a
/// line being written.
let logTarget = Mutex(CLogTarget())

/// A swift-log handler that hands each line to the C host's function (or writes it to stderr): the engine's
/// own metadata (`outbox.batch`, `outbox.status`, …) follows the message as `key=value` pairs.
struct CLogHandler: LogHandler {
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    let target: CLogTarget

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var line = event.message.description
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        for (key, value) in merged.sorted(by: { $0.key < $1.key }) { line += " \(key)=\(value)" }
        let level = Int32(Self.levels.firstIndex(of: event.level) ?? 4)
        if let function = target.function {
            outboxc_log_handler_entered(1)
            defer { outboxc_log_handler_entered(0) }
            line.withCString { function(level, $0, target.context) }
        } else {
            // One write(2) per line: lines of several threads never interleave.
            var text = "outbox: \(event.level): \(line)\n"
            text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
        }
    }

    static let levels: [Logger.Level] = [.trace, .debug, .info, .notice, .warning, .error, .critical]
}
