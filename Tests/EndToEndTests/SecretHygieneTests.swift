import Foundation
import Logging
import OutboxMock
import Testing
@testable import Outbox

/// Collects every log line with its metadata.
final class CollectingLogHandler: LogHandler, @unchecked Sendable {
    private let lock = NSCondition()
    private var lines: [String] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        lock.withLock {
            lines.append("\(event.level) \(event.message) \(all)")
            lock.broadcast()
        }
    }

    /// Blocks until a line containing `text` has been logged, or `timeout` passes; returns whether it was.
    func waitForLine(containing text: String, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        lock.lock()
        defer { lock.unlock() }
        while !lines.contains(where: { $0.contains(text) }) {
            guard lock.wait(until: deadline) else { return false }
        }
        return true
    }

    var text: String { lock.withLock { lines.joined(separator: "\n") } }
    var count: Int { lock.withLock { lines.count } }
}

@Suite("Secrets never reach the logs")
struct SecretHygieneTests {
    // DEVELOPERS "Standards": the app secret appears in no log line, at any level, on success or refusal.
    @Test func theAppSecretNeverAppearsInLogs() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario: Scenario(seed: 1, rules: [
            .init(match: .init(requests: try .init("2")), outcome: .respond(.init(status: 401, body: "bad secret"))),
        ]))
        defer { try? server.stop() }
        let handler = CollectingLogHandler()
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        let secret = "s3cr3t-\(UUID().uuidString)"
        configuration.appSecret = secret
        configuration.logger = Logger(label: "test") { _ in handler }
        let engine = try OutboxEngine(configuration: configuration)
        for index in 0..<120 { try engine.trackEvent("e", properties: ["i": .int(Int64(index))]) }
        // Wait for the event the test needs, the refusal being logged, rather than for 3 s of delivery.
        _ = handler.waitForLine(containing: "401", timeout: 30)
        engine.shutdown()
        #expect(handler.count > 0)
        #expect(handler.text.contains("401"))   // the refusal was logged…
        #expect(!handler.text.contains(secret)) // …without the secret
    }
}

/// SPEC K3: secrets given as files or in the environment, kept out of argv, and out of every output.
@Suite("Secrets out of argv and every output (SPEC K3)")
struct SecretsOutOfArgvTests {
    /// The command line of a running process, its NUL separators as spaces.
    static func commandLine(of pid: Int32) -> String? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"), !data.isEmpty else { return nil }
        return String(decoding: data.map { $0 == 0 ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
    }

    /// Runs `outbox` with `environment` added, reading its /proc/PID/cmdline while it runs; returns the status, its
    /// outputs and the command lines seen.
    static func runWatched(_ arguments: [String], environment: [String: String] = [:], in dir: TempDirectory) throws
        -> (status: Int32, output: String, errors: String, commandLines: [String]) {
        var seen: [String] = []
        let run = try runOutbox(arguments, environment: environment, in: dir) { pid in
            if let line = commandLine(of: pid) { seen.append(line) }
        }
        return (run.status, run.output, run.errors, seen)
    }

    // SPEC K3: `outbox emit` with the app secret in a file, then in the environment: the mock (which checks it)
    // accepts every log, the running process's command line never holds it, and neither do its trace-level logs, its
    // output, `outbox status`, `outbox dead-letters` or the fleet's report.
    @Test func secretsStayOutOfArgvAndEveryOutput() throws {
        let secret = "k3-\(UUID().uuidString)"
        let mock = try MockServer(configuration: .init(scenario: Scenario(seed: 1, rules: [
            // Slow answers keep the process alive long enough to be watched.
            .init(outcome: .respond(.init(delayMs: 150))),
        ]), appSecret: secret))
        try mock.start()
        defer { try? mock.stop() }
        let dir = TempDirectory(); defer { dir.remove() }
        let secretFile = dir.file("secret")
        try Data((secret + "\n").utf8).write(to: URL(fileURLWithPath: secretFile))
        let common = ["--count", "120", "--batch-size", "10", "--endpoint", mock.baseURL, "--log-level", "trace",
                      "--wait-delivered", "--timeout", "60", "--testing", "--interval", "0.05", "--retry-intervals", "0.05"]

        let fromFile = try Self.runWatched(["emit", "--store", dir.file("a.outbox"), "--app-secret-file", secretFile] + common, in: dir)
        let fromEnvironment = try Self.runWatched(["emit", "--store", dir.file("b.outbox")] + common,
                                                  environment: ["OUTBOX_APP_SECRET": secret], in: dir)
        for run in [fromFile, fromEnvironment] {
            #expect(run.status == 0, "\(run.errors.suffix(500))")
            #expect(!run.commandLines.isEmpty, "the process was never seen running")
            #expect(run.commandLines.allSatisfy { !$0.contains(secret) })
            #expect(run.errors.contains("trace") || run.errors.contains("debug"), "trace-level logs were written")
            #expect(!run.output.contains(secret) && !run.errors.contains(secret))
        }
        #expect(mock.stats().logsUnique >= 200, "the mock checked the secret and accepted the logs")

        let status = try runOutbox(["status", "--store", dir.file("a.outbox")], in: dir)
        let letters = try runOutbox(["dead-letters", "--store", dir.file("a.outbox")], in: dir)
        #expect(status.status == 0 && letters.status == 0)
        for text in [status.output, status.errors, letters.output, letters.errors] { #expect(!text.contains(secret)) }

        // An error message names the flag and the file, never the secret (an empty one here).
        let empty = dir.file("empty")
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        let refused = try runOutbox(["emit", "--store", dir.file("c.outbox"), "--app-secret-file", empty, "--count", "1"], in: dir)
        #expect(refused.status != 0 && refused.errors.contains("--app-secret-file"))

        let report = dir.path + "/report"
        let fleet = try Self.runWatched(["fleet", "--devices", "2", "--events", "5", "--endpoint", mock.baseURL,
                                         "--app-secret-file", secretFile, "--report", report, "--timeout", "60"], in: dir)
        #expect(fleet.status == 0, "\(fleet.errors.suffix(500))")
        let summary = (try? String(contentsOfFile: report + "/summary.json", encoding: .utf8)) ?? ""
        let page = (try? String(contentsOfFile: report + "/report.html", encoding: .utf8)) ?? ""
        #expect(!summary.isEmpty && !page.isEmpty)
        for text in [summary, page, fleet.output, fleet.errors] + fleet.commandLines { #expect(!text.contains(secret)) }
    }
}

extension SecretsOutOfArgvTests {
    // SPEC K3: a secret given in argv never reaches the fleet's outputs: report.html (which shows the command line),
    // summary.json, the live line and the log lines (trace). Every secret flag, in both forms (`--flag S`,
    // `--flag=S`), `--header` values, and the credentials of a URL (userinfo, query values) are shown as `***`.
    @Test(arguments: [
        (["--app-secret", "SECRET-A1"], "--app-secret ***"),
        (["--app-secret=SECRET-A2"], "--app-secret=***"),
        (["--destination", "posthog", "--api-key", "SECRET-P1"], "--api-key ***"),
        (["--destination", "posthog", "--api-key=SECRET-P2"], "--api-key=***"),
        (["--destination", "segment", "--write-key", "SECRET-W1"], "--write-key ***"),
        (["--destination", "segment", "--write-key=SECRET-W2"], "--write-key=***"),
        (["--header", "X-Token: SECRET-H1"], "--header X-Token: ***"),
        (["--header=X-Token: SECRET-H2"], "--header=X-Token: ***"),
    ])
    func theFleetsOutputsShowNoSecretFromItsCommandLine(secretArguments: [String], shown: String) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let mock = try startMock(); defer { try? mock.stop() }
        let secret = try #require(secretArguments.last?.split(separator: " ").last.map(String.init)?
            .split(separator: "=").last.map(String.init))
        // The endpoint's userinfo and an accounting endpoint's credential query carry secrets of their own.
        let port = mock.baseURL.split(separator: ":").last.map(String.init) ?? ""
        let report = dir.path + "/report"
        let run = try runOutbox(["fleet", "--devices", "2", "--events", "3",
                                 "--endpoint", "http://user:SECRET-U@127.0.0.1:\(port)",
                                 "--accounting-endpoint", "http://127.0.0.1:\(port)/?token=SECRET-Q&api_secret=SECRET-Q",
                                 "--report", report, "--log-level", "trace", "--timeout", "30",
                                 "--testing", "--interval", "0.1"] + secretArguments, in: dir)
        #expect(run.status == 0, "\(run.errors.suffix(800))")
        let summary = (try? String(contentsOfFile: report + "/summary.json", encoding: .utf8)) ?? ""
        let page = (try? String(contentsOfFile: report + "/report.html", encoding: .utf8)) ?? ""
        #expect(!summary.isEmpty && !page.isEmpty)
        for text in [summary, page, run.output, run.errors] {
            for leaked in [secret, "SECRET-U", "SECRET-Q"] { #expect(!text.contains(leaked), "\(leaked) in \(text.prefix(300))") }
        }
        #expect(page.contains(shown), "the page shows \(shown)")
        #expect(page.contains("http://***@127.0.0.1:\(port)"))
    }
}
