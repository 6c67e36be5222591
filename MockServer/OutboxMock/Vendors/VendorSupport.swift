import Foundation

// What the vendors' decoders share: JSON access on the tape, form and query fields, base64, and the
// timestamp formats their events carry.

/// Runs `body` on the parsed JSON document in `bytes`; a parse error is returned as its message.
func withJSON<T>(_ bytes: UnsafeBufferPointer<UInt8>, _ body: (JSONView) -> T) -> Result<T, JSONParseError> {
    do throws(JSONParseError) {
        let tape = try JSONTape.parse(bytes)
        return .success(body(JSONView(bytes: bytes, tape: tape)))
    } catch {
        return .failure(error)
    }
}

func withJSON<T>(_ bytes: [UInt8], _ body: (JSONView) -> T) -> Result<T, JSONParseError> {
    bytes.withUnsafeBufferPointer { withJSON($0, body) }
}

extension JSONParseError {
    /// `not valid JSON: … at byte N`
    var reason: String { "not valid JSON: \(message) at byte \(offset)" }
}

extension JSONView {
    /// The value of `key` in the object at `index`, nil when absent (or when `index` is not an object).
    func member(_ index: Int, _ key: StaticString) -> Int? {
        guard tape[index].kind == .object else { return nil }
        var found: Int?
        forEachMember(of: index) { k, v in
            if found == nil, equals(k, key) { found = v }
        }
        return found
    }

    /// The string at `member` of the object at `index`; nil when absent, null or not a string.
    func stringMember(_ index: Int, _ key: StaticString) -> String? {
        guard let v = member(index, key), tape[v].kind == .string else { return nil }
        return string(v)
    }

    /// Whether the value is present and not null.
    func isPresent(_ index: Int?) -> Bool {
        guard let index else { return false }
        return tape[index].kind != .null
    }

    /// The value at `index` on one line.
    func minified(_ index: Int) -> [UInt8] {
        var out: [UInt8] = []
        appendMinified(index, to: &out)
        return out
    }

    /// The length in bytes of the value at `index` as received.
    func byteLength(_ index: Int) -> Int {
        let t = tape[index]
        return t.kind == .string ? Int(t.end - t.start) + 2 : Int(t.end - t.start)
    }

    /// A short description of the kind, for reasons (`must be a string, got number`).
    func kindName(_ index: Int) -> String {
        switch tape[index].kind {
        case .object: "object"
        case .array: "array"
        case .string: "string"
        case .number: "number"
        case .trueValue, .falseValue: "boolean"
        case .null: "null"
        }
    }
}

/// `application/x-www-form-urlencoded` fields and URL queries: `a=1&b=x+y%21`.
enum FormFields {
    static func parse(_ bytes: [UInt8]) -> [(String, String)] {
        var out: [(String, String)] = []
        for pair in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let eq = pair.firstIndex(of: UInt8(ascii: "="))
            let name = decode(eq.map { pair[pair.startIndex..<$0] } ?? pair[...])
            let value = eq.map { decode(pair[pair.index(after: $0)...]) } ?? []
            out.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        }
        return out
    }

    /// The raw bytes of a field's value, decoded (for a `data=` field that holds JSON or base64).
    static func value(_ bytes: [UInt8], _ name: String) -> [UInt8]? {
        let key = Array(name.utf8)
        for pair in bytes.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            guard let eq = pair.firstIndex(of: UInt8(ascii: "=")), decode(pair[pair.startIndex..<eq]) == key
            else { continue }
            return decode(pair[pair.index(after: eq)...])
        }
        return nil
    }

    static func decode(_ s: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(s.count)
        var i = s.startIndex
        while i < s.endIndex {
            let b = s[i]
            if b == UInt8(ascii: "+") {
                out.append(0x20)
            } else if b == UInt8(ascii: "%"), i + 2 < s.endIndex, let h = hex(s[i + 1]), let l = hex(s[i + 2]) {
                out.append(h << 4 | l)
                i += 2
            } else {
                out.append(b)
            }
            i += 1
        }
        return out
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Base64 in both alphabets (standard and URL-safe, as Snowplow's `ue_px` and `cx` use), padding optional.
enum Base64 {
    static func decode(_ bytes: [UInt8]) -> [UInt8]? {
        var text = bytes.map { b -> UInt8 in
            switch b {
            case UInt8(ascii: "-"): UInt8(ascii: "+")
            case UInt8(ascii: "_"): UInt8(ascii: "/")
            default: b
            }
        }
        while text.last == UInt8(ascii: "=") { text.removeLast() }
        guard !text.isEmpty else { return nil }
        text.append(contentsOf: repeatElement(UInt8(ascii: "="), count: (4 - text.count % 4) % 4))
        return Data(base64Encoded: Data(text)).map { Array($0) }
    }
}

/// The timestamp formats the vendors' events carry. Public for `outbox fleet`, which reads `/_mock/logs`.
public enum VendorTime {
    /// ISO 8601 / RFC 3339 date-time with any fraction and `Z` or an offset (`2026-11-22T07:05:21.303+00:00`),
    /// as Segment and PostHog send it; epoch ms, nil when it is not one.
    public static func iso8601Ms(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { iso8601Ms($0) }
    }

    static func iso8601Ms(_ b: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
              b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: " "),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":")
        else { return nil }
        func digits(_ from: Int, _ n: Int) -> Int? {
            guard from + n <= b.count else { return nil }
            var v = 0
            for i in from..<(from + n) {
                let d = b[i] &- UInt8(ascii: "0")
                guard d < 10 else { return nil }
                v = v * 10 + Int(d)
            }
            return v
        }
        guard let year = digits(0, 4), let month = digits(5, 2), let day = digits(8, 2),
              let hour = digits(11, 2), let minute = digits(14, 2), let second = digits(17, 2),
              (1...12).contains(month), day >= 1, day <= ISOTimestamp.daysIn(month: month, year: year),
              hour < 24, minute < 60, second < 61
        else { return nil }
        var i = 19
        var millis = 0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 100
            let start = i
            while i < b.count, b[i] &- UInt8(ascii: "0") < 10 {
                millis += Int(b[i] - UInt8(ascii: "0")) * scale
                scale /= 10
                i += 1
            }
            guard i > start else { return nil }
        }
        var offsetMinutes = 0
        guard i < b.count else { return nil }
        switch b[i] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            i += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign = b[i] == UInt8(ascii: "-") ? -1 : 1
            guard let h = digits(i + 1, 2) else { return nil }
            var j = i + 3
            if j < b.count, b[j] == UInt8(ascii: ":") { j += 1 }
            guard let m = digits(j, 2), h < 24, m < 60 else { return nil }
            offsetMinutes = sign * (h * 60 + m)
            i = j + 2
        default:
            return nil
        }
        guard i == b.count else { return nil }
        let days = ISOTimestamp.daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetMinutes * 60)
        return seconds * 1000 + Int64(millis)
    }

    /// Epoch ms written as a decimal string (Snowplow's `dtm`, `stm`, `ttm`).
    static func decimalMs(_ text: String) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 &- UInt8(ascii: "0") < 10 }) else { return nil }
        return Int64(text)
    }
}
