import Foundation
import Logging
import Testing
@testable import Outbox

/// Sensors Analytics' wire (SPEC D11) and GA4's (SPEC D12) from stored logs: the golden bodies of every log type,
/// Sensors' form and its `crc`, GA4's names, limits, age and masked secret.
@Suite("Sensors and GA4 encoding (SPEC D11, D12)")
struct SensorsGA4WireTests {
    static let install = UUID(uuidString: "5a1f0c3e-8b2d-4e6f-9a7c-1d3e5f7a9b0c") ?? UUID()

    /// The six golden payload types of Fixtures/payloads/ and an identify, as the store keeps them.
    static func stored() throws -> (logs: [StoredLog], contexts: [Int64: [UInt8]]) {
        let six = try OTLPGoldenTests.types.enumerated().map { try OTLPGoldenTests.stored($1, seq: Int64($0 + 1)) }
        let identify = StoredLog(
            seq: 7, id: UUIDBytes(high: 0x0193_0000_0000_7000, low: 0x8000_0000_0000_0007), priority: .normal,
            wallMs: 1_795_000_000_007, monoNs: 0, boot: 7, context: 1,
            payload: Array(#"{"type":"identify","id":"01930000-0000-7000-8000-000000000007","sid":null,"userId":"u-7","properties":[{"type":"string","name":"plan","value":"pro"}]}"#.utf8))
        return (six.map(\.log) + [identify], [1: six[0].device])
    }

    static func golden(_ bytes: [UInt8], _ path: String) throws {
        let url = OTLPGoldenTests.root.appendingPathComponent("Fixtures/destinations/" + path)
        if ProcessInfo.processInfo.environment["OUTBOX_UPDATE_GOLDEN"] == "1" {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(bytes).write(to: url)
        }
        #expect(bytes == [UInt8](try Data(contentsOf: url)), "the encoder's output differs from \(path)")
    }

    static func json(_ bytes: [UInt8]) throws -> Any { try JSONSerialization.jsonObject(with: Data(bytes)) }

    // SPEC D11: every log type as one Sensors record, byte for byte Fixtures/destinations/sensors/batch.json
    // (`OUTBOX_UPDATE_GOLDEN=1` rewrites it after a deliberate change).
    @Test func sensorsRecordsMatchTheGoldenBody() throws {
        let (logs, contexts) = try Self.stored()
        let bytes = SensorsWire(installID: Self.install).records(logs, contexts: contexts, flushTimeMs: 1_795_000_060_000)
        try Self.golden(bytes, "sensors/batch.json")
        let records = try #require(try Self.json(bytes) as? [[String: Any]])
        #expect(records.map { $0["type"] as? String } == ["track", "track", "track", "track", "profile_set", "track", "track_signup"])
        #expect(records.map { $0["event"] as? String } == ["Video_Music_Play", "$AppStart", "$AppEnd", "$AppViewScreen", nil,
                                                           "$Location", "$SignUp"])
        #expect(records.allSatisfy { $0["_flush_time"] as? Int == 1_795_000_060_000 })
        let properties = try #require(records[0]["properties"] as? [String: Any])
        #expect(properties["event_duration"] as? Double == 61.5, "the timer's 61 500 ms in seconds")
        #expect(records[6]["original_id"] as? String == Self.install.uuidString.lowercased())
    }

    // SPEC D11: a property named as one of Sensors' reserved fields, in any case, gets a `_` in front (compared as
    // bytes on the fast path); a longer name that begins like one, or a name that is not reserved, is copied.
    @Test func sensorsReservedPropertyNamesArePrefixed() throws {
        let payload = #"{"type":"event","id":"01930000-0000-7000-8000-000000000009","sid":null,"name":"e","typedProperties":["#
            + #"{"type":"string","name":"Time","value":"a"},{"type":"string","name":"distinct_ID","value":"b"},"#
            + #"{"type":"string","name":"timezone","value":"c"},{"type":"string","name":"user_ids","value":"d"}]}"#
        let log = StoredLog(seq: 1, id: UUIDBytes(high: 0x0193_0000_0000_7000, low: 0x8000_0000_0000_0009), priority: .normal,
                            wallMs: 1_795_000_000_000, monoNs: 0, boot: 0, context: 1, payload: Array(payload.utf8))
        let bytes = SensorsWire(installID: Self.install).records([log], contexts: [:], flushTimeMs: 1_795_000_060_000)
        let records = try #require(try Self.json(bytes) as? [[String: Any]])
        let properties = try #require(records.first?["properties"] as? [String: Any])
        #expect(properties["_Time"] as? String == "a" && properties["_distinct_ID"] as? String == "b")
        #expect(properties["timezone"] as? String == "c" && properties["user_ids"] as? String == "d")
    }

    // SPEC D11: the form as Sensors' SDKs post it: `crc` the Java hash of the base64 text, `gzip=1`, `data_list`
    // the base64 of the gzipped records with `+` and `=` percent-encoded; `_track_id` stable and 31 bits.
    @Test func sensorsFormCarriesTheGzippedRecordsAndTheirCRC() throws {
        #expect(SensorsWire.javaHashCode("hello") == 99_162_322)
        #expect(SensorsWire.javaHashCode("polygenelubricants") == Int32.min, "wraps around as Java's int")
        let (logs, contexts) = try Self.stored()
        let wire = SensorsWire(installID: Self.install)
        let form = String(decoding: wire.encode(logs, contexts: contexts, times: WireTimes(sentAtMs: 0) { $0.wallMs }), as: UTF8.self)
        let fields = Dictionary(uniqueKeysWithValues: form.split(separator: "&").map { pair -> (String, String) in
            let parts = pair.split(separator: "=", maxSplits: 1)
            return (String(parts[0]), String(parts.count > 1 ? parts[1] : ""))
        })
        let encoded = try #require(fields["data_list"])
        #expect(!encoded.contains("+") && !encoded.contains("="))
        let base64 = try #require(encoded.removingPercentEncoding)
        #expect(fields["gzip"] == "1")
        #expect(fields["crc"] == "\(SensorsWire.javaHashCode(base64))")
        let gzipped = try #require(Data(base64Encoded: base64))
        let records = try Gzip.decompress([UInt8](gzipped))
        #expect((try Self.json(records) as? [Any])?.count == 7)
        let ids = logs.map { SensorsWire.trackID($0.id) }
        #expect(ids == logs.map { SensorsWire.trackID($0.id) })
        #expect(ids.allSatisfy { $0 >= 0 && $0 < 1 << 31 })
        #expect(Set(ids).count == ids.count)
        #expect(!wire.acceptsGzipBody && wire.request(endpoint: "https://h:8106/sa?project=p", headers: []).url == "https://h:8106/sa?project=p")
    }

    // SPEC D11: an endpoint without its project is refused naming the field.
    @Test func sensorsNeedsItsProjectInTheEndpoint() throws {
        var configuration = testConfiguration("/tmp/outbox-sensors.sqlite")
        configuration.destination = .sensors
        configuration.endpoint = "https://h:8106/sa"
        #expect(throws: OutboxError.self) { try configuration.validate() }
        #expect(configuration.destinationFieldProblem?.hasPrefix("endpoint ") == true)
        configuration.endpoint = "https://h:8106/sa?project="
        #expect(configuration.destinationFieldProblem != nil)
        configuration.endpoint = "https://h:8106/sa?token=t&project=shop"
        try configuration.validate()
    }

    // SPEC D12: every log type as a GA4 event, byte for byte Fixtures/destinations/ga4/batch.json.
    @Test func ga4BodyMatchesTheGoldenBody() throws {
        let (logs, contexts) = try Self.stored()
        let wire = GA4Wire(measurementId: "G-GOLDEN1", apiSecret: "s", installID: Self.install, warnings: GA4Warnings(logger: Logger(label: "t")))
        let bytes = wire.encode(logs, contexts: contexts, times: WireTimes(sentAtMs: 0, timestamp: { $0.wallMs }, deviceNowMs: 1_795_000_060_000))
        try Self.golden(bytes, "ga4/batch.json")
        let body = try #require(try Self.json(bytes) as? [String: Any])
        let events = try #require(body["events"] as? [[String: Any]])
        #expect(events.map { $0["name"] as? String } == ["Video_Music_Play", "outbox_session_start", "outbox_session_end",
                                                         "screen_view", "set_user_properties", "location", "login"])
        #expect(events.map { $0["timestamp_micros"] as? Int } == logs.map { Int($0.wallMs) * 1000 })
        #expect(body["client_id"] as? String == Self.install.uuidString.lowercased())
        #expect(body["user_id"] as? String == "u-7")
        let params = try #require(events[0]["params"] as? [String: Any])
        #expect(params["original_name"] as? String == "Video>Music>Play")
        #expect(params["engagement_time_msec"] as? Int == 61_500, "the timer's duration")
    }

    // SPEC D12: `engagement_time_msec` is the duration in whole ms, at least 1; a stored duration no Int64 holds (or
    // not a number) is clamped, never a trap in the conversion.
    @Test func ga4EngagementTimeIsClampedNeverATrap() {
        #expect(GA4Wire.engagementMs(nil) == 1)
        #expect(GA4Wire.engagementMs(0.2) == 1)
        #expect(GA4Wire.engagementMs(2_400.6) == 2_401)
        #expect(GA4Wire.engagementMs(1e300) == 9_000_000_000_000_000_000)
        #expect(GA4Wire.engagementMs(-.infinity) == 1)
        #expect(GA4Wire.engagementMs(.nan) == 1)
    }

    // SPEC D12: names GA4 refuses or reserves are rewritten; values cut; a name is warned about once.
    @Test func ga4NamesAndLimits() throws {
        #expect(GA4Wire.eventName("Video>Music>Play") == "Video_Music_Play")
        #expect(GA4Wire.eventName("session_start") == "e_session_start")
        #expect(GA4Wire.eventName("firebase_x") == "e_firebase_x")
        #expect(GA4Wire.eventName("1st") == "e_1st")
        #expect(GA4Wire.eventName(String(repeating: "a", count: 50)).count == 40)
        #expect(GA4Wire.eventName("Bought") == "Bought")
        let (logger, box) = RecordingLogHandler.make()
        let wire = GA4Wire(measurementId: "G-A1", apiSecret: "s", installID: Self.install, warnings: GA4Warnings(logger: logger))
        let payload = #"{"type":"event","id":"x","sid":null,"name":"a-b","typedProperties":[{"type":"string","name":"long","value":"\#(String(repeating: "v", count: 120))"}]}"#
        let log = StoredLog(seq: 1, id: UUIDBytes(high: 1, low: 2), priority: .normal, wallMs: 1_795_000_000_000, monoNs: 0,
                            boot: 7, context: 1, payload: Array(payload.utf8))
        for _ in 0..<3 { _ = wire.encode([log], contexts: [:], times: WireTimes(sentAtMs: 0) { $0.wallMs }) }
        #expect(box.all.count { $0.message.contains("a-b") && $0.level == .warning } == 1, "one warning per name")
        #expect(box.all.count { $0.message.contains("cut to 100") } == 1)
        let body = try #require(try Self.json(wire.encode([log], contexts: [:], times: WireTimes(sentAtMs: 0) { $0.wallMs })) as? [String: Any])
        let params = try #require((body["events"] as? [[String: Any]])?.first?["params"] as? [String: Any])
        #expect((params["long"] as? String)?.count == 100)
    }

    // SPEC D12 on the bytes-first path (D10): in one batch, names GA4 takes are copied beside names it rewrites
    // (non-ASCII, reserved prefix, a clash after rewriting, a name clashing with one of ours), a value needing its
    // escape, a non-ASCII value over 100 bytes but under 100 characters (not cut), an ASCII one over 100 (cut, one
    // warning), the last user id, a reserved event name.
    @Test func ga4RewritesOnlyTheNamesThatNeedItInABatch() throws {
        func log(_ seq: Int64, _ payload: String) -> StoredLog {
            StoredLog(seq: seq, id: UUIDBytes(high: 1, low: UInt64(seq)), priority: .normal, wallMs: 1_795_000_000_000 + seq,
                      monoNs: 0, boot: 7, context: 1, payload: Array(payload.utf8))
        }
        let long = String(repeating: "é", count: 60), pad = String(repeating: "a", count: 110)
        let cut = String(repeating: "a", count: 100)
        let logs = [
            log(1, #"{"type":"event","id":"x","sid":null,"userId":"u-0","name":"Bought","typedProperties":[{"type":"string","name":"plan","value":"pro"},{"type":"long","name":"n","value":3},{"type":"boolean","name":"ok","value":true},{"type":"double","name":"r","value":1.5},{"type":"long","name":"engagement_time_msec","value":99},{"type":"string","name":"pad","value":"\#(pad)"}]}"#),
            log(2, #"{"type":"event","id":"y","sid":null,"userId":"u-1","name":"a-b","typedProperties":[{"type":"string","name":"x-y","value":"1"},{"type":"string","name":"x_y","value":"2"},{"type":"string","name":"é","value":"q\"uote"},{"type":"string","name":"ga_id","value":"ü"},{"type":"string","name":"long","value":"\#(long)"}]}"#),
            log(3, #"{"type":"event","id":"z","sid":null,"name":"error","typedProperties":[{"type":"string","name":"pad","value":"\#(pad)"}]}"#),
        ]
        let (logger, box) = RecordingLogHandler.make()
        let wire = GA4Wire(measurementId: "G-A1", apiSecret: "s", installID: Self.install, warnings: GA4Warnings(logger: logger))
        let bytes = wire.encode(logs, contexts: [:], times: WireTimes(sentAtMs: 0) { $0.wallMs })
        let expected = #"{"client_id":"5a1f0c3e-8b2d-4e6f-9a7c-1d3e5f7a9b0c","user_id":"u-1","user_properties":{},"events":["#
            + #"{"name":"Bought","params":{"engagement_time_msec":1,"plan":"pro","n":3,"ok":1,"r":1.5,"pad":"\#(cut)"},"timestamp_micros":1795000000001000},"#
            + #"{"name":"a_b","params":{"engagement_time_msec":1,"original_name":"a-b","x_y":"1","e__":"q\"uote","p_ga_id":"ü","long":"\#(long)"},"timestamp_micros":1795000000002000},"#
            + #"{"name":"e_error","params":{"engagement_time_msec":1,"original_name":"error","pad":"\#(cut)"},"timestamp_micros":1795000000003000}]}"#
        #expect(String(decoding: bytes, as: UTF8.self) == expected)
        #expect(box.all.map(\.message).filter { $0.contains("cut to 100") } == ["parameter pad: value cut to 100 characters, GA4's limit"],
                "120 bytes of 60 characters not cut; 110 ASCII characters cut, warned about once")
        for name in ["a-b", "x-y", "ga_id", "error"] {
            #expect(box.all.count { $0.message.contains(" \(name) ") && $0.level == .warning } == 1, "warned about \(name)")
        }
        #expect(!box.all.contains { $0.message.contains("plan") || $0.message.contains("Bought") }, "names GA4 takes: no warning")
    }

    // SPEC D12: a log older than 72 hours is refused before any request; the secret is masked wherever the URL is
    // shown; the measurement id must be GA4's; 25 events a request.
    @Test func ga4AgeSecretMeasurementIdAndBatch() throws {
        let wire = GA4Wire(measurementId: "G-A1", apiSecret: "se cret/1", installID: Self.install,
                           warnings: GA4Warnings(logger: Logger(label: "t")))
        let now: Int64 = 1_795_000_000_000
        func log(ageHours: Int64) -> StoredLog {
            StoredLog(seq: 1, id: UUIDBytes(high: 1, low: 2), priority: .normal, wallMs: now - ageHours * 3_600_000, monoNs: 0,
                      boot: 0, context: 1, payload: Array(#"{"type":"event","id":"x","name":"n"}"#.utf8))
        }
        let times = WireTimes(sentAtMs: now, timestamp: { $0.wallMs }, deviceNowMs: now, deviceTimestamp: { $0.wallMs })
        #expect(wire.refusal(of: log(ageHours: 71), times: times) == nil)
        #expect(wire.refusal(of: log(ageHours: 73), times: times)?.contains("72 hours") == true)
        let url = wire.request(endpoint: "https://www.google-analytics.com/", headers: []).url
        #expect(url == "https://www.google-analytics.com/mp/collect?measurement_id=G-A1&api_secret=se%20cret%2F1")
        #expect(!maskingCredentials(in: url).contains("se%20cret") && maskingCredentials(in: url).hasSuffix("api_secret=***"))
        #expect(GA4Wire.measurementIdProblem("G-ABC123") == nil)
        #expect(GA4Wire.measurementIdProblem("UA-1234-1") != nil)
        #expect(GA4Wire.measurementIdProblem("G-") != nil)
        #expect(wire.maxLogsPerRequest == 25)
        #expect(!wire.acceptsGzipBody, "plain JSON: GA4 documents no Content-Encoding")
        var configuration = testConfiguration("/tmp/outbox-ga4.sqlite")
        configuration.destination = .ga4
        configuration.endpoint = "https://www.google-analytics.com"
        configuration.apiSecret = "s"
        #expect(configuration.destinationFieldProblem?.hasPrefix("measurementId ") == true)
        configuration.measurementId = "G-ABC123"
        try configuration.validate()
    }
}
