import Foundation
import Testing
@testable import Outbox

/// A stored payload read in place for the destinations (SPEC D4, D10): a typed property written exactly as the engine
/// writes it takes a byte-compared fast path; written any other way it is read member by member. Both must hand the
/// wire the same fields.
@Suite("Stored payloads read in place (SPEC D10)")
struct StoredPayloadTests {
    /// What `scan` hands on, as text (the fields these payloads carry).
    private static func fields(_ payload: String) -> [String] {
        var out: [String] = []
        Array(payload.utf8).withUnsafeBufferPointer { buffer in
            StoredPayload.scan(buffer) { field in
                switch field {
                case .type(let type): out.append("type \(type)")
                case .id(let id): out.append("id \(id.string)")
                case .name(let name): out.append("name \(name.string)")
                case .property(let key, let value):
                    let text = switch value {
                    case .text(let text): "text \(text.string)"
                    case .int(let number): "int \(number)"
                    case .double(let number): "double \(number)"
                    case .bool(let flag): "bool \(flag)"
                    }
                    out.append("property \(key.string) \(text)")
                default: out.append("other")
                }
            }
        }
        return out
    }

    private static let expected = [
        "type event", "id 01a2022c-e40b-7cbe-88f5-28fb0ba84bfc", "name play",
        "property at text 2026-11-22T07:20:00.000Z", "property hd bool true", "property n int 3",
        "property price double 9.99", "property q\"uote text a\\b", "property whole double 3.0",
    ]

    @Test func theEnginesOwnPayloadAndAnyOtherSpellingGiveTheSameFields() throws {
        // The engine's writer: `{"type":…,"name":…,"value":…}` per entry.
        let body = try EventValidator.validate(name: "play", properties: [
            "at": .date(Date(timeIntervalSince1970: 1_795_332_000)), "hd": true, "n": 3, "price": 9.99,
            "q\"uote": "a\\b", "whole": .double(3),
        ]).body
        let engine = #"{"type":"event","id":"01a2022c-e40b-7cbe-88f5-28fb0ba84bfc","# + String(decoding: body, as: UTF8.self) + "}"
        #expect(engine.contains(#"{"type":"long","name":"n","value":3}"#), "the layout the fast path compares against")
        #expect(Self.fields(engine) == Self.expected)

        // The same entries with their members reordered and spaced: read member by member, to the same fields.
        let other = #"{ "type" : "event", "id":"01a2022c-e40b-7cbe-88f5-28fb0ba84bfc", "name":"play", "typedProperties": ["#
            + #"{"name":"at","value":"2026-11-22T07:20:00.000Z","type":"dateTime"}, {"value":true,"type":"boolean","name":"hd"},"#
            + #"{ "type":"long","name":"n","value":3 },{"type":"double","value":9.99,"name":"price"},"#
            + #"{"type":"string","name":"q\"uote","value":"a\\b"},{"type":"double","name":"whole","value":3}] }"#
        #expect(Self.fields(other) == Self.expected)
    }

    @Test func anEntryThatBreaksOffTheFastPathHalfwayIsReadFromItsStart() {
        // `long` with a text value: the fast path gives up at the value, and the entry is read again as it stands.
        let payload = #"{"type":"event","id":"01a2022c-e40b-7cbe-88f5-28fb0ba84bfc","typedProperties":["#
            + #"{"type":"long","name":"n","value":"x"},{"type":"boolean","name":"b","value":false,"extra":1}]}"#
        #expect(Self.fields(payload) == ["type event", "id 01a2022c-e40b-7cbe-88f5-28fb0ba84bfc",
                                         "property n text x", "property b bool false"])
    }
}
