/// The log types of the wire format (SPEC W2). Each log's payload starts `{"type":T,"id":"…"` followed by the
/// stamp of its session and user (SPEC T7) and the type's own fields.
enum LogType: String, Sendable, CaseIterable {
    case event
    case startSession
    case endSession
    case screen
    case userProperties
    case location
    /// SPEC A8a: the user signed in (`identify`); App Center's wire sends it as a `userProperties` log.
    case identify

    /// `{"type":"event","id":"` — the payload up to the id. Static bytes, nothing to retain: callers' threads build
    /// payloads too (`CallerPayloads`).
    var payloadPrefix: UnsafeBufferPointer<UInt8> {
        let text: StaticString = switch self {
        case .event: #"{"type":"event","id":""#
        case .startSession: #"{"type":"startSession","id":""#
        case .endSession: #"{"type":"endSession","id":""#
        case .screen: #"{"type":"screen","id":""#
        case .userProperties: #"{"type":"userProperties","id":""#
        case .location: #"{"type":"location","id":""#
        case .identify: #"{"type":"identify","id":""#
        }
        return UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
    }
}

/// The session and user fields every log carries (SPEC T7): `,"sid":"…"` or `,"sid":null`, then `,"userId":"…"`
/// when a user id is set. Computed when either changes, appended as is to every log.
enum Stamp {
    static func bytes(sid: UUIDBytes?, userID: String?) -> [UInt8] {
        var writer = JSONWriter(capacity: 64 + (userID?.utf8.count ?? 0))
        if let sid {
            writer.raw(",\"sid\":\"")
            writer.id(sid)
            writer.raw(UInt8(ascii: "\""))
        } else {
            writer.raw(",\"sid\":null")
        }
        if let userID {
            writer.raw(",\"userId\":")
            writer.string(userID)
        }
        return writer.bytes
    }
}
