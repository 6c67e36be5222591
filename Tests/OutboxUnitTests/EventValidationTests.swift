import Foundation
import Testing
@testable import Outbox

private func decode(_ result: EventValidator.Result) -> [String: Any] {
    let json = "{" + String(decoding: result.body, as: UTF8.self) + "}"
    return (try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]) ?? [:]
}

private func typed(_ result: EventValidator.Result) -> [[String: Any]] {
    decode(result)["typedProperties"] as? [[String: Any]] ?? []
}

@Suite("Event validation (SPEC T2, T3)")
struct EventValidationTests {
    // SPEC T2
    @Test func emptyNameIsRejectedWithAClearError() {
        #expect(throws: OutboxError.emptyEventName) { try EventValidator.validate(name: "", properties: [:]) }
        #expect(OutboxError.emptyEventName.description.contains("event name is empty"))
    }

    // SPEC T2
    @Test(arguments: [1, 255, 256]) func namesUpTo256CharactersAreKeptWhole(length: Int) throws {
        let name = String(repeating: "n", count: length)
        let result = try EventValidator.validate(name: name, properties: [:])
        #expect(result.name == name)
        #expect(decode(result)["name"] as? String == name)
        #expect(!result.adjustments.nameTruncated)
    }

    // SPEC T2
    @Test func aNameOver256CharactersIsTruncatedWithAWarning() throws {
        let result = try EventValidator.validate(name: String(repeating: "é", count: 257), properties: [:])
        #expect(result.name.count == 256)
        #expect(result.adjustments.nameTruncated)
    }

    // SPEC T3
    @Test(arguments: [19, 20, 21, 30]) func atMost20PropertiesKeepingTheFirstInKeyOrder(count: Int) throws {
        var properties: [String: PropertyValue] = [:]
        for index in 0..<count { properties[String(format: "k%02d", index)] = .int(Int64(index)) }
        let result = try EventValidator.validate(name: "e", properties: properties)
        let names = typed(result).compactMap { $0["name"] as? String }
        #expect(names == (0..<min(count, 20)).map { String(format: "k%02d", $0) })
        #expect(result.adjustments.droppedKeys.count == max(0, count - 20))
    }

    // SPEC T3
    @Test(arguments: [124, 125, 126]) func keysAndStringValuesAreTruncatedTo125(length: Int) throws {
        let key = String(repeating: "k", count: length)
        let value = String(repeating: "v", count: length)
        let result = try EventValidator.validate(name: "e", properties: [key: .string(value)])
        let property = try #require(typed(result).first)
        #expect((property["name"] as? String)?.count == min(length, 125))
        #expect((property["value"] as? String)?.count == min(length, 125))
        #expect(result.adjustments.truncatedKeys.isEmpty == (length <= 125))
        #expect(result.adjustments.truncatedValues.isEmpty == (length <= 125))
    }

    // SPEC T3: keys equal after truncation keep the first in key order.
    @Test func keysThatCollideAfterTruncationKeepTheFirst() throws {
        let a = String(repeating: "k", count: 130), b = String(repeating: "k", count: 125) + "zzzzz"
        let result = try EventValidator.validate(name: "e", properties: [a: 1, b: 2, "x": 3])
        let names = typed(result).compactMap { $0["name"] as? String }
        #expect(names == [String(repeating: "k", count: 125), "x"])
        #expect(result.adjustments.droppedKeys == [b])
    }

    // SPEC T3
    @Test(arguments: [Double.nan, .infinity, -.infinity]) func nonFiniteNumbersAreRejected(value: Double) {
        #expect(throws: OutboxError.self) { try EventValidator.validate(name: "e", properties: ["x": .double(value)]) }
        do {
            _ = try EventValidator.validate(name: "e", properties: ["x": .double(value)])
        } catch {
            #expect(error == .invalidPropertyValue(key: "x", reason: value.isNaN ? "NaN is not a number JSON can carry" : "infinity is not allowed"))
        }
    }

    // SPEC T3: a date property is an ISO 8601 dateTime with a four-digit year. One outside 0001–9999, or built from
    // a NaN or infinite interval, is refused with a named error (it used to trap in the integer conversion or the
    // digit writer and crash the host); the edges themselves are written exactly.
    @Test(arguments: [-62_135_596_800.001, 253_402_300_800.0, 1e20, -1e20, .nan, .infinity, -.infinity])
    func datesOutsideTheYears1To9999AreRejected(seconds: Double) {
        do {
            _ = try EventValidator.validate(name: "e", properties: ["when": .date(Date(timeIntervalSince1970: seconds))])
            Issue.record("a date \(seconds) s from 1970 was accepted")
        } catch {
            #expect(error == .invalidPropertyValue(key: "when", reason: "a date must lie in the years 0001–9999 (ISO 8601 dateTime)"))
        }
    }

    @Test(arguments: [(-62_135_596_800.0, "0001-01-01T00:00:00.000Z"), (253_402_300_799.999, "9999-12-31T23:59:59.999Z"),
                      (-1.5, "1969-12-31T23:59:58.500Z")])
    func datesAtTheEdgesAreWritten(seconds: Double, expected: String) throws {
        let result = try EventValidator.validate(name: "e", properties: ["when": .date(Date(timeIntervalSince1970: seconds))])
        #expect(typed(result).first?["value"] as? String == expected)
    }

    // SPEC T3: typed values keep their type on the wire.
    @Test func valuesAreTyped() throws {
        let date = Date(timeIntervalSince1970: 1_700_000_000.123)
        let result = try EventValidator.validate(name: "e", properties: [
            "a": "text", "b": 42, "c": 2.5, "d": true, "e": .date(date), "f": 3.0,
        ])
        let byName = Dictionary(uniqueKeysWithValues: typed(result).map { ($0["name"] as? String ?? "", $0) })
        #expect(byName["a"]?["type"] as? String == "string")
        #expect(byName["b"]?["type"] as? String == "long")
        #expect(byName["b"]?["value"] as? Int == 42)
        #expect(byName["c"]?["type"] as? String == "double")
        #expect(byName["c"]?["value"] as? Double == 2.5)
        #expect(byName["d"]?["type"] as? String == "boolean")
        #expect(byName["d"]?["value"] as? Bool == true)
        #expect(byName["e"]?["type"] as? String == "dateTime")
        #expect(byName["e"]?["value"] as? String == "2023-11-14T22:13:20.123Z")
        #expect(String(decoding: result.body, as: UTF8.self).contains(#""name":"f","value":3.0"#))
    }

    // SPEC A7: a categorised name is kept whole and also sent as its category path.
    @Test func categorisedNamesCarryTheirPath() throws {
        let object = decode(try EventValidator.validate(name: "Shop>Cart>Add", properties: [:]))
        #expect(object["name"] as? String == "Shop>Cart>Add")
        #expect(object["category"] as? [String] == ["Shop", "Cart", "Add"])
        #expect(decode(try EventValidator.validate(name: "a>>b", properties: [:]))["category"] == nil)
    }

    // W2: an event whose escapes make it longer than the buffer sized for it (on the stack) is written whole.
    @Test func anEventLongerThanItsBufferIsWrittenWhole() throws {
        let controls = String(repeating: "\u{01}\"\\", count: 40)
        let properties: [String: PropertyValue] = ["a": .string(controls), "b\u{02}": .string(controls), "c": 1]
        let result = try EventValidator.validate(name: "e\u{03}", properties: properties)
        let object = decode(result)
        #expect(object["name"] as? String == "e\u{03}")
        #expect(typed(result).map { $0["name"] as? String } == ["a", "b\u{02}", "c"])
        #expect(typed(result).prefix(2).allSatisfy { $0["value"] as? String == controls })
    }

    // W2: strings are escaped so that any name stays valid JSON.
    @Test func controlCharactersAndQuotesAreEscaped() throws {
        let name = "q\"b\\s\n\t\u{01}ü😀"
        let object = decode(try EventValidator.validate(name: name, properties: ["k": .string(name)]))
        #expect(object["name"] as? String == name)
    }
}

@Suite("Wire primitives")
struct WirePrimitiveTests {
    // SPEC W2: ISO-8601 UTC with milliseconds.
    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00.000Z"),
        (Int64(951_782_400_999), "2000-02-29T00:00:00.999Z"),
        (Int64(1_795_332_826_123), "2026-11-22T07:33:46.123Z"),
        (Int64(-1), "1969-12-31T23:59:59.999Z"),
    ]) func timestampsAreISO8601WithMilliseconds(ms: Int64, expected: String) {
        #expect(Timestamp.string(ms: ms) == expected)
    }

    @Test func timestampsAgreeWithFoundationOverManyDays() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        var generator = IDGenerator(seed: 7)
        for _ in 0..<2000 {
            let ms = Int64(generator.next() % 8_000_000_000_000) - 1_000_000_000_000
            let ours = Timestamp.string(ms: ms)
            #expect(formatter.date(from: ours).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) } == ms)
        }
    }

    // SPEC T7: ids are version-4 UUIDs, unique, and round-trip through their text form.
    @Test func idsAreUniqueVersion4UUIDs() throws {
        var generator = IDGenerator()
        var seen = Set<UUIDBytes>()
        for _ in 0..<100_000 {
            let id = generator.uuid()
            #expect(seen.insert(id).inserted)
        }
        let id = generator.uuid()
        let text = id.string
        #expect(UUID(uuidString: text) != nil)
        #expect(Array(text)[14] == "4")
        #expect("89ab".contains(Array(text)[19]))
        #expect(UUIDBytes(string: text) == id)
        #expect(UUIDBytes(string: "not-a-uuid") == nil)
    }

    // SPEC T7, W1: the text form is the canonical lower-case 8-4-4-4-12 one, byte for byte as Foundation writes it,
    // appended after what the buffer already holds.
    @Test func idsAreWrittenInTheCanonicalForm() {
        var bytes = Array("x".utf8)
        UUIDBytes(high: 0x0011_2233_4455_6677, low: 0x8899_AABB_CCDD_EEFF).write(into: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == "x00112233-4455-6677-8899-aabbccddeeff")
        var generator = IDGenerator()
        for _ in 0..<1000 {
            let id = generator.uuid()
            let foundation = UUID(uuid: withUnsafeBytes(of: (id.high.bigEndian, id.low.bigEndian)) { raw in
                raw.load(as: uuid_t.self)
            })
            #expect(id.string == foundation.uuidString.lowercased())
        }
    }

    @Test(arguments: [Int64.min, -1, 0, 7, Int64.max]) func integersAreWrittenExactly(value: Int64) {
        var writer = JSONWriter()
        writer.int(value)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == String(value))
    }
}
