import Foundation
import Testing
@testable import Outbox

/// Segment's wire (SPEC D1, D4, D7a) from stored logs, on both profiles.
@Suite("Segment encoding (SPEC D1, D4, D7a)")
struct SegmentWireTests {
    // SPEC D1: `{endpoint}/v1/batch` with HTTP Basic of the write key and an empty password.
    @Test func theWriteKeyGoesAsHTTPBasic() {
        let wire = SegmentWire(writeKey: "wk_123", profile: .segment, installID: UUID())
        let request = wire.request(endpoint: "http://127.0.0.1:9/", headers: [])
        #expect(request.url == "http://127.0.0.1:9/v1/batch")
        #expect(request.headers.contains { $0.0 == "Authorization" && $0.1 == "Basic " + Data("wk_123:".utf8).base64EncodedString() })
    }

    // SPEC D7a: `sentAt` is the device's clock at the send and each timestamp that minus the log's age on the boot
    // clock, so Segment's correction (arrival − (sentAt − timestamp)) is right after a step of the wall clock;
    // RudderStack's profile writes it as originalTimestamp.
    @Test(arguments: [SegmentProfile.segment, .rudderstack])
    func sentAtMinusTheBootClockAge(profile: SegmentProfile) throws {
        let captured: Int64 = 1_795_000_000_000
        let stepped = captured + 3_600_000 + 5_000
        let log = PostHogWireTests.log(#"{"type":"event","id":"x","sid":null,"name":"Bought"}"#, wallMs: captured, monoNs: 50_000_000_000)
        let times = WireTimes(sentAtMs: 0, timestamp: { _ in 0 }, deviceNowMs: stepped,
                              deviceTimestamp: { WireTimes.deviceTime(of: $0, nowWallMs: stepped, nowMonoNs: 55_000_000_000, nowBoot: 7) })
        let wire = SegmentWire(writeKey: "wk", profile: profile, installID: UUID())
        let body = try PostHogWireTests.body(wire.encode([log], contexts: [:], times: times))
        let sentAtText = try #require(body["sentAt"] as? String)
        let sentAt = try #require(PostHogWireTests.ms(sentAtText))
        let message = try #require((body["batch"] as? [[String: Any]])?.first)
        let key = profile == .rudderstack ? "originalTimestamp" : "timestamp"
        let timeText = try #require(message[key] as? String)
        let time = try #require(PostHogWireTests.ms(timeText))
        #expect(sentAt == stepped)
        #expect(sentAt - time == 5_000, "the log's age on the boot clock")
    }

    // SPEC D4: the six log types of Fixtures/payloads/ as one batch are byte for byte
    // Fixtures/destinations/segment/<profile>.json (`OUTBOX_UPDATE_GOLDEN=1` rewrites them after a deliberate change).
    @Test(arguments: [SegmentProfile.segment, .rudderstack])
    func encodingMatchesTheGoldenBody(profile: SegmentProfile) throws {
        let stored = try OTLPGoldenTests.types.enumerated().map { try OTLPGoldenTests.stored($1, seq: Int64($0 + 1)) }
        let install = try #require(UUID(uuidString: "5a1f0c3e-8b2d-4e6f-9a7c-1d3e5f7a9b0c"))
        let wire = SegmentWire(writeKey: "wk_golden", profile: profile, installID: install)
        let bytes = wire.encode(stored.map(\.log), contexts: [1: stored[0].device],
                                times: WireTimes(sentAtMs: 0, timestamp: { _ in 0 }, deviceNowMs: 1_795_000_060_000,
                                                 deviceTimestamp: { $0.wallMs + 1_500 }))
        let url = OTLPGoldenTests.root.appendingPathComponent("Fixtures/destinations/segment/\(profile.rawValue).json")
        if ProcessInfo.processInfo.environment["OUTBOX_UPDATE_GOLDEN"] == "1" {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
        }
        #expect(bytes == [UInt8](try Data(contentsOf: url)), "the encoder's output differs from \(url.lastPathComponent)")
        let messages = try #require(try PostHogWireTests.body(bytes)["batch"] as? [[String: Any]])
        #expect(messages.map { $0["type"] as? String } == ["track", "track", "track", "screen", "identify", "track"])
        #expect(messages.map { $0["event"] as? String } == ["Video>Music>Play", "Session Started", "Session Ended", nil, nil, "Location Updated"])
    }
}
