import Foundation
import Testing
@testable import Outbox

/// Amplitude's and Mixpanel's wires (SPEC D13, D14) from stored logs: the golden bodies, the requests' URLs and
/// credentials.
@Suite("Amplitude and Mixpanel encoding (SPEC D13, D14)")
struct AmplitudeMixpanelWireTests {
    static let install = UUID(uuidString: "5a1f0c3e-8b2d-4e6f-9a7c-1d3e5f7a9b0c") ?? UUID()

    /// The six log types of Fixtures/payloads/ as one batch of `wire`, byte for byte
    /// Fixtures/destinations/<name>/batch.json (`OUTBOX_UPDATE_GOLDEN=1` rewrites it after a deliberate change); returns
    /// the body.
    static func golden(_ wire: any DeliveryWire, _ name: String) throws -> [UInt8] {
        let stored = try OTLPGoldenTests.types.enumerated().map { try OTLPGoldenTests.stored($1, seq: Int64($0 + 1)) }
        let bytes = wire.encode(stored.map(\.log), contexts: [1: stored[0].device],
                                times: WireTimes(sentAtMs: 0, timestamp: { $0.wallMs + 250 }))
        let url = OTLPGoldenTests.root.appendingPathComponent("Fixtures/destinations/\(name)/batch.json")
        if ProcessInfo.processInfo.environment["OUTBOX_UPDATE_GOLDEN"] == "1" {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
        }
        #expect(bytes == [UInt8](try Data(contentsOf: url)), "the encoder's output differs from \(name)/\(url.lastPathComponent)")
        return bytes
    }

    // SPEC D13, D4: the golden body; each log type as the table in docs/BEHAVIOUR.md ("D13") maps it.
    @Test func amplitudeMatchesTheGoldenBody() throws {
        let bytes = try Self.golden(AmplitudeWire(apiKey: "amp_golden", installID: Self.install), "amplitude")
        let body = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
        #expect(body["api_key"] as? String == "amp_golden")
        let events = try #require(body["events"] as? [[String: Any]])
        #expect(events.map { $0["event_type"] as? String }
                == ["Video>Music>Play", "session_start", "session_end", "[Amplitude] Screen Viewed", "$identify", "location"])
        #expect(events.allSatisfy { $0["device_id"] as? String == Self.install.uuidString.lowercased() && $0["insert_id"] is String })
        #expect(events.allSatisfy { $0["time"] is Int })
    }

    // SPEC D14, D4: the golden body; each log type as the table in docs/BEHAVIOUR.md ("D14") maps it.
    @Test func mixpanelMatchesTheGoldenBody() throws {
        let wire = MixpanelWire(projectToken: "mp_golden", serviceAccountUser: "", serviceAccountSecret: "", projectID: nil,
                                installID: Self.install)
        let bytes = try Self.golden(wire, "mixpanel")
        let events = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [[String: Any]])
        #expect(events.map { $0["event"] as? String }
                == ["Video>Music>Play", "session_start", "session_end", "$screen", "user_properties", "location"])
        let properties = events.compactMap { $0["properties"] as? [String: Any] }
        #expect(properties.count == 6 && properties.allSatisfy { $0["$insert_id"] is String && $0["time"] is Int })
    }

    // SPEC D14: the token as HTTP Basic's user name; a service account as user and secret, with its project id.
    @Test func mixpanelsCredentialsAndURL() {
        let token = MixpanelWire(projectToken: "tok", serviceAccountUser: "", serviceAccountSecret: "", projectID: nil,
                                 installID: Self.install).request(endpoint: "https://api.mixpanel.com", headers: [])
        #expect(token.url == "https://api.mixpanel.com/import?strict=1")
        #expect(token.headers.contains { $0.0 == "Authorization" && $0.1 == "Basic " + Data("tok:".utf8).base64EncodedString() })
        let account = MixpanelWire(projectToken: "", serviceAccountUser: "sa", serviceAccountSecret: "pw", projectID: 42,
                                   installID: Self.install).request(endpoint: "https://api-eu.mixpanel.com/", headers: [])
        #expect(account.url == "https://api-eu.mixpanel.com/import?strict=1&project_id=42")
        #expect(account.headers.contains { $0.0 == "Authorization" && $0.1 == "Basic " + Data("sa:pw".utf8).base64EncodedString() })
    }

    // SPEC D14: a token or a whole service account, refused by name otherwise; nothing needed without an endpoint.
    @Test func mixpanelsCredentialsAreCheckedByName() throws {
        var configuration = Configuration(storePath: "/tmp/outbox-mixpanel.sqlite")
        configuration.destination = .mixpanel
        try configuration.validate()
        configuration.endpoint = "https://api.mixpanel.com"
        #expect(throws: OutboxError.self) { try configuration.validate() }
        configuration.serviceAccountUser = "sa"
        configuration.serviceAccountSecret = "pw"
        do { try configuration.validate(); Issue.record("a service account without projectId was accepted") } catch {
            #expect("\(error)".contains("projectId"))
        }
        configuration.projectId = 7
        try configuration.validate()
        configuration.projectToken = "tok"
        do { try configuration.validate(); Issue.record("a token and a service account were accepted") } catch {
            #expect("\(error)".contains("not both") && !"\(error)".contains("pw"))
        }
    }
}
