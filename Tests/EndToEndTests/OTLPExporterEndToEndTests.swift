import Foundation
import OutboxMock
import Testing

/// OpenTelemetry's official Python SDK and OTLP/HTTP exporter, unmodified but for the endpoint, against the real
/// mock over HTTP (SPEC V1–V5). The exporter lives in `.build/otlp-venv` (pinned versions, as
/// scripts/capture-otlp.py says); the first test to need it creates it with pip, and when pip cannot install
/// (no network to PyPI, no python3 venv) the tests are skipped with pip's reason.
@Suite("Official OTLP exporter against the mock (SPEC V1–V5)", .serialized)
struct OTLPExporterEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let venv = root + "/.build/otlp-venv"
    static let python = venv + "/bin/python"
    static let script = root + "/scripts/capture-otlp.py"
    static let packages = ["opentelemetry-sdk==1.45.2", "opentelemetry-exporter-otlp-proto-http==1.45.2"]

    /// nil when the exporter can run, else why not. Computed once per test process.
    static let unavailable: String? = {
        let probe = "import opentelemetry.exporter.otlp.proto.http, opentelemetry.sdk"
        if FileManager.default.isExecutableFile(atPath: python), (try? run(python, ["-c", probe]))?.status == 0 {
            return nil
        }
        let install = "python3 -m venv '\(venv)' && '\(venv)/bin/pip' install -q --disable-pip-version-check "
            + packages.joined(separator: " ") + " 2>&1 | tail -n 3; exit ${PIPESTATUS[0]}"
        guard let result = try? run("/bin/bash", ["-c", install]) else { return "cannot run /bin/bash to call pip" }
        if result.status == 0, (try? run(python, ["-c", probe]))?.status == 0 { return nil }
        let said = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
        return "pip could not install \(packages.joined(separator: " ")) into .build/otlp-venv"
            + (said.isEmpty ? "" : ": \(said)")
    }()

    /// Runs the exporter's calls against `server` (scripts/capture-otlp.py --against); what the SDK logged as
    /// warnings or errors.
    private func runExporter(_ server: MockServer) throws -> [String] {
        if let reason = Self.unavailable { try Test.cancel(Comment(rawValue: reason)) }
        let result = try run(Self.python, [Self.script, "--against", server.baseURL])
        #expect(result.status == 0)
        let errors = jsonObject(result.output)["errors"] as? [String]
        return try #require(errors, "no summary from the exporter: \(result.output)")
    }

    // SPEC V1, V2, V3, V4: the exporter takes the mock's answers as success (nothing logged), and the mock counts
    // what it sent: 53 log records in 2 requests (one gzip), 4 spans in 1, and the metric exports' data points,
    // each once.
    @Test func exporterDeliversEverythingOnce() throws {
        let server = try startMock()
        defer { try? server.stop() }
        let errors = try runExporter(server)
        #expect(errors.isEmpty, "\(errors)")
        let otlp = server.stats().vendor(.otlp)
        let events = server.vendorEvents()
        #expect(events.filter { $0.json.contains(#""logRecord""#) }.count == 53)
        #expect(events.filter { $0.json.contains(#""span""#) }.compactMap(\.name).sorted() == ["checkout", "db.query", "email", "pay"])
        // A forced flush and the reader's shutdown each export the 5 cumulative points, with new times.
        let points = events.filter { $0.json.contains(#""metric""#) }.count
        #expect(points >= 5 && points % 5 == 0)
        #expect(otlp.requests == 3 + points / 5)
        #expect(otlp.eventsReceived == 57 + points && otlp.eventsUnique == otlp.eventsReceived)
        #expect(otlp.eventsDuplicate == 0 && otlp.eventsRefused == 0)
    }

    // SPEC V2, R: a 503 and a 429 with Retry-After, in OTLP's shape, make the exporter retry as its own rules say;
    // every record still arrives once.
    @Test func exporterRetriesInjectedErrors() throws {
        let scenario = try Scenario.decode(from: Data((#"{"rules":[{"match":{"vendor":"otlp","requests":"1"},"#
            + #""respond":{"status":503}},{"match":{"vendor":"otlp","requests":"3"},"#
            + #""respond":{"status":429,"headers":{"Retry-After":"1"}}}]}"#).utf8))
        let server = try startMock(scenario: scenario)
        defer { try? server.stop() }
        _ = try runExporter(server)
        let stats = server.stats()
        #expect(stats.faults["respond"] == 2)
        let otlp = stats.vendor(.otlp)
        let events = server.vendorEvents()
        #expect(events.filter { $0.json.contains(#""logRecord""#) }.count == 53)
        #expect(events.filter { $0.json.contains(#""span""#) }.count == 4)
        #expect(otlp.eventsDuplicate == 0)
        #expect(otlp.requests >= 6)
    }
}
