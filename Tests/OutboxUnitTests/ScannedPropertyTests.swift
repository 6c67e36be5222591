import Foundation
import Testing
@_spi(CInterface) @testable import Outbox

/// What one event stores, or why it was refused.
private struct Stored: Equatable {
    var body: [UInt8]
    var adjustments: EventValidator.Adjustments
}

private func outcome(_ run: () throws(OutboxError) -> Stored) -> Result<Stored, OutboxError> {
    do throws(OutboxError) { return .success(try run()) } catch { return .failure(error) }
}

/// The event as `outbox_track` stores it when every string value stays in the caller's bytes (`.utf8`, its fast
/// path), as it does when each is a `String` (`.value(.string)`: its path for escaped strings), and as Swift's
/// `trackEvent` does from a dictionary.
private func storedThreeWays(_ name: String, _ properties: [String: PropertyValue])
    -> (fast: Result<Stored, OutboxError>, slow: Result<Stored, OutboxError>, swift: Result<Stored, OutboxError>) {
    let sorted = properties.sorted { $0.key < $1.key }
    // Every string value's bytes in one array, alive for the whole call, as the caller's JSON text is.
    var text: [UInt8] = []
    var spans: [Range<Int>?] = []
    for (_, value) in sorted {
        guard case .string(let string) = value else { spans.append(nil); continue }
        let start = text.count
        text.append(contentsOf: string.utf8)
        spans.append(start..<text.count)
    }
    let fast = text.withUnsafeBufferPointer { bytes in
        let scanned: [(key: String, value: ScannedPropertyValue)] = zip(sorted, spans).map { pair, span in
            guard let span else { return (pair.key, .value(pair.value)) }
            return (pair.key, .utf8(UnsafeBufferPointer(rebasing: bytes[span])))
        }
        return scanned.withUnsafeBufferPointer { buffer in
            outcome { () throws(OutboxError) -> Stored in
                try EventValidator.validate(name: name, sortedProperties: buffer) { _, body, adjustments in
                    Stored(body: Array(body), adjustments: adjustments)
                }
            }
        }
    }
    let strings: [(key: String, value: ScannedPropertyValue)] = sorted.map { ($0.key, .value($0.value)) }
    let slow = strings.withUnsafeBufferPointer { buffer in
        outcome { () throws(OutboxError) -> Stored in
            try EventValidator.validate(name: name, sortedProperties: buffer) { _, body, adjustments in
                Stored(body: Array(body), adjustments: adjustments)
            }
        }
    }
    let swift = outcome { () throws(OutboxError) -> Stored in
        let result = try EventValidator.validate(name: name, properties: properties)
        return Stored(body: result.body, adjustments: result.adjustments)
    }
    return (fast, slow, swift)
}

@Suite("String values from the caller's bytes (SPEC E2, T3)")
struct ScannedPropertyTests {
    private static let cluster = "👨‍👩‍👧"

    /// String values around T3's limit of 125 characters, in bytes and in characters, and with what JSON escapes.
    static let values: [String] = [
        "", "plain", "sku-A1 2026", "q\"b\\s/", "line\nbreak\ttab\r", "\u{01}\u{1F}\u{7F}", "héllo wörld", "日本語のテキスト",
        "e\u{301}", "😀👍🏽", cluster,
        String(repeating: "a", count: 124), String(repeating: "a", count: 125), String(repeating: "a", count: 126),
        String(repeating: "a", count: 300),
        // Over 125 bytes, within 125 characters: stored whole.
        String(repeating: "é", count: 125), String(repeating: "日", count: 100),
        // Over 125 characters: cut at a character boundary, never inside a multi-byte character or a cluster.
        String(repeating: "é", count: 126), String(repeating: "a", count: 124) + cluster + "b",
        String(repeating: "a", count: 123) + "e\u{301}\u{302}" + "tail", String(repeating: "\"", count: 130),
        String(repeating: "a", count: 125) + "\u{301}",
    ]

    // SPEC E2, T3: a string value stored straight from the caller's bytes is stored byte for byte as its String
    // would be: the same escapes, the same truncation at a character boundary, the same warning.
    @Test(arguments: values)
    func aStringValueIsStoredAsItsString(value: String) {
        let stored = storedThreeWays("e", ["k": .string(value)])
        #expect(stored.fast == stored.slow)
        #expect(stored.fast == stored.swift)
        guard case .success(let result) = stored.fast else { Issue.record("refused"); return }
        #expect(result.adjustments.truncatedValues == (value.count > 125 ? ["k"] : []))
    }

    // SPEC E2, T3: mixed with numbers and booleans, over 20 properties, with keys cut and colliding, and a category.
    @Test func mixedEventsAreStoredTheSameWay() {
        let longKey = String(repeating: "k", count: 130)
        var properties: [String: PropertyValue] = [
            "int": 42, "negative": .int(.min), "double": 2.5, "whole": 3.0, "tiny": 1e-300, "yes": true, "no": false,
            longKey: .string(Self.values[13]), String(repeating: "k", count: 125) + "zz": "collides",
            "date": .date(Date(timeIntervalSince1970: 1_700_000_000.123)),
        ]
        for (index, value) in Self.values.enumerated() { properties["s\(index)"] = .string(value) }
        let stored = storedThreeWays("Shop>Cart>Add\u{01}", properties)
        #expect(stored.fast == stored.slow)
        #expect(stored.fast == stored.swift)
        guard case .success(let result) = stored.fast else { Issue.record("refused"); return }
        #expect(result.adjustments.droppedKeys.count == properties.count - 20 + 1)
        #expect(result.adjustments.truncatedKeys == [longKey, String(repeating: "k", count: 125) + "zz"])
    }

    // SPEC T3: a non-finite number refuses the event with the same error whichever way its strings arrive.
    @Test func aRefusedEventIsRefusedTheSameWay() {
        let stored = storedThreeWays("e", ["a": "text", "b": .double(.nan), "c": .string(Self.values[14])])
        #expect(stored.fast == .failure(.invalidPropertyValue(key: "b", reason: "NaN is not a number JSON can carry")))
        #expect(stored.fast == stored.slow)
        #expect(stored.fast == stored.swift)
    }
}
