import FoundationEssentials

/// Segment's HTTP Tracking API and the servers that take it (SPEC D1, D4, D6, D7a): `POST {endpoint}/v1/batch`,
/// HTTP Basic with the write key, `{"batch":[…],"sentAt"}`. Each log is one message: `messageId` its id (Segment
/// drops a resend by it), `anonymousId` the install id, `userId` when one is set, the `context` objects of the
/// device. Segment corrects `timestamp` by `sentAt` on arrival, RudderStack `originalTimestamp`: both are the
/// device's clock (D7a). Profile `rudderstack` also numbers the session as RudderStack's SDKs do.
struct SegmentWire: DeliveryWire {
    var writeKey: String
    var profile: SegmentProfile
    var installID: UUID

    var destination: Destination { .segment }
    static let spec = DestinationSpec(
        destination: .segment, fields: ["writeKey", "segmentProfile"],
        credential: DestinationCredential(field: "writeKey", keyPath: \.writeKey,
                                          missing: "destination segment needs writeKey, the source's write key"),
        headers: ["Content-Type", "Content-Encoding", "Authorization", "Install-ID"],
        makeWire: { configuration, installID in
            SegmentWire(writeKey: configuration.writeKey, profile: configuration.segmentProfile, installID: installID)
        })
    /// SPEC D6: Segment takes 500 KB a request and 32 KB a message.
    var maxRequestBytes: Int? { 500_000 }
    var maxLogBytes: Int? { 32_000 }

    func request(endpoint: String, headers: [HeaderField]) -> DeliveryDriver.RequestSettings {
        let basic = Data((writeKey + ":").utf8).base64EncodedString()
        return DeliveryDriver.RequestSettings(
            url: Self.url(endpoint, "/v1/batch"),
            headers: [("Content-Type", "application/json"), ("Authorization", "Basic " + basic)] + commonHeaders(headers))
    }

    func encode(_ logs: [StoredLog], contexts: [Int64: [UInt8]], times: WireTimes) -> [UInt8] {
        var out = EventJSON(capacity: logs.reduce(512) { $0 + 2 * $1.payload.count + 600 })
        out.json.raw(#"{"batch":["#)
        var device = DeviceProperties(contexts: contexts, installID: installID, style: .segment)
        let install = Array(installID.uuidString.lowercased().utf8)
        out.logs(logs) { log, out in
            message(log, timeMs: times.deviceTimestamp(log), context: device.fragment(log.context), install: install, into: &out)
        }
        out.json.raw(#"],"sentAt":"#)
        out.json.timestamp(ms: times.deviceNowMs)
        out.json.raw("}")
        return out.json.bytes
    }

    /// One log as a Segment message (D4): its properties (or traits) as the payload is read, then what the whole
    /// payload decides (`type`, `event` or `name`, `userId`, `context`).
    private func message(_ log: borrowing StoredLog, timeMs: Int64, context: [UInt8], install: [UInt8], into out: inout EventJSON) {
        out.json.raw(#"{"messageId":""#)
        out.json.id(log.id)
        out.json.raw(profile == .rudderstack ? #"","originalTimestamp":"# : #"","timestamp":"#)
        out.json.timestamp(ms: timeMs)
        out.json.raw(#","anonymousId":"#)
        out.quoted(install)
        var type = LogType.event, name: JSONText?, user: JSONText?, sid: JSONText?
        var latitude: Double?, longitude: Double?
        log.payload.withUnsafeBufferPointer { payload in
            StoredPayload.scan(payload) { field in
                switch field {
                case .type(let value):
                    // Always the first field: the container opens before any member.
                    type = value
                    out.json.raw(type == .userProperties || type == .identify ? #","traits":{"# : #","properties":{"#)
                    out.first = true
                case .id: break     // written from `log.id` ahead of the fields
                case .sid(let value): sid = value
                case .userID(let id): user = id
                case .name(let text): name = text
                case .path(let text): out.member("path"); out.quoted(text)
                case .durationMs(let ms): out.member("durationMs"); out.number(ms)
                case .latitude(let degrees): latitude = degrees
                case .longitude(let degrees): longitude = degrees
                case .accuracy(let metres): out.member("accuracy"); out.number(metres)
                case .property(let key, let value): out.member(key); out.value(value)
                case .categoryStart: out.member("category"); out.json.raw("["); out.first = true
                case .categoryPart(let part): out.element(); out.quoted(part)
                case .categoryEnd: out.json.raw("]"); out.first = false
                }
            }
            out.json.raw("}")
            switch type {
            case .event:
                out.json.raw(#","type":"track","event":"#)
                if let name { out.quoted(name) } else { out.json.raw(#""event""#) }
            case .startSession: out.json.raw(#","type":"track","event":"Session Started""#)
            case .endSession: out.json.raw(#","type":"track","event":"Session Ended""#)
            case .location: out.json.raw(#","type":"track","event":"Location Updated""#)
            case .screen:
                out.json.raw(#","type":"screen","name":"#)
                if let name { out.quoted(name) } else { out.json.raw(#""screen""#) }
            case .userProperties, .identify: out.json.raw(#","type":"identify""#)
            }
            if let user { out.json.raw(#","userId":"#); out.quoted(user) }
            out.json.raw(#","context":{"#)
            out.json.raw(context)
            if let sid { sessionID(sid, start: type == .startSession, into: &out) }
            if let latitude, let longitude {
                out.json.raw(#","location":{"latitude":"#)
                out.number(latitude)
                out.json.raw(#","longitude":"#)
                out.number(longitude)
                out.json.raw("}")
            }
            out.json.raw("}}")
        }
    }

    /// `context.sessionId`: the session's id; on RudderStack's profile the session's start in ms since 1970 (the
    /// first 48 bits of its UUIDv7) as a number, with `sessionStart: true` on the session's first message.
    private func sessionID(_ sid: JSONText, start: Bool, into out: inout EventJSON) {
        guard profile == .rudderstack else {
            out.json.raw(#","sessionId":"#)
            out.quoted(sid)
            return
        }
        let ms = UUIDBytes(utf8: sid.raw).map { Int64($0.high >> 16) } ?? 0
        out.json.raw(#","sessionId":"#)
        out.json.int(ms)
        if start { out.json.raw(#","sessionStart":true"#) }
    }
}

/// How Segment-compatible messages are written (SPEC D1, D4): `segment` (the default) or `rudderstack`.
public enum SegmentProfile: String, Sendable, Equatable, CaseIterable {
    case segment
    case rudderstack

    /// `segment` or `rudderstack`; anything else is refused naming both.
    public init(name: String) throws(OutboxError) {
        guard let profile = SegmentProfile(rawValue: name) else {
            throw .invalidConfiguration("segmentProfile must be segment or rudderstack, got '\(name)'")
        }
        self = profile
    }
}
