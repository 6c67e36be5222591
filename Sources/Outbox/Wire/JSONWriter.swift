/// Appends JSON to a byte buffer. Made for the shape of our logs: a few short strings and numbers per object.
/// `JSONEncoder` manages ~135k objects/s on this machine; writing bytes directly is an order of magnitude faster
/// and keeps `trackEvent` cheap for the caller.
struct JSONWriter {
    var bytes: [UInt8]

    init(capacity: Int = 256) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    @inline(__always) mutating func raw(_ byte: UInt8) { bytes.append(byte) }

    @inline(__always) mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func raw(_ other: [UInt8]) { bytes.append(contentsOf: other) }

    /// A JSON string literal with the escapes RFC 8259 requires.
    mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") { continue }
                if start < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index])) }
                escape(byte)
                start = index + 1
            }
            if start < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<utf8.count])) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func escape(_ byte: UInt8) {
        bytes.append(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        case 0x08: bytes.append(UInt8(ascii: "b"))
        case 0x0C: bytes.append(UInt8(ascii: "f"))
        default:
            let hex: [UInt8] = Array("0123456789abcdef".utf8)
            bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
        }
    }

    mutating func int(_ value: Int64) {
        if value == 0 { bytes.append(UInt8(ascii: "0")); return }
        var magnitude = value.magnitude
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                buffer[19 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            }
            if value < 0 { bytes.append(UInt8(ascii: "-")) }
            bytes.append(contentsOf: buffer[(20 - count)...])
        }
    }

    /// A finite double in its shortest round-tripping form (callers reject NaN and infinities first).
    mutating func double(_ value: Double) {
        if value.isFinite, value == value.rounded(), abs(value) < 1e15 {
            // Integral doubles keep a fraction so that the server types them as double.
            int(Int64(value))
            raw(".0")
            return
        }
        bytes.append(contentsOf: value.description.utf8)
    }

    mutating func bool(_ value: Bool) { value ? raw("true") : raw("false") }

    /// `2026-11-22T07:33:46.123Z` (SPEC W2).
    mutating func timestamp(ms: Int64) { Timestamp.write(ms: ms, into: &bytes) }
}

/// ISO-8601 UTC timestamps with milliseconds, without Foundation's formatters (which are slow and locale-bound).
enum Timestamp {
    static func write(ms: Int64, into bytes: inout [UInt8]) {
        let (days, msOfDay) = ms.floorDividedAndModulo(86_400_000)
        let (year, month, day) = civil(fromDays: days)
        let seconds = msOfDay / 1000
        bytes.append(UInt8(ascii: "\""))
        digits(year, 4, &bytes); bytes.append(UInt8(ascii: "-"))
        digits(month, 2, &bytes); bytes.append(UInt8(ascii: "-"))
        digits(day, 2, &bytes); bytes.append(UInt8(ascii: "T"))
        digits(seconds / 3600, 2, &bytes); bytes.append(UInt8(ascii: ":"))
        digits(seconds / 60 % 60, 2, &bytes); bytes.append(UInt8(ascii: ":"))
        digits(seconds % 60, 2, &bytes); bytes.append(UInt8(ascii: "."))
        digits(msOfDay % 1000, 3, &bytes); bytes.append(UInt8(ascii: "Z"))
        bytes.append(UInt8(ascii: "\""))
    }

    static func string(ms: Int64) -> String {
        var bytes: [UInt8] = []
        write(ms: ms, into: &bytes)
        return String(decoding: bytes.dropFirst().dropLast(), as: UTF8.self)
    }

    private static func digits(_ value: Int64, _ width: Int, _ bytes: inout [UInt8]) {
        var divisor: Int64 = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: (rest / divisor) % 10))
            rest %= divisor
            divisor /= 10
        }
    }

    /// Howard Hinnant's days-from-civil inverse: proleptic Gregorian date of a day count since 1970-01-01.
    static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let y = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? y + 1 : y, m, d)
    }
}

extension Int64 {
    func floorDividedAndModulo(_ divisor: Int64) -> (Int64, Int64) {
        var quotient = self / divisor
        var remainder = self % divisor
        if remainder < 0 { quotient -= 1; remainder += divisor }
        return (quotient, remainder)
    }
}
