import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import Outbox
import OutboxFleet

@main
struct OutboxCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "Outbox: durable analytics logs in SQLite, delivered in batches.",
        version: OutboxVersion.string,
        subcommands: [Emit.self, Status.self, Demo.self, DeadLetters.self, Fleet.self]
    )
}

/// Prints a JSON object with keys in a stable order (scripts and acceptance tests read it).
func printJSON(_ object: [(String, Any?)]) {
    var parts: [String] = []
    for (key, value) in object {
        let rendered: String
        switch value {
        case nil: rendered = "null"
        case let text as String: rendered = jsonString(text)
        case let flag as Bool: rendered = flag ? "true" : "false"
        case let number as Int: rendered = String(number)
        case let number as Double: rendered = cFormat("%.3f", number)
        case let json as RawJSON: rendered = json.text
        default: rendered = jsonString("\(value!)")
        }
        parts.append("\(jsonString(key)):\(rendered)")
    }
    print("{" + parts.joined(separator: ",") + "}")
}

/// SPEC D18: `"destinations": {NAME: {pending, in_flight, delivered (emit only), dead_letters, server_rejected,
/// disabled_reason}}`, names in order; nil for a store of one destination named `default`.
func destinationsJSON(_ reports: [String: DestinationReport]?, delivered: Bool) -> RawJSON? {
    guard let reports else { return nil }
    let members = reports.sorted { $0.key < $1.key }.map { name, report -> String in
        var fields = ["\"pending\":\(report.pending)", "\"in_flight\":\(report.inFlight)"]
        if delivered { fields += ["\"delivered\":\(report.delivered ?? 0)", "\"skipped\":\(report.skipped ?? 0)"] }
        fields += ["\"dead_letters\":\(report.deadLetters)", "\"server_rejected\":\(report.serverRejected)",
                   "\"disabled_reason\":" + (report.disabledReason.map(jsonString) ?? "null")]
        return jsonString(name) + ":{" + fields.joined(separator: ",") + "}"
    }
    return RawJSON("{" + members.joined(separator: ",") + "}")
}

/// JSON text to embed as it is (a value that is already JSON, such as a log object).
struct RawJSON {
    var text: String
    init(_ text: String) { self.text = text }
}


/// Runs async work to its end while the calling thread waits. The commands are synchronous and call this: with
/// an async `main`, Swift parks the main thread in `dispatch_main()`, whose `pthread_exit` unwinds the main
/// thread's stack through the unwind tables, which then stay resident in every `outbox` process.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let outcome = Outcome<T>()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do { outcome.result = .success(try await body()) } catch { outcome.result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try outcome.result!.get()
}

private final class Outcome<T>: @unchecked Sendable {
    var result: Result<T, Error>?
}

struct CLIError: Error, CustomStringConvertible {
    var description: String
}
