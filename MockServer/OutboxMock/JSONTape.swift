// A small, strict JSON parser that writes a flat "tape" of tokens instead of a tree.
//
// Why not JSONSerialization or JSONDecoder: the server must validate ≥ 100 000 logs/s on 2 cores
// (SPEC M6), several times what JSONSerialization manages here; a tape is one growing array per request,
// strings and numbers stay byte ranges into the body, and nothing is allocated per value unless
// a rule needs the decoded text (non-ASCII lengths, escapes).

import Foundation

/// One JSON value on the tape. Containers are followed by their members (objects: key, value, key,
/// value …) and `next` points past all of them, so a validator can skip a whole subtree in O(1).
struct JSONToken {
    enum Kind: UInt8 {
        case object, array, string, number, trueValue, falseValue, null
    }

    var kind: Kind
    /// Strings: `escapes` and/or `nonASCII`. Numbers: `integer` when there is no fraction or exponent.
    var flags: UInt8
    /// Strings: first byte after the opening quote. Others: first byte of the value.
    var start: Int32
    /// Strings: the closing quote. Others: one past the last byte of the value.
    var end: Int32
    /// Containers: number of members (objects) or elements (arrays).
    var count: Int32
    /// Tape index after this value and everything inside it.
    var next: Int32

    static let escapes: UInt8 = 1
    static let nonASCII: UInt8 = 2
    static let integer: UInt8 = 1
    /// Objects: the same bytes as the object at tape index `count`, whose members stand for this one's; its own
    /// members are not on the tape (`JSONTape.parse(_:storage:elidingRepeatedDevices:)`).
    static let repeated: UInt8 = 4
}

/// Where and why a body is not JSON. `logIndex` is the element of the top-level `"logs"` array the
/// parser was inside, so that a broken log can still be named in the 400 reason.
struct JSONParseError: Error, Equatable {
    var offset: Int
    var message: String
    var logIndex: Int?
}

/// Where a parser writes its tokens: one block of memory that keeps its capacity from parse to parse, so a
/// connection parses request after request without re-allocating. The parser writes through a plain
/// pointer (SPEC M10: an `Array` append paid a uniqueness and a capacity check for every token). A tape
/// reads the storage until the next parse into the same storage.
final class JSONTokenStorage {
    fileprivate private(set) var base: UnsafeMutablePointer<JSONToken>
    private(set) var capacity: Int

    init(capacity: Int = 64) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// Room for at least `minimum` tokens, the first `keep` kept.
    fileprivate func grow(to minimum: Int, keeping keep: Int) {
        let newCapacity = max(capacity * 2, minimum)
        let bigger = UnsafeMutablePointer<JSONToken>.allocate(capacity: newCapacity)
        bigger.moveInitialize(from: base, count: keep)
        base.deallocate()
        base = bigger
        capacity = newCapacity
    }

    var byteCount: Int { capacity * MemoryLayout<JSONToken>.stride }
}

struct JSONTape {
    /// Keeps `tokens` alive.
    private let storage: JSONTokenStorage
    private let tokens: UnsafePointer<JSONToken>
    let count: Int
    /// Whether whitespace separates tokens somewhere below the top-level object (a pretty-printed
    /// body): when false, every value's bytes are already compact and can be copied as they are.
    let hasInnerWhitespace: Bool

    /// Parses `bytes` completely; trailing non-whitespace is an error. The tokens go to `storage`, whose
    /// previous tape must no longer be read.
    ///
    /// With `elidingRepeatedDevices`, a log's `device` object whose bytes repeat the last one parsed in full becomes a
    /// single token flagged `repeated` (SPEC M10: a batch's logs nearly always carry the same device). Only a reader
    /// that looks for the flag may ask for it: App Center's validator does; the vendors' decoders do not.
    static func parse(_ bytes: UnsafeBufferPointer<UInt8>, storage: JSONTokenStorage = JSONTokenStorage(),
                      elidingRepeatedDevices: Bool = false) throws(JSONParseError) -> JSONTape {
        var parser = JSONTapeParser(bytes: bytes, storage: storage)
        parser.elideDevices = elidingRepeatedDevices
        try parser.parseDocument()
        return JSONTape(storage: storage, tokens: UnsafePointer(storage.base), count: parser.written,
                        hasInnerWhitespace: parser.innerWhitespace)
    }

    @inline(__always)
    subscript(_ index: Int) -> JSONToken {
        // As an array's subscript would: an index past the tape is a bug in the reader, never a read past it.
        precondition(UInt(bitPattern: index) < UInt(bitPattern: count), "tape index out of range")
        return tokens[index]
    }
}

private struct JSONTapeParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var pos = 0
    let storage: JSONTokenStorage
    /// `storage`'s memory, its capacity and the tokens written, held here so that an append is a compare and a store.
    var tokens: UnsafeMutablePointer<JSONToken>
    var capacity: Int
    var written = 0
    var depth = 0
    /// Set while parsing the elements of the top-level `"logs"` array (depth 2).
    var logIndex: Int?
    var nextArrayIsLogs = false
    var innerWhitespace = false
    /// The last `device` object parsed in full: its bytes and its tokens. A batch's logs nearly always carry
    /// the same device, and equal bytes parse to the same tokens, so the next one is copied, not parsed.
    var device: (start: Int, length: Int, firstToken: Int, tokenCount: Int)?

    static let maxDepth = 64

    var elideDevices = false

    init(bytes: UnsafeBufferPointer<UInt8>, storage: JSONTokenStorage) {
        self.bytes = bytes
        self.storage = storage
        // Analytics logs hold about one token per 8 bytes.
        let expected = max(16, bytes.count / 8)
        if storage.capacity < expected { storage.grow(to: expected, keeping: 0) }
        tokens = storage.base
        capacity = storage.capacity
    }

    /// Room for `n` more tokens.
    @inline(__always) mutating func reserve(_ n: Int) {
        if written + n > capacity { grow(written + n) }
    }

    mutating func grow(_ minimum: Int) {
        storage.grow(to: minimum, keeping: written)
        tokens = storage.base
        capacity = storage.capacity
    }

    @inline(__always) mutating func append(_ token: JSONToken) {
        reserve(1)
        (tokens + written).initialize(to: token)
        written += 1
    }

    func fail(_ message: String, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(offset: offset ?? pos, message: message, logIndex: logIndex)
    }

    @inline(__always) mutating func skipWhitespace() {
        let start = pos
        while pos < bytes.count {
            let b = bytes[pos]
            if b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { pos += 1 } else { break }
        }
        if pos != start && depth >= 2 { innerWhitespace = true }
    }

    mutating func parseDocument() throws(JSONParseError) {
        skipWhitespace()
        try parseValue()
        skipWhitespace()
        if pos != bytes.count { throw fail("unexpected data after the JSON value") }
    }

    mutating func parseValue() throws(JSONParseError) {
        guard pos < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[pos] {
        case UInt8(ascii: "{"): try parseObject()
        case UInt8(ascii: "["): try parseArray()
        case UInt8(ascii: "\""): try parseString()
        case UInt8(ascii: "t"): try parseLiteral("true", .trueValue)
        case UInt8(ascii: "f"): try parseLiteral("false", .falseValue)
        case UInt8(ascii: "n"): try parseLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try parseNumber()
        default: throw fail("unexpected character '\(Self.printable(bytes[pos]))'")
        }
    }

    static func printable(_ b: UInt8) -> String {
        (0x21...0x7E).contains(b) ? String(UnicodeScalar(b)) : "\\x" + String(b, radix: 16)
    }

    mutating func parseLiteral(_ text: StaticString, _ kind: JSONToken.Kind) throws(JSONParseError) {
        let n = text.utf8CodeUnitCount
        guard pos + n <= bytes.count else { throw fail("unexpected end of input") }
        let lit = text.utf8Start
        for i in 0..<n where bytes[pos + i] != lit[i] {
            throw fail("invalid literal")
        }
        let start = pos
        pos += n
        append(JSONToken(kind: kind, flags: 0, start: Int32(start), end: Int32(pos), count: 0,
                                next: Int32(written + 1)))
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > Self.maxDepth { throw fail("nesting deeper than \(Self.maxDepth)") }
    }

    mutating func parseObject() throws(JSONParseError) {
        try enter()
        let me = written
        let start = pos
        append(JSONToken(kind: .object, flags: 0, start: Int32(start), end: 0, count: 0, next: 0))
        pos += 1
        var count: Int32 = 0
        skipWhitespace()
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "}") {
            pos += 1
        } else {
            while true {
                skipWhitespace()
                guard pos < bytes.count else { throw fail("unexpected end of input in an object") }
                guard bytes[pos] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                let keyIndex = written
                try quickString()
                skipWhitespace()
                guard pos < bytes.count, bytes[pos] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                pos += 1
                skipWhitespace()
                if depth == 1 { nextArrayIsLogs = isKey(keyIndex, "logs") }
                if depth == 3, pos < bytes.count, bytes[pos] == UInt8(ascii: "{"), isKey(keyIndex, "device") {
                    try parseDevice()
                } else if pos < bytes.count, bytes[pos] == UInt8(ascii: "\"") {
                    try quickString()
                } else {
                    try parseValue()
                }
                nextArrayIsLogs = false
                count += 1
                skipWhitespace()
                guard pos < bytes.count else { throw fail("unexpected end of input in an object") }
                if bytes[pos] == UInt8(ascii: ",") { pos += 1; continue }
                if bytes[pos] == UInt8(ascii: "}") { pos += 1; break }
                throw fail("expected ',' or '}'")
            }
        }
        tokens[me].end = Int32(pos)
        tokens[me].count = count
        tokens[me].next = Int32(written)
        depth -= 1
    }

    /// A log's `device` object (depth 3 is inside one log): copied from the last one when the bytes are the
    /// same, parsed (and remembered) otherwise. A value's tokens depend only on its bytes and its depth.
    mutating func parseDevice() throws(JSONParseError) {
        if let known = device, let base = bytes.baseAddress, pos + known.length <= bytes.count,
           memcmp(base + known.start, base + pos, known.length) == 0 {
            if elideDevices {
                append(JSONToken(kind: .object, flags: JSONToken.repeated, start: Int32(pos),
                                 end: Int32(pos + known.length), count: Int32(known.firstToken),
                                 next: Int32(written + 1)))
                pos += known.length
                return
            }
            let byteShift = Int32(pos - known.start)
            let tokenShift = Int32(written - known.firstToken)
            reserve(known.tokenCount)
            for i in known.firstToken..<(known.firstToken + known.tokenCount) {
                var t = tokens[i]
                t.start += byteShift
                t.end += byteShift
                t.next += tokenShift
                (tokens + written).initialize(to: t)
                written += 1
            }
            pos += known.length
            return
        }
        let start = pos
        let firstToken = written
        try parseValue()
        device = (start, pos - start, firstToken, written - firstToken)
    }

    func isKey(_ index: Int, _ literal: StaticString) -> Bool {
        let t = tokens[index]
        let n = literal.utf8CodeUnitCount
        guard Int(t.end - t.start) == n else { return false }
        let lit = literal.utf8Start
        for i in 0..<n where bytes[Int(t.start) + i] != lit[i] { return false }
        return true
    }

    mutating func parseArray() throws(JSONParseError) {
        let isLogs = nextArrayIsLogs && depth == 1
        nextArrayIsLogs = false
        try enter()
        let me = written
        append(JSONToken(kind: .array, flags: 0, start: Int32(pos), end: 0, count: 0, next: 0))
        pos += 1
        var count: Int32 = 0
        skipWhitespace()
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "]") {
            pos += 1
        } else {
            while true {
                skipWhitespace()
                if isLogs { logIndex = Int(count) }
                try parseValue()
                count += 1
                skipWhitespace()
                guard pos < bytes.count else { throw fail("unexpected end of input in an array") }
                if bytes[pos] == UInt8(ascii: ",") { pos += 1; continue }
                if bytes[pos] == UInt8(ascii: "]") { pos += 1; break }
                throw fail("expected ',' or ']'")
            }
        }
        if isLogs { logIndex = nil }
        tokens[me].end = Int32(pos)
        tokens[me].count = count
        tokens[me].next = Int32(written)
        depth -= 1
    }

    /// A string (at its opening quote) that ends within sixteen bytes with nothing to decode or check — nearly
    /// every key and most values — is read here, inline in the object loop (SPEC M10); any other goes to
    /// `parseString`, from the same quote.
    @inline(__always) mutating func quickString() throws(JSONParseError) {
        let start = pos + 1
        if start + 16 <= bytes.count, let raw = UnsafeRawPointer(bytes.baseAddress) {
            let s0 = Self.specialBytes(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: start, as: UInt64.self)))
            let s1 = Self.specialBytes(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: start + 8,
                                                                              as: UInt64.self)))
            if s0 | s1 != 0 {
                let end = start + (s0 != 0 ? s0.trailingZeroBitCount >> 3 : 8 + s1.trailingZeroBitCount >> 3)
                if bytes[end] == UInt8(ascii: "\"") {
                    append(JSONToken(kind: .string, flags: 0, start: Int32(start), end: Int32(end), count: 0,
                                     next: Int32(written + 1)))
                    pos = end + 1
                    return
                }
            }
        }
        try parseString()
    }

    mutating func parseString() throws(JSONParseError) {
        pos += 1  // opening quote
        let start = pos
        var flags: UInt8 = 0
        let n = bytes.count
        let raw = UnsafeRawPointer(bytes.baseAddress)
        while pos < n {
            // Sixteen (then eight) bytes at a time: most of a log's bytes are inside strings with nothing to check,
            // and most keys and values end within the first chunk. A chunk that holds a special byte moves `pos`
            // straight to the first one, which the code below handles.
            if let raw, pos + 16 <= n {
                // Two independent words: a string of up to 15 bytes ends in one pass.
                let s0 = Self.specialBytes(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: pos, as: UInt64.self)))
                let s1 = Self.specialBytes(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: pos + 8,
                                                                                  as: UInt64.self)))
                if s0 | s1 == 0 {
                    pos += 16
                    continue
                }
                pos += s0 != 0 ? s0.trailingZeroBitCount >> 3 : 8 + s1.trailingZeroBitCount >> 3
            } else if let raw, pos + 8 <= n {
                let special = Self.specialBytes(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: pos,
                                                                                       as: UInt64.self)))
                if special == 0 {
                    pos += 8
                    continue
                }
                pos += special.trailingZeroBitCount >> 3
            }
            let b = bytes[pos]
            if b == UInt8(ascii: "\"") {
                append(JSONToken(kind: .string, flags: flags, start: Int32(start), end: Int32(pos),
                                        count: 0, next: Int32(written + 1)))
                pos += 1
                return
            }
            if b == UInt8(ascii: "\\") {
                flags |= JSONToken.escapes
                try parseEscape()
            } else if b < 0x20 {
                throw fail("control character in a string")
            } else if b >= 0x80 {
                flags |= JSONToken.nonASCII
                try skipUTF8Sequence()
            } else {
                pos += 1
            }
        }
        throw fail("unterminated string", at: start - 1)
    }

    /// The high bit of each byte of `v` (first byte lowest) that is a quote, a backslash, a control character
    /// or non-ASCII; no carry crosses bytes, so the lowest set bit is exactly the first special byte.
    @inline(__always) static func specialBytes(_ v: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let low7: UInt64 = 0x7F7F_7F7F_7F7F_7F7F
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quote = v ^ (ones &* 0x22)
        let backslash = v ^ (ones &* 0x5C)
        // High bit set where the byte is zero: adding 0x7F to the low seven bits carries into bit 7 unless all
        // seven are zero, and the byte's own bit 7 is or-ed in.
        let isQuote = ~(((quote & low7) &+ low7) | quote)
        let isBackslash = ~(((backslash & low7) &+ low7) | backslash)
        // Below 0x20: adding 0x60 to the low seven bits reaches bit 7 from 0x20 upwards.
        let isControl = ~(((v & low7) &+ (ones &* 0x60)) | v)
        return (isQuote | isBackslash | isControl | v) & highs
    }

    mutating func parseEscape() throws(JSONParseError) {
        guard pos + 1 < bytes.count else { throw fail("unterminated escape") }
        switch bytes[pos + 1] {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
             UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            pos += 2
        case UInt8(ascii: "u"):
            let unit = try hex4(at: pos + 2)
            pos += 6
            if (0xD800...0xDBFF).contains(unit) {
                // A high surrogate must be followed by an escaped low surrogate, or the text is not Unicode.
                guard pos + 1 < bytes.count, bytes[pos] == UInt8(ascii: "\\"), bytes[pos + 1] == UInt8(ascii: "u")
                else { throw fail("lone surrogate in \\u escape") }
                let low = try hex4(at: pos + 2)
                guard (0xDC00...0xDFFF).contains(low) else { throw fail("lone surrogate in \\u escape") }
                pos += 6
            } else if (0xDC00...0xDFFF).contains(unit) {
                throw fail("lone surrogate in \\u escape")
            }
        default:
            throw fail("invalid escape")
        }
    }

    func hex4(at offset: Int) throws(JSONParseError) -> UInt32 {
        guard offset + 4 <= bytes.count else { throw fail("truncated \\u escape") }
        var value: UInt32 = 0
        for i in 0..<4 {
            let c = bytes[offset + i]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("invalid \\u escape", at: offset + i)
            }
            value = value << 4 | digit
        }
        return value
    }

    /// Validates one UTF-8 sequence (RFC 3629: no overlongs, no surrogates, ≤ U+10FFFF).
    mutating func skipUTF8Sequence() throws(JSONParseError) {
        let b0 = bytes[pos]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch b0 {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: throw fail("invalid UTF-8")
        }
        guard pos + length <= bytes.count else { throw fail("invalid UTF-8") }
        let b1 = bytes[pos + 1]
        guard b1 >= low, b1 <= high else { throw fail("invalid UTF-8") }
        for i in 2..<max(2, length) where bytes[pos + i] & 0xC0 != 0x80 {
            throw fail("invalid UTF-8")
        }
        pos += length
    }

    mutating func parseNumber() throws(JSONParseError) {
        let start = pos
        var integer = true
        if bytes[pos] == UInt8(ascii: "-") { pos += 1 }
        guard pos < bytes.count, isDigit(bytes[pos]) else { throw fail("invalid number", at: start) }
        if bytes[pos] == UInt8(ascii: "0") {
            pos += 1
        } else {
            while pos < bytes.count, isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < bytes.count, bytes[pos] == UInt8(ascii: ".") {
            integer = false
            pos += 1
            guard pos < bytes.count, isDigit(bytes[pos]) else { throw fail("invalid number", at: start) }
            while pos < bytes.count, isDigit(bytes[pos]) { pos += 1 }
        }
        if pos < bytes.count, bytes[pos] == UInt8(ascii: "e") || bytes[pos] == UInt8(ascii: "E") {
            integer = false
            pos += 1
            if pos < bytes.count, bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-") { pos += 1 }
            guard pos < bytes.count, isDigit(bytes[pos]) else { throw fail("invalid number", at: start) }
            while pos < bytes.count, isDigit(bytes[pos]) { pos += 1 }
        }
        append(JSONToken(kind: .number, flags: integer ? JSONToken.integer : 0, start: Int32(start),
                                end: Int32(pos), count: 0, next: Int32(written + 1)))
    }

    @inline(__always) func isDigit(_ b: UInt8) -> Bool { b &- UInt8(ascii: "0") < 10 }
}
