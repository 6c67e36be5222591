import FoundationEssentials
import Testing
@_spi(CInterface) @testable import Outbox

private func replacement(_ text: String) throws -> OutgoingEvent {
    try Array(text.utf8).withUnsafeBufferPointer { try OutgoingEvent(replacementJSON: $0) }
}

private func refusal(_ text: String) -> String? {
    do {
        _ = try replacement(text)
        return nil
    } catch {
        return "\(error)"
    }
}

/// The C interface's forms of an event for the before-store hook (SPEC H1): what the host's function receives, and
/// how its replacement is read — as `outbox_track` reads its arguments.
@Suite("Before-store hook: the event's JSON forms (SPEC H1)")
struct BeforeStoreHookTests {
    @Test func theHookReceivesNameAndPropertiesInKeyOrder() {
        let event = OutgoingEvent(name: "sign\"up", properties: ["z": 1, "a": "x\ny", "m": 2.5, "b": true])
        let json = event.cJSON
        #expect(json.last == 0)
        #expect(String(decoding: json.dropLast(), as: UTF8.self)
                == #"{"name":"sign\"up","properties":{"a":"x\ny","b":true,"m":2.5,"z":1}}"#)
        #expect(String(decoding: OutgoingEvent(name: "e").cJSON.dropLast(), as: UTF8.self) == #"{"name":"e","properties":{}}"#)
    }

    @Test func aReplacementReadsBackAsTheEventItDescribes() throws {
        let event = OutgoingEvent(name: "é\"v", properties: ["s": "t\u{1F600}", "i": -3, "d": 0.5, "f": false])
        let text = String(decoding: event.cJSON.dropLast(), as: UTF8.self)
        #expect(try replacement(text) == event)
        #expect(try replacement(#" {"properties":null,"name":"n"} "#) == OutgoingEvent(name: "n"))
        #expect(try replacement(#"{"name":"n"}"#) == OutgoingEvent(name: "n"))
        // An empty name reads; T2 refuses it afterwards, as any event's.
        #expect(try replacement(#"{"name":""}"#) == OutgoingEvent(name: ""))
    }

    @Test(arguments: [
        (#"[]"#, "expected an object"),
        (#"{"properties":{}}"#, "no \"name\""),
        (#"{"name":1}"#, "'name' must be a string"),
        (#"{"name":"a","name":"b"}"#, "'name' appears twice"),
        (#"{"name":"a","properties":{},"properties":{}}"#, "'properties' appears twice"),
        (#"{"name":"a","properties":{"k":1,"k":2}}"#, "property 'k' appears twice"),
        (#"{"name":"a","properties":{"k":{"x":1}}}"#, "not nested"),
        (#"{"name":"a","properties":{"k":null}}"#, "null is not a property value"),
        (#"{"name":"a","properties":[1]}"#, "expected"),
        (#"{"name":"a","flags":1}"#, "unknown key 'flags'"),
        (#"{"name":"a"} x"#, "after the object"),
        (#"{"name":"a""#, "expected"),
        ("{\"name\":\"\u{7}\"}", "control"),
    ])
    func aReplacementThatDoesNotReadIsRefusedNamingWhy(text: String, reason: String) {
        let message = refusal(text)
        #expect(message?.contains(reason) == true, "\(text): \(message ?? "accepted")")
        #expect(message?.contains("before-store hook") == true)
    }

    @Test func invalidUTF8IsRefused() {
        let bytes: [UInt8] = Array(#"{"name":""#.utf8) + [0xFF, 0xFE] + Array(#""}"#.utf8)
        #expect(throws: OutboxError.self) {
            try bytes.withUnsafeBufferPointer { _ = try OutgoingEvent(replacementJSON: $0) }
        }
    }

    // SPEC H1: the call's own refusals, before the hook; the first refused key in key order is named.
    @Test func theCallsOwnRefusals() {
        #expect(throws: OutboxError.emptyEventName) { try OutgoingEvent(name: "").checkRefusals() }
        #expect(throws: OutboxError.invalidPropertyValue(key: "b", reason: "NaN is not a number JSON can carry")) {
            try OutgoingEvent(name: "e", properties: ["c": .double(.infinity), "b": .double(.nan), "a": 1]).checkRefusals()
        }
        #expect(throws: OutboxError.self) {
            try OutgoingEvent(name: "e", properties: ["d": .date(Date(timeIntervalSince1970: -1e12))]).checkRefusals()
        }
        #expect(throws: Never.self) {
            try OutgoingEvent(name: String(repeating: "n", count: 400), properties: ["k": .string(String(repeating: "v", count: 400))]).checkRefusals()
        }
    }
}
