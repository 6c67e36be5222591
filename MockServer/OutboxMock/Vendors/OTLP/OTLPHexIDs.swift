/// OTLP/JSON writes trace and span ids as hex strings (the OTLP specification, "JSON Protobuf Encoding"), where
/// proto3's JSON mapping, and so swift-protobuf, reads and writes every `bytes` field as base64. These rewrites
/// swap the one for the other on the JSON text itself, so that swift-protobuf does all the rest of the decoding.
///
/// An id key is an object key named `traceId`, `spanId` or `parentSpanId` (or their proto names, which
/// swift-protobuf also accepts). OTLP/JSON has no free-form object keys (attributes are `{"key": …, "value": …}`
/// pairs), so any object key with one of those names is an id field: of a span, a span link, a log record or an
/// exemplar.
enum OTLPHexIDs {
    /// Rewrites every id from hex to base64 so that swift-protobuf can decode the body. A value that is not hex
    /// (odd length, another character) is an error, as in the collector's own JSON decoder; a value of the wrong
    /// length is left to the per-record validation, which refuses that record alone.
    static func hexToBase64(_ json: [UInt8]) throws(OTLPError) -> [UInt8] {
        try rewrite(json) { (key, value) throws(OTLPError) -> [UInt8] in
            guard let bytes = hexDecode(value) else {
                let shown = String(decoding: value.prefix(64), as: UTF8.self)
                throw .malformedBody("\(String(decoding: key, as: UTF8.self)) \"\(shown)\" is not hex, "
                                     + "which OTLP/JSON requires for trace and span ids")
            }
            return base64Encode(bytes)
        }
    }

    /// Rewrites every id of swift-protobuf's JSON output from base64 back to hex, so that what `/_mock/logs` shows
    /// is OTLP/JSON. Values that are not base64 are kept as they are.
    static func base64ToHex(_ json: String) -> String {
        let bytes = Array(json.utf8)
        let out = (try? rewrite(bytes) { (_, value) throws(OTLPError) -> [UInt8] in
            guard let decoded = base64Decode(value) else { return Array(value) }
            return Array(hex(decoded).utf8)
        }) ?? bytes
        return String(decoding: out, as: UTF8.self)
    }

    /// Lower-case hex of `bytes`: the form OTLP/JSON and the de-duplication keys use.
    static func hex<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(hexDigits[Int(b >> 4)])
            out.append(hexDigits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: - The scanner

    private static let idKeys: [[UInt8]] = ["traceId", "spanId", "parentSpanId", "trace_id", "span_id",
                                            "parent_span_id"].map { Array($0.utf8) }
    private static let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\"), colon = UInt8(ascii: ":")

    /// One pass over the text: every string is skipped whole (so quotes and keys inside values never match), and
    /// a string that is an id key followed by a string value has that value replaced by `transform`'s. Text it
    /// cannot follow (an unterminated string) is copied unchanged, for the JSON decoder to reject with its reason.
    private static func rewrite(_ json: [UInt8],
                                _ transform: (ArraySlice<UInt8>, ArraySlice<UInt8>) throws(OTLPError) -> [UInt8])
        throws(OTLPError) -> [UInt8] {
        let n = json.count
        var out = [UInt8]()
        var copied = 0
        var i = 0
        while i < n {
            guard json[i] == quote else { i += 1; continue }
            let keyStart = i + 1
            guard let keyEnd = endOfString(json, from: keyStart) else { break }
            i = keyEnd + 1
            var j = skipSpace(json, from: i)
            guard j < n, json[j] == colon else { continue }
            let key = json[keyStart..<keyEnd]
            guard idKeys.contains(where: { $0.elementsEqual(key) }) else { continue }
            j = skipSpace(json, from: j + 1)
            guard j < n, json[j] == quote else { continue }  // null or a number: the decoder says what is wrong
            let valueStart = j + 1
            guard let valueEnd = endOfString(json, from: valueStart) else { break }
            let replacement = try transform(key, json[valueStart..<valueEnd])
            if out.isEmpty { out.reserveCapacity(n + n / 8) }
            out.append(contentsOf: json[copied..<valueStart])
            out.append(contentsOf: replacement)
            copied = valueEnd
            i = valueEnd + 1
        }
        if copied == 0 { return json }
        out.append(contentsOf: json[copied..<n])
        return out
    }

    /// The index of the quote that closes the string whose first character is at `start`, or nil.
    private static func endOfString(_ json: [UInt8], from start: Int) -> Int? {
        var i = start
        while i < json.count {
            switch json[i] {
            case quote: return i
            case backslash: i += 2
            default: i += 1
            }
        }
        return nil
    }

    private static func skipSpace(_ json: [UInt8], from start: Int) -> Int {
        var i = start
        while i < json.count, json[i] == 0x20 || json[i] == 0x0A || json[i] == 0x0D || json[i] == 0x09 { i += 1 }
        return i
    }

    // MARK: - Hex and base64

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)
    private static let base64Alphabet: [UInt8] =
        Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let base64Values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, char) in base64Alphabet.enumerated() { table[Int(char)] = UInt8(value) }
        return table
    }()

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    static func hexDecode(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        guard text.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(text.count / 2)
        var i = text.startIndex
        while i < text.endIndex {
            guard let high = hexValue(text[i]), let low = hexValue(text[i + 1]) else { return nil }
            out.append(high << 4 | low)
            i += 2
        }
        return out
    }

    static func base64Encode(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(base64Alphabet[Int(b0 >> 2)])
            out.append(base64Alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? base64Alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? base64Alphabet[Int(b2 & 0x3F)] : UInt8(ascii: "="))
            i += 3
        }
        return out
    }

    /// Standard base64 with padding, as swift-protobuf writes it; nil for anything else.
    static func base64Decode(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        guard text.count % 4 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(text.count / 4 * 3)
        var i = text.startIndex
        while i < text.endIndex {
            let last = i + 4 == text.endIndex
            let c2 = text[i + 2], c3 = text[i + 3]
            let v0 = base64Values[Int(text[i])], v1 = base64Values[Int(text[i + 1])]
            let pad2 = last && c2 == UInt8(ascii: "=") && c3 == UInt8(ascii: "=")
            let pad3 = last && c3 == UInt8(ascii: "=")
            let v2 = pad2 ? 0 : base64Values[Int(c2)], v3 = pad3 ? 0 : base64Values[Int(c3)]
            guard v0 != 0xFF, v1 != 0xFF, v2 != 0xFF, v3 != 0xFF else { return nil }
            out.append(v0 << 2 | v1 >> 4)
            if !pad2 { out.append((v1 & 0x0F) << 4 | v2 >> 2) }
            if !pad3 { out.append((v2 & 0x03) << 6 | v3) }
            i += 4
        }
        return out
    }
}
