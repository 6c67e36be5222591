import ArgumentParser
import Dispatch
import Foundation
import OutboxMock

/// `outbox-mock`: the mock ingestion server as a process (SPEC X1). Prints
/// `listening on http://HOST:PORT` once it accepts connections; stops cleanly on SIGINT and SIGTERM.
@main
struct OutboxMockCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox-mock",
        abstract: "Mock ingestion server: strict, recording, fault-injecting, replaying.",
        discussion: "Serves App Center's POST /logs and the ingestion APIs of Segment (/v1/batch …), PostHog (/batch/, "
            + "/i/v1/analytics/events …), Snowplow (/com.snowplowanalytics.snowplow/tp2, /i), Mixpanel (/track, /engage, "
            + "/groups, /import) and OTLP/HTTP (/v1/logs, /v1/traces, /v1/metrics). Control API and live page under http://HOST:PORT/_mock/ (stats, logs, requests, "
            + "scenario, reset).",
        version: MockVersion.string)

    @Option(help: "Port to listen on; 0 picks a free one.")
    var port: Int = 0

    @Option(help: "Address to bind.")
    var host: String = "127.0.0.1"

    @Option(help: "A named scenario (flaky, outage, lost-ack, …) or a scenario file (see Fixtures/scenarios/).")
    var scenario: String?

    @Option(help: "Write every exchange to this file as JSON lines.")
    var record: String?

    @Option(help: "Answer requests with the responses recorded in this file, in order.")
    var replay: String?

    @Option(name: .customLong("app-secret"), help: "Require this App-Secret (otherwise any non-empty one passes).")
    var appSecret: String?

    @Option(name: .customLong("report-timezone"), help: "Time zone of the late-log cutoff (04:00 next day).")
    var reportTimezone: String = "UTC"

    @Option(name: .customLong("body-limit"), help: "Largest request body in bytes, on the wire.")
    var bodyLimit: Int = 5 * 1024 * 1024

    @Option(name: .customLong("decompressed-limit"), help: "Largest request body in bytes after gunzip.")
    var decompressedLimit: Int = 20 * 1024 * 1024

    @Option(help: "Event-loop threads (default: one per core).")
    var threads: Int?

    func run() throws {
        guard let timeZone = TimeZone(identifier: reportTimezone) else {
            throw ValidationError("unknown time zone \(reportTimezone) (use an IANA name such as Europe/Paris)")
        }
        let loaded: Scenario?
        do {
            loaded = try scenario.map { try Scenario.load(nameOrPath: $0) }
        } catch {
            throw ValidationError("\(error)")
        }
        var configuration = MockServer.Configuration(
            host: host, port: port, scenario: loaded, appSecret: appSecret, recordPath: record, replayPath: replay,
            reportTimeZone: timeZone, bodyLimit: bodyLimit,
            decompressedLimit: max(decompressedLimit, bodyLimit),
            log: { message in FileHandle.standardError.write(Data((message + "\n").utf8)) })
        if let threads { configuration.threads = threads }
        let server = try MockServer(configuration: configuration)

        // Signals become a semaphore: handlers are installed before the port opens, so a signal
        // sent right after "listening on" is never lost.
        let stopRequested = DispatchSemaphore(value: 0)
        var sources: [DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { stopRequested.signal() }
            source.resume()
            sources.append(source)
        }

        try server.start()
        // Unbuffered, so a script reading the pipe sees the line at once.
        FileHandle.standardOutput.write(Data("listening on \(server.baseURL)\n".utf8))
        stopRequested.wait()
        try server.stop()
        for source in sources { source.cancel() }
    }
}
