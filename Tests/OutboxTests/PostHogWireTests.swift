import Foundation
import Testing
@testable import Outbox

/// PostHog's wire (SPEC D4, D7a) and identify on the other wires (A8a), from stored logs.
@Suite("PostHog encoding and identify on every wire (SPEC D4, D7a, A8a)")
struct PostHogWireTests {
    static func body(_ bytes: [UInt8]) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
    }

    /// An ISO 8601 time with milliseconds as ms since 1970.
    static func ms(_ text: String) -> Int64? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
    }

    static func log(_ payload: String, wallMs: Int64, monoNs: Int64, boot: Int64 = 7) -> StoredLog {
        StoredLog(seq: 1, id: UUIDBytes(high: 0x0193_0000_0000_7000, low: 0x8000_0000_0000_0001), priority: .normal,
                  wallMs: wallMs, monoNs: monoNs, boot: boot, context: 1, payload: Array(payload.utf8))
    }

    // SPEC D7a: the wall clock is stepped an hour forward between capture and send. `sent_at` is the device's clock
    // at the send and `timestamp` that minus the log's 5 s age on the boot clock, so PostHog's own arithmetic —
    // server now − (sent_at − timestamp) — gives the event 5 s before the server's now, whatever the device's wall
    // clock did; after a reboot (another boot id) the wall-clock capture time is sent as it is.
    @Test func sentAtMinusTheBootClockAgeSurvivesAStepOfTheWallClock() throws {
        let capturedWall: Int64 = 1_795_000_000_000, capturedMono: Int64 = 50_000_000_000
        let stepped = capturedWall + 3_600_000 + 5_000          // an hour's step, and 5 s of real time
        let nowMono = capturedMono + 5_000_000_000
        let stored = Self.log(#"{"type":"event","id":"x","sid":null,"name":"Bought"}"#, wallMs: capturedWall, monoNs: capturedMono)
        let times = WireTimes(sentAtMs: 0, timestamp: { _ in 0 }, deviceNowMs: stepped,
                              deviceTimestamp: { WireTimes.deviceTime(of: $0, nowWallMs: stepped, nowMonoNs: nowMono, nowBoot: 7) })
        let wire = PostHogWire(apiKey: "phc_k", installID: UUID())
        let sent = try Self.body(wire.encode([stored], contexts: [:], times: times))
        let sentAtText = try #require(sent["sent_at"] as? String)
        let sentAt = try #require(Self.ms(sentAtText))
        let event = try #require((sent["batch"] as? [[String: Any]])?.first)
        let timestampText = try #require(event["timestamp"] as? String)
        let timestamp = try #require(Self.ms(timestampText))
        #expect(sentAt == stepped)
        #expect(sentAt - timestamp == 5_000, "the log's age on the boot clock")
        let serverNow: Int64 = 1_795_000_004_000                   // the server's own clock at arrival
        #expect(serverNow - (sentAt - timestamp) == serverNow - 5_000, "PostHog's correction lands 5 s before arrival")
        #expect(sent["api_key"] as? String == "phc_k")
        #expect(sent["historical_migration"] as? Bool == false)

        let otherBoot = Self.log(#"{"type":"event","id":"x","sid":null,"name":"Bought"}"#, wallMs: capturedWall,
                                 monoNs: capturedMono, boot: 6)
        #expect(WireTimes.deviceTime(of: otherBoot, nowWallMs: stepped, nowMonoNs: nowMono, nowBoot: 7) == capturedWall)
    }

    // SPEC A8a on App Center's wire: an identify goes as a userProperties log with its traits and userId; without
    // traits, with the user id as its one property (W2's user properties are never empty).
    @Test func identifyIsAUserPropertiesLogOnAppCenter() throws {
        let withTraits = Self.log(#"{"type":"identify","id":"x","sid":null,"userId":"u-7","properties":[{"type":"string","name":"plan","value":"pro"}]}"#,
                                  wallMs: 1, monoNs: 1)
        let without = Self.log(#"{"type":"identify","id":"x","sid":null,"userId":"u-7","properties":[]}"#, wallMs: 1, monoNs: 1)
        let encoder = BatchEncoder(contexts: [:])
        let logs = try #require(try Self.body(encoder.encode([withTraits, without], sentAtMs: 1) { _ in 1 })["logs"] as? [[String: Any]])
        #expect(logs.map { $0["type"] as? String } == ["userProperties", "userProperties"])
        #expect(logs.map { $0["userId"] as? String } == ["u-7", "u-7"])
        #expect((logs[0]["properties"] as? [[String: Any]])?.first?["name"] as? String == "plan")
        #expect((logs[1]["properties"] as? [[String: Any]])?.first?["value"] as? String == "u-7")
    }

    // SPEC D4 on OTLP: identify is `outbox.identify` with `user.id` and its traits as `outbox.user.<trait>`.
    @Test func identifyOnOTLP() throws {
        let stored = Self.log(#"{"type":"identify","id":"x","sid":null,"userId":"u-7","properties":[{"type":"string","name":"plan","value":"pro"}]}"#,
                              wallMs: 1_795_000_000_000, monoNs: 1)
        let wire = OTLPWire(encoding: .json, installID: UUID())
        let text = String(decoding: wire.encode([stored], contexts: [:], times: WireTimes(sentAtMs: 0) { $0.wallMs }), as: UTF8.self)
        #expect(text.contains(#""eventName":"outbox.identify""#))
        #expect(text.contains(#"{"key":"user.id","value":{"stringValue":"u-7"}}"#))
        #expect(text.contains(#"{"key":"outbox.user.plan","value":{"stringValue":"pro"}}"#))
    }

    // SPEC D4: the six log types of Fixtures/payloads/ as one PostHog batch are byte for byte
    // Fixtures/destinations/posthog/batch.json (`OUTBOX_UPDATE_GOLDEN=1` rewrites it after a deliberate change).
    @Test func encodingMatchesTheGoldenBody() throws {
        let stored = try OTLPGoldenTests.types.enumerated().map { try OTLPGoldenTests.stored($1, seq: Int64($0 + 1)) }
        let install = try #require(UUID(uuidString: "5a1f0c3e-8b2d-4e6f-9a7c-1d3e5f7a9b0c"))
        let wire = PostHogWire(apiKey: "phc_golden", installID: install)
        let bytes = wire.encode(stored.map(\.log), contexts: [1: stored[0].device],
                                times: WireTimes(sentAtMs: 0, timestamp: { _ in 0 }, deviceNowMs: 1_795_000_060_000,
                                                 deviceTimestamp: { $0.wallMs + 1_500 }))
        let url = OTLPGoldenTests.root.appendingPathComponent("Fixtures/destinations/posthog/batch.json")
        if ProcessInfo.processInfo.environment["OUTBOX_UPDATE_GOLDEN"] == "1" {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
        }
        #expect(bytes == [UInt8](try Data(contentsOf: url)), "the encoder's output differs from \(url.lastPathComponent)")
        let events = try #require(try Self.body(bytes)["batch"] as? [[String: Any]])
        #expect(events.map { $0["event"] as? String } == ["Video>Music>Play", "session_start", "session_end", "$screen", "$set", "location"])
    }
}
