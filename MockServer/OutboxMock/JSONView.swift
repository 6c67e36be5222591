// Read access to a parsed tape: decoded strings, character counts, numbers, member lookup.

import Foundation

/// A parsed JSON document: the bytes it came from and its tape. Only valid while `bytes` is.
struct JSONView {
    let bytes: UnsafeBufferPointer<UInt8>
    let tape: JSONTape

    subscript(_ index: Int) -> JSONToken { tape[index] }

    /// Calls `body` with the indices of each (key, value) member of the object at `index`.
    @inline(__always)
    func forEachMember(of index: Int, _ body: (_ key: Int, _ value: Int) throws -> Void) rethrows {
        let object = tape[index]
        var i = index + 1
        for _ in 0..<object.count {
            let value = i + 1
            try body(i, value)
            i = Int(tape[value].next)
        }
    }

    /// Calls `body` with the position and tape index of each element of the array at `index`.
    @inline(__always)
    func forEachElement(of index: Int, _ body: (_ position: Int, _ element: Int) throws -> Void) rethrows {
        let array = tape[index]
        var i = index + 1
        for n in 0..<Int(array.count) {
            try body(n, i)
            i = Int(tape[i].next)
        }
    }

    /// The raw bytes between the quotes of a string token (escapes not decoded).
    @inline(__always)
    func rawBytes(_ index: Int) -> UnsafeBufferPointer<UInt8> {
        let t = tape[index]
        return UnsafeBufferPointer(rebasing: bytes[Int(t.start)..<Int(t.end)])
    }

    /// The decoded text of a string token.
    func string(_ index: Int) -> String {
        let t = tape[index]
        if t.flags & JSONToken.escapes == 0 {
            return String(decoding: rawBytes(index), as: UTF8.self)
        }
        return Self.unescape(rawBytes(index))
    }

    /// Calls `body` with the decoded UTF-8 bytes of a string token, without copying when there are no escapes.
    @inline(__always)
    func withDecodedBytes<T>(_ index: Int, _ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        if tape[index].flags & JSONToken.escapes == 0 { return body(rawBytes(index)) }
        var decoded = string(index)
        return decoded.withUTF8 { body($0) }
    }

    /// Characters as Swift counts them (extended grapheme clusters), which is how the engine truncates
    /// names and properties (SPEC T2–T3). ASCII without escapes — nearly every string — is its byte length.
    func characterCount(_ index: Int) -> Int {
        let t = tape[index]
        if t.flags == 0 { return Int(t.end - t.start) }
        return string(index).count
    }

    /// Whether a string token equals `literal` (after decoding escapes). Inlined, with the length compared first:
    /// the validator asks this for nearly every key and type name.
    @inline(__always)
    func equals(_ index: Int, _ literal: StaticString) -> Bool {
        let t = tape[index]
        guard t.flags & JSONToken.escapes == 0 else { return withDecodedBytes(index) { Self.bytesEqual($0, literal) } }
        let n = literal.utf8CodeUnitCount
        guard Int(t.end - t.start) == n, let base = bytes.baseAddress else { return false }
        // Keys and type names are short: a loop the compiler unrolls beats a call to memcmp.
        let a = base + Int(t.start)
        let b = literal.utf8Start
        for i in 0..<n where a[i] != b[i] { return false }
        return true
    }

    @inline(__always)
    static func bytesEqual(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard bytes.count == n else { return false }
        guard n > 0, let base = bytes.baseAddress else { return true }
        let b = literal.utf8Start
        for i in 0..<n where base[i] != b[i] { return false }
        return true
    }

    /// Whether a number token is a finite Double, as `double(_:) != nil` says: without an exponent, anything
    /// under 309 integer digits is below `Double.greatestFiniteMagnitude`, so only the rest is read.
    func isFiniteNumber(_ index: Int) -> Bool {
        let t = tape[index]
        var integerDigits = 0
        var i = Int(t.start)
        let end = Int(t.end)
        if i < end, bytes[i] == UInt8(ascii: "-") { i += 1 }
        while i < end, bytes[i] &- UInt8(ascii: "0") < 10 {
            integerDigits += 1
            i += 1
        }
        var hasExponent = false
        while i < end {
            if bytes[i] | 0x20 == UInt8(ascii: "e") { hasExponent = true }
            i += 1
        }
        if !hasExponent, integerDigits <= 308 { return true }
        return double(index) != nil
    }

    /// A number token as a finite Double, or nil when it overflows to ±infinity.
    func double(_ index: Int) -> Double? {
        let t = tape[index]
        if let exact = Self.shortDecimal(UnsafeBufferPointer(rebasing: bytes[Int(t.start)..<Int(t.end)])) {
            return exact
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[Int(t.start)..<Int(t.end)]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { return nil }
        return value
    }

    private static let powersOfTen: [Double] = (0...15).map { (0..<$0).reduce(1.0) { r, _ in r * 10 } }

    /// A number of at most 15 digits without exponent (`-12.5`, `5321.5`: nearly every one on the wire), exactly
    /// as `strtod` rounds it: the digits as an integer and a power of ten are both exact doubles, so the one
    /// division is correctly rounded (Clinger's fast path). nil for anything else, which `strtod` then reads.
    /// `bytes` is a number token, so its grammar is already checked.
    @inline(__always)
    static func shortDecimal(_ b: UnsafeBufferPointer<UInt8>) -> Double? {
        var i = 0
        let negative = b.count > 0 && b[0] == UInt8(ascii: "-")
        if negative { i = 1 }
        var mantissa: UInt64 = 0
        var digits = 0
        var fraction = -1
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: ".") {
                fraction = 0
            } else {
                let d = c &- UInt8(ascii: "0")
                guard d < 10 else { return nil }  // an exponent
                mantissa = mantissa &* 10 &+ UInt64(d)
                digits += 1
                if fraction >= 0 { fraction += 1 }
            }
            i += 1
        }
        guard digits > 0, digits <= 15 else { return nil }
        let value = Double(mantissa) / powersOfTen[max(0, fraction)]
        return negative ? -value : value
    }

    /// A number token written as an integer (no fraction, no exponent) that fits in Int64.
    func int64(_ index: Int) -> Int64? {
        let t = tape[index]
        guard t.flags & JSONToken.integer != 0 else { return nil }
        var i = Int(t.start)
        let end = Int(t.end)
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        // Accumulate negatively so that Int64.min parses.
        var value: Int64 = 0
        while i < end {
            let digit = Int64(bytes[i] &- UInt8(ascii: "0"))
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.subtractingReportingOverflow(digit)
            if o1 || o2 { return nil }
            value = s
            i += 1
        }
        if negative { return value }
        return value == Int64.min ? nil : -value
    }

    /// Copies the value at `index` to `out` without the whitespace between tokens, so that a log
    /// received pretty-printed can still be served as one JSON line.
    func appendMinified(_ index: Int, to out: inout [UInt8]) {
        let t = tape[index]
        let start = t.kind == .string ? Int(t.start) - 1 : Int(t.start)
        let end = t.kind == .string ? Int(t.end) + 1 : Int(t.end)
        let value = UnsafeBufferPointer(rebasing: bytes[start..<end])
        if !tape.hasInnerWhitespace {
            out.append(contentsOf: value)
            return
        }
        Self.appendMinified(value, to: &out)
    }

    /// Copies JSON `bytes` to `out` without the whitespace outside strings; they must already have parsed (the
    /// server minifies a stored log this way when it is read back).
    static func appendMinified(_ bytes: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        out.reserveCapacity(out.count + bytes.count)
        var inString = false
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if inString {
                out.append(b)
                if b == UInt8(ascii: "\\") {
                    out.append(bytes[i + 1])
                    i += 2
                    continue
                }
                if b == UInt8(ascii: "\"") { inString = false }
            } else if b == UInt8(ascii: "\"") {
                inString = true
                out.append(b)
            } else if !(b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09) {
                out.append(b)
            }
            i += 1
        }
    }

    /// Decodes JSON string escapes; the parser has already checked them, surrogate pairs included.
    static func unescape(_ raw: UnsafeBufferPointer<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var i = 0
        func hex(_ at: Int) -> UInt32 {
            var v: UInt32 = 0
            for k in 0..<4 {
                let c = raw[at + k]
                let d: UInt32 = c <= UInt8(ascii: "9") ? UInt32(c &- 48) : UInt32((c | 0x20) &- 87)
                v = v << 4 | d
            }
            return v
        }
        while i < raw.count {
            let b = raw[i]
            guard b == UInt8(ascii: "\\"), i + 1 < raw.count else {
                out.append(b)
                i += 1
                continue
            }
            let e = raw[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                guard i + 4 <= raw.count else { break }
                var scalar = hex(i)
                i += 4
                if (0xD800...0xDBFF).contains(scalar), i + 6 <= raw.count {
                    let low = hex(i + 2)
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                }
                if let s = Unicode.Scalar(scalar) { out.append(contentsOf: String(s).utf8) }
            default: out.append(e)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
