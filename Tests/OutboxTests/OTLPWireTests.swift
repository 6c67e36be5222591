import Foundation
import OTLPProto
import SwiftProtobuf
import Testing
@testable import Outbox

/// The engine's OTLP encoder (SPEC D4) read back by swift-protobuf's generated code, an independent parser, for every
/// log type of the golden payloads: protobuf and OTLP/JSON carry the same request, and each record its mapping.
@Suite("OTLP encoding, read back by swift-protobuf (SPEC D4)")
struct OTLPWireTests {
    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The golden payload of `type` as the store holds it: the log without `timestamp` and `device`, and the device.
    private static func stored(_ type: String) throws -> (log: StoredLog, device: [UInt8]) {
        let data = try Data(contentsOf: root.appendingPathComponent("Fixtures/payloads/\(type).json"))
        let body = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        var log = try #require((body["logs"] as? [[String: Any]])?.first)
        let device = try JSONSerialization.data(withJSONObject: try #require(log["device"]))
        log["timestamp"] = nil
        log["device"] = nil
        let payload = try JSONSerialization.data(withJSONObject: log, options: [.sortedKeys])
        let text = try #require(log["id"] as? String)
        let id = try #require(UUIDBytes(string: text))
        return (StoredLog(seq: 1, id: id, priority: .normal, wallMs: 1_795_000_000_000, monoNs: 0, boot: 7, context: 1,
                          payload: Array(payload)), Array(device))
    }

    private static func encode(_ type: String, _ encoding: OTLPEncoding, installID: UUID) throws
        -> Opentelemetry_Proto_Collector_Logs_V1_ExportLogsServiceRequest {
        // Keys sorted, so that both encodings see one payload (a record's attributes follow its payload's order).
        let (log, device) = try stored(type)
        let wire = OTLPWire(encoding: encoding, installID: installID)
        let body = wire.encode([log], contexts: [1: device], times: WireTimes(sentAtMs: 0) { _ in 1_795_000_000_123 })
        switch encoding {
        case .protobuf: return try .init(serializedBytes: body)
        case .json: return try .init(jsonUTF8Bytes: body)
        }
    }

    private static func attributes(_ list: [Opentelemetry_Proto_Common_V1_KeyValue]) -> [String: Opentelemetry_Proto_Common_V1_AnyValue] {
        Dictionary(list.map { ($0.key, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    @Test(arguments: [("event", "Video>Music>Play"), ("startSession", "session.start"), ("endSession", "session.end"),
                      ("screen", "outbox.screen_view"), ("userProperties", "outbox.user_properties"),
                      ("location", "outbox.location")])
    func eachLogTypeIsOneRecordWithItsMapping(type: String, eventName: String) throws {
        let install = UUID()
        let request = try Self.encode(type, .protobuf, installID: install)
        #expect(try Self.encode(type, .json, installID: install) == request, "OTLP/JSON carries the same request")
        #expect(request.resourceLogs.count == 1)
        let resourceLogs = try #require(request.resourceLogs.first)
        #expect(resourceLogs.schemaURL == OTLPWire.schemaURL)
        let resource = Self.attributes(resourceLogs.resource.attributes)
        #expect(resource["service.name"]?.stringValue == "com.example.player")
        #expect(resource["service.version"]?.stringValue == "2.1")
        #expect(resource["app.build_id"]?.stringValue == "210")
        #expect(resource["app.installation.id"]?.stringValue == install.uuidString.lowercased())
        #expect(resource["os.type"]?.stringValue == "linux")
        #expect(resource["device.manufacturer"]?.stringValue == "LENOVO")
        #expect(resourceLogs.scopeLogs.first?.scope.name == "outbox")
        let record = try #require(resourceLogs.scopeLogs.first?.logRecords.first)
        #expect(record.eventName == eventName)
        #expect(record.body.stringValue == eventName)
        #expect(record.severityNumber == .info)
        #expect(record.timeUnixNano == 1_795_000_000_123_000_000, "the corrected event time")
        #expect(record.observedTimeUnixNano == 1_795_000_000_000_000_000, "the capture time")
        let attributes = Self.attributes(record.attributes)
        #expect(attributes["log.record.uid"]?.stringValue.count == 36)
        #expect(attributes["session.id"]?.stringValue == "01a2022c-e40b-7cbe-88f5-28fb0ba84bfc")
        #expect(attributes["user.id"]?.stringValue == "u-1842")
        switch type {
        case "event":
            #expect(attributes["n"]?.intValue == 3)
            #expect(attributes["price"]?.doubleValue == 9.99)
            #expect(attributes["hd"]?.boolValue == true)
            #expect(attributes["at"]?.stringValue == "2026-11-22T07:20:00.000Z")
            #expect(attributes["outbox.category"]?.arrayValue.values.map(\.stringValue) == ["Video", "Music", "Play"])
        case "endSession":
            #expect(attributes["outbox.session.duration_ms"]?.doubleValue == 67770)
        case "screen":
            #expect(attributes["app.screen.name"]?.stringValue == "Player")
            #expect(attributes["outbox.screen.path"]?.stringValue == "/player/42")
            #expect(attributes["outbox.screen.duration_ms"]?.doubleValue == 5250)
            #expect(attributes["source"]?.stringValue == "search")
        case "userProperties":
            #expect(attributes["outbox.user.plan"]?.stringValue == "pro")
            #expect(attributes["outbox.user.seats"]?.intValue == 3)
        case "location":
            #expect(attributes["geo.location.lat"]?.doubleValue == 41.0082)
            #expect(attributes["geo.location.lon"]?.doubleValue == 28.9784)
            #expect(attributes["outbox.location.accuracy_m"]?.doubleValue == 12.5)
        default:
            break
        }
    }

    // SPEC D2: one ResourceLogs per device-context version in a batch, records in their resource, in order.
    @Test func oneResourcePerContextVersion() throws {
        let (log, device) = try Self.stored("event")
        var second = log
        second.seq = 2
        second.context = 2
        var third = log
        third.seq = 3
        let wire = OTLPWire(encoding: .protobuf, installID: UUID())
        let body = wire.encode([log, second, third], contexts: [1: device, 2: device], times: WireTimes(sentAtMs: 0) { $0.wallMs })
        let request = try Opentelemetry_Proto_Collector_Logs_V1_ExportLogsServiceRequest(serializedBytes: body)
        #expect(request.resourceLogs.map { $0.scopeLogs.first?.logRecords.count } == [2, 1])
    }

    // SPEC D5: partial_success read from protobuf and from JSON by the answer's Content-Type; a body that does not parse
    // leaves the status to decide.
    @Test func partialSuccessIsReadInBothEncodings() throws {
        var answer = Opentelemetry_Proto_Collector_Logs_V1_ExportLogsServiceResponse()
        answer.partialSuccess.rejectedLogRecords = 4
        answer.partialSuccess.errorMessage = "4 without a name"
        func response(_ type: String, _ body: [UInt8]) -> TransferResult {
            .response(HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", type)]), body: body,
                                   bodyBytesReceived: body.count, timing: TransferTiming(queued: .zero, connect: .zero, firstByte: .zero, total: .zero),
                                   reusedConnection: false))
        }
        let wire = OTLPWire(encoding: .protobuf, installID: UUID())
        let protobuf: [UInt8] = try answer.serializedBytes()
        #expect(wire.outcome(of: response("application/x-protobuf", protobuf), nowWallMs: 0) == .partiallyRejected(count: 4, message: "4 without a name"))
        #expect(wire.outcome(of: response("application/json", try answer.jsonUTF8Bytes()), nowWallMs: 0) == .partiallyRejected(count: 4, message: "4 without a name"))
        #expect(wire.outcome(of: response("application/x-protobuf", []), nowWallMs: 0) == .delivered)
        #expect(wire.outcome(of: response("application/x-protobuf", Array(protobuf.prefix(3))), nowWallMs: 0) == .delivered)
        #expect(wire.outcome(of: response("application/json", Array("{\"partialSuccess\":".utf8)), nowWallMs: 0) == .delivered)
    }
}
