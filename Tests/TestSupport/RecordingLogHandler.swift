import Foundation
import Logging

/// A log handler that keeps what it receives, to assert that something was reported (and how loudly).
public final class RecordingLogHandler: LogHandler, @unchecked Sendable {
    public struct Entry {
        public var level: Logger.Level
        public var message: String
        public var metadata: Logger.Metadata
    }

    public final class Box: @unchecked Sendable {
        private let lock = NSLock()
        private var entries: [Entry] = []
        public func add(_ entry: Entry) { lock.lock(); entries.append(entry); lock.unlock() }
        public var all: [Entry] { lock.lock(); defer { lock.unlock() }; return entries }
    }

    public let box: Box
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    public init(box: Box) { self.box = box }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        box.add(Entry(level: event.level, message: event.message.description, metadata: event.metadata ?? [:]))
    }

    public static func make() -> (Logger, Box) {
        let box = Box()
        return (Logger(label: "outbox.test", factory: { _ in RecordingLogHandler(box: box) }), box)
    }
}
