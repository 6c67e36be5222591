import Foundation
import OutboxMock
import Testing

/// The official Python clients of Segment, PostHog, Snowplow and Mixpanel, unmodified but for the host,
/// against the real mock over HTTP (SPEC V1–V5). They need the virtual environment that
/// scripts/capture-vendors.py describes (`.build/vendor-venv`, pinned versions); without it the tests are skipped.
@Suite("Official vendor clients against the mock (SPEC V1–V5)")
struct VendorClientsEndToEndTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
    static let python = root + "/.build/vendor-venv/bin/python"
    static let script = root + "/scripts/capture-vendors.py"
    static var hasClients: Bool { FileManager.default.isExecutableFile(atPath: python) }

    /// Runs every client's calls against `server`; the errors each client reported, by vendor.
    private func runClients(_ server: MockServer) throws -> [String: [String]] {
        let result = try run(Self.python, [Self.script, "--against", server.baseURL])
        #expect(result.status == 0)
        let errors = jsonObject(result.output)["errors"] as? [String: [String]]
        return try #require(errors, "no summary from the clients: \(result.output)")
    }

    // SPEC V2, V3, V4: every client takes the mock's answers as success (no error reported), and the mock's
    // counts are what the clients sent: Segment 10 messages in 2 batches, PostHog 12 events in 4 (v0 and v1,
    // plain, gzip, deflate), Snowplow 5 (tp2 and GET /i), Mixpanel 7 in 5 (track, engage, groups, import, buffered).
    @Test(.enabled(if: hasClients, "needs .build/vendor-venv (see scripts/capture-vendors.py)"))
    func officialClientsDeliverEverythingOnce() throws {
        let server = try startMock()
        defer { try? server.stop() }
        let errors = try runClients(server)
        #expect(errors.isEmpty, "\(errors)")
        let stats = server.stats()
        let expected: [Vendor: (requests: Int, events: Int)] = [
            .segment: (2, 10), .posthog: (4, 12), .snowplow: (2, 5), .mixpanel: (5, 7),
        ]
        for (vendor, want) in expected {
            let got = stats.vendor(vendor)
            #expect(got == .init(requests: want.requests, eventsReceived: want.events, eventsUnique: want.events,
                                 eventsDuplicate: 0, eventsRefused: 0), "\(vendor)")
        }
        #expect(stats.requests == 13)
        #expect(stats.logsReceived == 0)
    }

    // SPEC V2: a fault injected for one vendor reaches its client in that vendor's error shape — Mixpanel's
    // client reports "Mixpanel error: …" (a KeyError if the body lacked `status`), and the others are untouched.
    @Test(.enabled(if: hasClients, "needs .build/vendor-venv (see scripts/capture-vendors.py)"))
    func aVendorsFaultReachesOnlyItsClientInItsShape() throws {
        let scenario = try Scenario.decode(from: Data(#"{"rules":[{"match":{"vendor":"mixpanel"},"respond":{"status":503}}]}"#.utf8))
        let server = try startMock(scenario: scenario)
        defer { try? server.stop() }
        let errors = try runClients(server)
        #expect(Array(errors.keys) == ["mixpanel"])
        #expect(errors["mixpanel"]?.first?.contains("Mixpanel error: 503 injected by the scenario") == true)
        let stats = server.stats()
        #expect(stats.vendor(.mixpanel).eventsReceived == 0)
        #expect(stats.vendor(.segment).eventsUnique == 10)
        #expect(stats.faults["respond"] == 1)
    }
}
