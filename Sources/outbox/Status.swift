import ArgumentParser
import Outbox

/// SPEC X4: reads a store (also while an engine runs on it) and prints its state as JSON.
struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the state of a store as JSON (SPEC X4).")

    @Option(help: "The SQLite store file.") var store: String
    @OptionGroup var storeKey: StoreKeyOption
    @OptionGroup var logging: LoggingOptions

    func run() throws {
        try runBlocking { try await self.runAsync() }
    }

    func runAsync() async throws {
        // A read-only report has nothing to log; the option is accepted and checked so that every command takes it (SPEC X7).
        _ = try logging.makeLogger()
        let report: StoreReport
        do {
            report = try StoreReport.read(path: store, storeKey: try storeKey.key())
        } catch {
            throw CLIError(description: "outbox status: \(error)")
        }
        printJSON([
            ("pending_normal", report.pendingNormal), ("pending_critical", report.pendingCritical),
            ("in_flight", report.inFlight), ("bytes", report.bytes), ("oldest_age_s", report.oldestAgeSeconds),
            ("dead_letters", report.deadLetters), ("enabled", report.enabled),
            ("disabled_reason", report.disabledReason), ("install_id", report.installID),
            ("destination", report.destination), ("server_rejected", report.serverRejected),
            ("rotating_store_key", report.rotatingStoreKey), ("sending", Self.sending(report)),
        ] + (destinationsJSON(report.destinations, delivered: false).map { [("destinations", $0)] } ?? []))
    }

    /// `enabled` is the install's choice (SPEC T6); this is what happens to its logs: `on`, `opted_out`, `stopped`
    /// (the server refused the client: only a configuration change resumes, R8) or `retries_exhausted` (a probe
    /// tries again later, R5).
    static func sending(_ report: StoreReport) -> String {
        if !report.enabled { return "opted_out" }
        if report.sendingStopped { return "stopped" }
        return report.disabledReason == nil ? "on" : "retries_exhausted"
    }
}
