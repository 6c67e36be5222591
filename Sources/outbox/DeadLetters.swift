import ArgumentParser
import FoundationEssentials
import Glibc
import Outbox
import OutboxFleet

/// SPEC X6: lists the dead letters of a store as JSON lines, or puts them back in the queue, or deletes them.
struct DeadLetters: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dead-letters",
        abstract: "List, requeue or purge the logs the server refused (SPEC X6).",
        discussion: """
            Without --requeue or --purge, prints one JSON line per dead letter: id, status, reason, \
            dead_lettered_at and log (the log's JSON as it is sent). Listing works while an app runs on the \
            store; --requeue and --purge need the store to themselves.
            """)

    @Option(help: "The SQLite store file.") var store: String
    @Option(name: .customLong("id"), help: "Only the dead letter of this log id (a UUID); repeatable.") var ids: [String] = []
    @Option(help: "Only this destination's dead letters (a store with several, SPEC D18); an unknown name is refused.")
    var destination: String?
    @Flag(help: "Move the dead letters back to the queue with a fresh retry state; prints {\"requeued\": N}.") var requeue = false
    @Flag(help: "Delete the dead letters; prints {\"purged\": N}.") var purge = false
    @OptionGroup var storeKey: StoreKeyOption
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if requeue && purge {
            throw ValidationError("--requeue and --purge cannot be used together: choose one")
        }
        _ = try parsedIDs()
    }

    /// The `--id` values as UUIDs, nil when none was given (all dead letters).
    func parsedIDs() throws -> [UUID]? {
        guard !ids.isEmpty else { return nil }
        return try ids.map { text in
            guard let id = UUID(uuidString: text) else {
                throw ValidationError("--id takes a log id (a UUID such as 0f8fad5b-d9cb-469f-a165-70867728950e), got '\(text)'")
            }
            return id
        }
    }

    func run() throws {
        let logger = try logging.makeLogger()
        let ids = try parsedIDs()
        let key = try storeKey.key()
        do {
            if requeue {
                printJSON([("requeued", try OutboxEngine.requeueDeadLetters(inStoreAt: store, ids: ids, destination: destination, storeKey: key, logger: logger))])
            } else if purge {
                printJSON([("purged", try OutboxEngine.purgeDeadLetters(inStoreAt: store, ids: ids, destination: destination, storeKey: key, logger: logger))])
            } else {
                for letter in try OutboxEngine.deadLetters(inStoreAt: store, ids: ids, destination: destination, storeKey: key) {
                    // SPEC D18: the destination that refused it, in a store with several.
                    printJSON((letter.destination.map { [("destination", $0 as Any?)] } ?? []) + [
                        ("id", letter.id.uuidString.lowercased()), ("status", letter.status), ("reason", letter.reason),
                        ("dead_lettered_at", iso8601(ms: letter.deadLetteredAtMs)),
                        ("log", RawJSON(letter.log)),
                    ])
                }
            }
        } catch OutboxError.storeLocked(let path) {
            // Listing works beside a running app; changing the table needs the store to itself.
            throw CLIError(description: "outbox dead-letters: \(path) is in use by a running engine; stop it before --requeue or --purge, or call requeueDeadLetters/purgeDeadLetters through its API")
        } catch {
            throw CLIError(description: "outbox dead-letters: \(error)")
        }
    }
}

/// UTC, milliseconds, as the logs' own `timestamp` (SPEC W2).
func iso8601(ms: Int64) -> String {
    var seconds = time_t(ms.quotientAndRemainder(dividingBy: 1000).quotient)
    var millis = Int32(ms.quotientAndRemainder(dividingBy: 1000).remainder)
    if millis < 0 { millis += 1000; seconds -= 1 }
    var parts = tm()
    guard gmtime_r(&seconds, &parts) != nil else { return String(ms) }
    return cFormat("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                   parts.tm_hour, parts.tm_min, parts.tm_sec, millis)
}
