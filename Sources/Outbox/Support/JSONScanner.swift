import Glibc

/// Why a JSON text was refused: the message names the byte offset, and the key when one is known.
package struct JSONError: Error {
    package var message: String

    package init(message: String) {
        self.message = message
    }
}

/// A JSON value: the C configuration (small documents, read once per `outbox_open` or `outbox_update`) and a stored
/// log's payload when a destination other than App Center's re-encodes it.
package enum JSONValue {
    case string(String)
    case integer(Int64)
    case double(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    package var typeName: String {
        switch self {
        case .string: "a string"
        case .integer: "an integer"
        case .double: "a number"
        case .bool: "a boolean"
        case .null: "null"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// A JSON string read in place: its bytes between the quotes as they stand in the text (valid for as long as the
/// text is), escapes and all. Without escapes they are the string's UTF-8; with them, `decoded` gives it. Either way
/// they are valid inside a JSON string, so a JSON writer copies them as they are.
package struct JSONText {
    package var raw: UnsafeBufferPointer<UInt8>
    package var escaped: Bool

    package init(raw: UnsafeBufferPointer<UInt8>, escaped: Bool) {
        self.raw = raw
        self.escaped = escaped
    }

    /// A literal's bytes, which live for the whole program.
    package init(_ literal: StaticString) {
        self.init(raw: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount), escaped: false)
    }

    /// The string's UTF-8 (escapes decoded; the rare string with one costs an allocation).
    package func withUTF8<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        guard escaped else { return body(raw) }
        return decoded.withUnsafeBufferPointer(body)
    }

    package var decoded: [UInt8] {
        guard escaped else { return Array(raw) }
        var quoted: [UInt8] = [UInt8(ascii: "\"")]
        quoted.append(contentsOf: raw)
        quoted.append(UInt8(ascii: "\""))
        let value: JSONValue? = quoted.withUnsafeBufferPointer { buffer in
            var scanner = JSONScanner(buffer)
            return try? scanner.document()
        }
        guard case .string(let text)? = value else { return [] }
        return Array(text.utf8)
    }

    /// Whether the text is `literal`, byte for byte as written.
    package func `is`(_ literal: StaticString) -> Bool {
        raw.count == literal.utf8CodeUnitCount
            && (raw.count == 0 || memcmp(raw.baseAddress!, literal.utf8Start, raw.count) == 0)
    }

    package var string: String { withUTF8 { String(decoding: $0, as: UTF8.self) } }
}

/// What a JSON value is, before reading it.
package enum JSONKind { case string, number, bool, null, array, object }

/// A strict RFC 8259 reader over UTF-8 bytes, of our own rather than a general JSON library: `outbox_track`
/// parses a properties object on the caller's thread for every event, and SPEC E's speed bound (at most 1.5× the
/// cost of Swift's `trackEvent`) leaves no room for building a generic tree, boxing numbers or going through
/// Foundation. The properties path (`properties`) reads a flat object straight into the engine's
/// `ScannedPropertyValue`s, leaving unescaped strings in the caller's text; `value()` builds a tree for the
/// configuration. Invalid UTF-8, lone surrogates, control characters in strings, leading zeros, trailing garbage
/// and nesting deeper than 64 are all refused.
package struct JSONScanner {
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    /// Decoded strings with escapes are assembled here; reused across the strings of one document.
    private var scratch: [UInt8] = []
    private static let maxDepth = 64

    package init(_ bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    // MARK: - Documents

    /// A flat object of strings, numbers and booleans (`outbox_track`'s properties): `each` receives every member
    /// in the text's order (the caller sorts them and refuses a key given twice).
    @inline(__always)
    package mutating func properties(_ each: (String, ScannedPropertyValue) throws(JSONError) -> Void) throws(JSONError) {
        skipSpace()
        try expect(UInt8(ascii: "{"))
        skipSpace()
        if peek() == UInt8(ascii: "}") {
            index += 1
            try end()
            return
        }
        while true {
            skipSpace()
            guard peek() == UInt8(ascii: "\"") else { throw fail("expected a property name in quotes") }
            let key = try string()
            skipSpace()
            try expect(UInt8(ascii: ":"))
            skipSpace()
            let value: ScannedPropertyValue
            switch peek() {
            case UInt8(ascii: "\""):
                // Without escapes the value stays in the caller's text, valid for the whole `outbox_track` call:
                // no String is made for it (SPEC E's speed bound). An escaped one is decoded into a String.
                switch try scanString() {
                case .plain(let text): value = .utf8(text)
                case .escaped(let start): value = .value(.string(try escapedString(from: start)))
                }
            case UInt8(ascii: "t"): try literal("true"); value = .value(.bool(true))
            case UInt8(ascii: "f"): try literal("false"); value = .value(.bool(false))
            case UInt8(ascii: "-"), .some(UInt8(ascii: "0")...UInt8(ascii: "9")):
                switch try number() {
                case .integer(let int): value = .value(.int(int))
                case .double(let double): value = .value(.double(double))
                default: throw fail("property '\(key)': not a number")
                }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                throw fail("property '\(key)': properties are a flat object of strings, numbers and booleans, not nested")
            case UInt8(ascii: "n"):
                throw fail("property '\(key)': null is not a property value (leave the key out)")
            default:
                throw fail("property '\(key)': expected a string, a number or a boolean")
            }
            try each(key, value)
            skipSpace()
            switch next() {
            case UInt8(ascii: ","): continue
            case UInt8(ascii: "}"): try end(); return
            default: throw fail("expected ',' or '}' after property '\(key)'")
            }
        }
    }

    /// Any JSON document, as a tree (the configuration).
    package mutating func document() throws(JSONError) -> JSONValue {
        let value = try value(depth: 0)
        try end()
        return value
    }

    // MARK: - Reading in place

    /// Each member of the object at the cursor, its key and the scanner at its value: `each` reads the value or
    /// skips it. Nothing is built: a destination maps a stored payload through this without a tree (SPEC D10).
    @inline(__always)
    package mutating func members(_ each: (JSONText, inout JSONScanner) throws(JSONError) -> Void) throws(JSONError) {
        skipSpace()
        try expect(UInt8(ascii: "{"))
        skipSpace()
        if peek() == UInt8(ascii: "}") { index += 1; return }
        while true {
            skipSpace()
            guard peek() == UInt8(ascii: "\"") else { throw fail("expected a key in quotes") }
            let key = try text()
            skipSpace()
            try expect(UInt8(ascii: ":"))
            skipSpace()
            try each(key, &self)
            skipSpace()
            switch next() {
            case UInt8(ascii: ","): continue
            case UInt8(ascii: "}"): return
            default: throw fail("expected ',' or '}' after a member")
            }
        }
    }

    /// Each element of the array at the cursor, with the scanner at it: `each` reads the element or skips it.
    @inline(__always)
    package mutating func elements(_ each: (inout JSONScanner) throws(JSONError) -> Void) throws(JSONError) {
        skipSpace()
        try expect(UInt8(ascii: "["))
        skipSpace()
        if peek() == UInt8(ascii: "]") { index += 1; return }
        while true {
            skipSpace()
            try each(&self)
            skipSpace()
            switch next() {
            case UInt8(ascii: ","): continue
            case UInt8(ascii: "]"): return
            default: throw fail("expected ',' or ']' in an array")
            }
        }
    }

    /// The string at the cursor, in place, validated (UTF-8, escapes).
    @inline(__always)
    package mutating func text() throws(JSONError) -> JSONText {
        skipSpace()
        guard peek() == UInt8(ascii: "\"") else { throw fail("expected a string") }
        switch try scanString() {
        case .plain(let bytes): return JSONText(raw: bytes, escaped: false)
        case .escaped(let start):
            // Decoded once to check its escapes and UTF-8 (a stored text is copied into JSON as it stands).
            _ = try escapedString(from: start)
            return JSONText(raw: UnsafeBufferPointer(rebasing: bytes[start..<(index - 1)]), escaped: true)
        }
    }

    /// Steps over `word` when the text at the cursor is exactly it (no space skipped) and says whether it did: a
    /// reader's fast path over text its own program wrote. Nothing moves when it is not there.
    @inline(__always)
    package mutating func consume(_ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count, let base = bytes.baseAddress,
              memcmp(base + index, word.utf8Start, count) == 0 else { return false }
        index += count
        return true
    }

    /// Where the cursor is, to come back to with `rewind(to:)` when a fast path finds text it does not expect.
    package var offset: Int { index }

    package mutating func rewind(to offset: Int) { index = offset }

    /// What the value at the cursor is, by its first byte (`nil` at the end of the text).
    @inline(__always)
    package mutating func peekKind() -> JSONKind? {
        skipSpace()
        switch peek() {
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
        case UInt8(ascii: "n"): return .null
        case nil: return nil
        default: return .number
        }
    }

    /// The value at the cursor as a tree: meant for numbers, booleans and null, which build nothing.
    package mutating func scalar() throws(JSONError) -> JSONValue {
        try value(depth: 0)
    }

    /// Steps over the value at the cursor, validating it, and returns where it lies in the text.
    @discardableResult
    package mutating func skip() throws(JSONError) -> Range<Int> {
        skipSpace()
        let start = index
        try skip(depth: 0)
        return start..<index
    }

    private mutating func skip(depth: Int) throws(JSONError) {
        guard depth < Self.maxDepth else { throw fail("nested deeper than \(Self.maxDepth) levels") }
        skipSpace()
        switch peek() {
        case UInt8(ascii: "\""): _ = try text()
        case UInt8(ascii: "["): try elements { (s: inout JSONScanner) throws(JSONError) in try s.skip(depth: depth + 1) }
        case UInt8(ascii: "{"): try members { (_, s: inout JSONScanner) throws(JSONError) in try s.skip(depth: depth + 1) }
        default: _ = try value(depth: depth)
        }
    }

    // MARK: - Values

    private mutating func value(depth: Int) throws(JSONError) -> JSONValue {
        guard depth < Self.maxDepth else { throw fail("nested deeper than \(Self.maxDepth) levels") }
        skipSpace()
        switch peek() {
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), .some(UInt8(ascii: "0")...UInt8(ascii: "9")): return try number()
        case UInt8(ascii: "["):
            index += 1
            var items: [JSONValue] = []
            skipSpace()
            if peek() == UInt8(ascii: "]") { index += 1; return .array(items) }
            while true {
                items.append(try value(depth: depth + 1))
                skipSpace()
                switch next() {
                case UInt8(ascii: ","): continue
                case UInt8(ascii: "]"): return .array(items)
                default: throw fail("expected ',' or ']' in an array")
                }
            }
        case UInt8(ascii: "{"):
            index += 1
            var members: [(key: String, value: JSONValue)] = []
            skipSpace()
            if peek() == UInt8(ascii: "}") { index += 1; return .object(members) }
            while true {
                skipSpace()
                guard peek() == UInt8(ascii: "\"") else { throw fail("expected a key in quotes") }
                let key = try string()
                if members.contains(where: { $0.key == key }) { throw fail("key '\(key)' appears twice") }
                skipSpace()
                try expect(UInt8(ascii: ":"))
                members.append((key, try value(depth: depth + 1)))
                skipSpace()
                switch next() {
                case UInt8(ascii: ","): continue
                case UInt8(ascii: "}"): return .object(members)
                default: throw fail("expected ',' or '}' after key '\(key)'")
                }
            }
        case nil: throw fail("unexpected end of the text")
        default: throw fail("unexpected character")
        }
    }

    /// A string starting at the opening quote. Without escapes the bytes are validated and copied once.
    private mutating func string() throws(JSONError) -> String {
        switch try scanString() {
        case .plain(let text): String(decoding: text, as: UTF8.self)
        case .escaped(let start): try escapedString(from: start)
        }
    }

    /// A string's text as it stands in the JSON: its bytes when it has no escape; otherwise where its text starts,
    /// with `index` at its first backslash, for `escapedString(from:)`.
    private enum ScannedString {
        case plain(UnsafeBufferPointer<UInt8>)
        case escaped(start: Int)
    }

    /// Scans a string from its opening quote: past its closing quote when it has no escape (validated as UTF-8),
    /// else up to its first backslash.
    @inline(__always)
    private mutating func scanString() throws(JSONError) -> ScannedString {
        // The cursor in a local: stored back to `index` on every step it would cost a memory write per word.
        var i = index + 1
        let start = i
        let count = bytes.count
        var high: UInt8 = 0
        // Eight bytes at a time while none is a quote, a backslash, a control character or non-ASCII: the usual
        // property value is plain ASCII, and this loop runs for every byte of it on the caller's thread.
        if let base = bytes.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while i + 8 <= count {
                let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
                let quote = word ^ (ones &* 0x22)
                let backslash = word ^ (ones &* 0x5C)
                let special = ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | (word &- ones &* 0x20) | word
                if special & highs != 0 { break }
                i += 8
            }
        }
        while i < count {
            let byte = bytes[i]
            if byte == UInt8(ascii: "\"") {
                let span = UnsafeBufferPointer(rebasing: bytes[start..<i])
                index = i + 1
                guard high < 0x80 || Self.isValidUTF8(span) else { throw fail("invalid UTF-8 in a string", at: start) }
                return .plain(span)
            }
            if byte == UInt8(ascii: "\\") { index = i; return .escaped(start: start) }
            if byte < 0x20 { index = i; throw fail("control character in a string (escape it)") }
            high |= byte
            i += 1
        }
        index = i
        throw fail("unterminated string", at: start - 1)
    }

    /// Well-formed UTF-8 as Unicode's table 3-7 defines it: no overlong forms, no surrogates, nothing above U+10FFFF.
    /// Ours rather than `String(validating:as:)`, which is generic over the encoding and, unspecialized across the
    /// module boundary, looks up type metadata at run time on every call of `outbox_track`.
    /// Validated, `String(decoding:as:)` then copies the bytes without repairing anything.
    package static func isValidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        let n = bytes.count
        while i < n {
            let b0 = bytes[i]
            if b0 < 0x80 { i += 1; continue }
            func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
                i + offset < n && range.contains(bytes[i + offset])
            }
            switch b0 {
            case 0xC2...0xDF:
                guard continuation(1) else { return false }
                i += 2
            case 0xE0:
                guard continuation(1, 0xA0...0xBF), continuation(2) else { return false }
                i += 3
            case 0xE1...0xEC, 0xEE...0xEF:
                guard continuation(1), continuation(2) else { return false }
                i += 3
            case 0xED:
                guard continuation(1, 0x80...0x9F), continuation(2) else { return false }
                i += 3
            case 0xF0:
                guard continuation(1, 0x90...0xBF), continuation(2), continuation(3) else { return false }
                i += 4
            case 0xF1...0xF3:
                guard continuation(1), continuation(2), continuation(3) else { return false }
                i += 4
            case 0xF4:
                guard continuation(1, 0x80...0x8F), continuation(2), continuation(3) else { return false }
                i += 4
            default:
                return false
            }
        }
        return true
    }

    private mutating func escapedString(from start: Int) throws(JSONError) -> String {
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                let valid = scratch.withUnsafeBufferPointer { Self.isValidUTF8($0) }
                guard valid else { throw fail("invalid UTF-8 in a string", at: start) }
                return String(decoding: scratch, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard let escape = next() else { throw fail("unterminated string", at: start - 1) }
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scratch.append(escape)
                case UInt8(ascii: "b"): scratch.append(0x08)
                case UInt8(ascii: "f"): scratch.append(0x0C)
                case UInt8(ascii: "n"): scratch.append(0x0A)
                case UInt8(ascii: "r"): scratch.append(0x0D)
                case UInt8(ascii: "t"): scratch.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard next() == UInt8(ascii: "\\"), next() == UInt8(ascii: "u") else {
                            throw fail("a lone high surrogate \\u escape")
                        }
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("a high surrogate without its low half") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail("a lone low surrogate \\u escape")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw fail("not a Unicode scalar") }
                    scratch.append(contentsOf: UTF8.encode(unicode)!)
                default:
                    throw fail("unknown escape \\\(Character(Unicode.Scalar(escape)))")
                }
            default:
                if byte < 0x20 { throw fail("control character in a string (escape it)") }
                scratch.append(byte)
            }
        }
        throw fail("unterminated string", at: start - 1)
    }

    private mutating func hex4() throws(JSONError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = next() else { throw fail("a \\u escape needs 4 hex digits") }
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail("a \\u escape needs 4 hex digits")
            }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// RFC 8259's number grammar. Integers within Int64 stay integers; everything else is a Double.
    private mutating func number() throws(JSONError) -> JSONValue {
        let start = index
        var negative = false
        if peek() == UInt8(ascii: "-") { negative = true; index += 1 }
        guard let first = peek(), isDigit(first) else { throw fail("a digit must follow '-'") }
        var integral = true
        var magnitude: UInt64 = 0
        var overflow = false
        if first == UInt8(ascii: "0") {
            index += 1
            if let after = peek(), isDigit(after) { throw fail("a number with a leading zero", at: start) }
        } else {
            while let digit = peek(), isDigit(digit) {
                let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (sum, o2) = times10.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
                magnitude = sum
                overflow = overflow || o1 || o2
                index += 1
            }
        }
        if peek() == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard let digit = peek(), isDigit(digit) else { throw fail("a digit must follow '.'") }
            while let digit = peek(), isDigit(digit) { index += 1 }
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            integral = false
            index += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
            guard let digit = peek(), isDigit(digit) else { throw fail("a digit must follow the exponent") }
            while let digit = peek(), isDigit(digit) { index += 1 }
        }
        if integral && !overflow {
            if negative, magnitude <= UInt64(Int64.max) + 1 { return .integer(magnitude == UInt64(Int64.max) + 1 ? .min : -Int64(magnitude)) }
            if !negative, magnitude <= UInt64(Int64.max) { return .integer(Int64(magnitude)) }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let double = Double(text), double.isFinite else { throw fail("number out of range", at: start) }
        return .double(double)
    }

    // MARK: - Bytes

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func next() -> UInt8? {
        guard index < bytes.count else { return nil }
        defer { index += 1 }
        return bytes[index]
    }

    @inline(__always)
    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    @inline(__always)
    private mutating func expect(_ byte: UInt8) throws(JSONError) {
        guard peek() == byte else { throw fail("expected '\(Character(Unicode.Scalar(byte)))'") }
        index += 1
    }

    private mutating func literal(_ word: StaticString) throws(JSONError) {
        let start = index
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count,
              memcmp(bytes.baseAddress! + index, word.utf8Start, count) == 0 else { throw fail("unexpected word", at: start) }
        index += count
    }

    private mutating func end() throws(JSONError) {
        skipSpace()
        guard index == bytes.count else { throw fail("unexpected text after the JSON value") }
    }

    private func fail(_ message: String, at offset: Int? = nil) -> JSONError {
        JSONError(message: "malformed JSON at byte \(min(offset ?? index, bytes.count)): \(message)")
    }
}
