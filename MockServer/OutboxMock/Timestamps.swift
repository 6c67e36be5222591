// Wire timestamps (W2: `YYYY-MM-DDTHH:MM:SS.mmmZ`) and HTTP `Date` headers, without DateFormatter:
// both are on the per-log / per-response path.

enum ISOTimestamp {
    enum ParseResult: Equatable {
        case valid(epochMs: Int64)
        case badFormat
        case notARealDate
    }

    /// Parses exactly `YYYY-MM-DDTHH:MM:SS.mmmZ` (24 bytes, UTC, milliseconds) into epoch milliseconds.
    static func parse(_ b: UnsafeBufferPointer<UInt8>) -> ParseResult {
        guard b.count == 24,
              b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), b[10] == UInt8(ascii: "T"),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"), b[19] == UInt8(ascii: "."),
              b[23] == UInt8(ascii: "Z")
        else { return .badFormat }
        // Every digit is read and checked without a branch per character (SPEC M10: two or more per log).
        var bad: UInt8 = 0
        @inline(__always) func digits(_ from: Int, _ n: Int) -> Int {
            var v = 0
            for i in from..<(from + n) {
                let d = b[i] &- UInt8(ascii: "0")
                bad |= d > 9 ? 1 : 0
                v = v &* 10 &+ Int(d)
            }
            return v
        }
        let year = digits(0, 4), month = digits(5, 2), day = digits(8, 2)
        let hour = digits(11, 2), minute = digits(14, 2), second = digits(17, 2), millis = digits(20, 3)
        guard bad == 0 else { return .badFormat }
        guard year >= 1, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour < 24, minute < 60, second < 60
        else { return .notARealDate }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
        return .valid(epochMs: seconds * 1000 + Int64(millis))
    }

    static func parse(_ text: String) -> ParseResult {
        var text = text
        return text.withUTF8 { parse($0) }
    }

    static func isLeap(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ z0: Int) -> (year: Int, month: Int, day: Int) {
        let z = z0 + 719_468
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

    /// Formats epoch milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
    static func format(epochMs: Int64) -> String {
        let (days, msOfDay) = floorDivMod(epochMs, 86_400_000)
        let (y, mo, d) = civilFromDays(Int(days))
        let h = Int(msOfDay / 3_600_000)
        let mi = Int(msOfDay / 60_000 % 60)
        let s = Int(msOfDay / 1000 % 60)
        let ms = Int(msOfDay % 1000)
        return pad(y, 4) + "-" + pad(mo, 2) + "-" + pad(d, 2) + "T" + pad(h, 2) + ":" + pad(mi, 2) + ":"
            + pad(s, 2) + "." + pad(ms, 3) + "Z"
    }

    static func floorDivMod(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let q = a / b
        let r = a % b
        return r < 0 ? (q - 1, r + b) : (q, r)
    }

    static func pad(_ v: Int, _ width: Int) -> String {
        let s = String(v)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}

enum HTTPDate {
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// RFC 9110 IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func format(epochSeconds: Int64) -> String {
        let (days, secOfDay) = ISOTimestamp.floorDivMod(epochSeconds, 86_400)
        let (y, m, d) = ISOTimestamp.civilFromDays(Int(days))
        let weekday = weekdays[Int(ISOTimestamp.floorDivMod(days, 7).1)]
        let pad = ISOTimestamp.pad
        return "\(weekday), \(pad(d, 2)) \(months[m - 1]) \(pad(y, 4)) \(pad(Int(secOfDay / 3600), 2)):"
            + "\(pad(Int(secOfDay / 60 % 60), 2)):\(pad(Int(secOfDay % 60), 2)) GMT"
    }
}

/// A log or install id: a UUID as 128 bits, so that de-duplication hashes two integers, not a string.
struct UUIDKey: Hashable, Sendable {
    var high: UInt64
    var low: UInt64

    /// Parses `8-4-4-4-12` hex digits (either case). Eight digits at a time (SPEC M10: every log's id and
    /// session id pass through here): the dashes are checked, the groups loaded as 64-bit words, and
    /// `hex8` validates and packs each word without a branch per character.
    init?(_ b: UnsafeBufferPointer<UInt8>) {
        guard b.count == 36, let p = UnsafeRawPointer(b.baseAddress),
              b[8] == UInt8(ascii: "-"), b[13] == UInt8(ascii: "-"), b[18] == UInt8(ascii: "-"),
              b[23] == UInt8(ascii: "-") else { return nil }
        @inline(__always) func word(_ at: Int) -> UInt64 {
            UInt64(littleEndian: p.loadUnaligned(fromByteOffset: at, as: UInt64.self))
        }
        @inline(__always) func half(_ at: Int) -> UInt64 {
            UInt64(UInt32(littleEndian: p.loadUnaligned(fromByteOffset: at, as: UInt32.self)))
        }
        guard let a = Self.hex8(word(0)), let c = Self.hex8(half(9) | half(14) << 32),
              let d = Self.hex8(half(19) | half(24) << 32), let e = Self.hex8(word(28)) else { return nil }
        high = a << 32 | c
        low = d << 32 | e
    }

    /// Eight ASCII hex digits (the first in the lowest byte) as a 32-bit number, or nil if any byte is not
    /// one of 0-9, a-f, A-F.
    @inline(__always)
    static func hex8(_ v: UInt64) -> UInt64? {
        let highs: UInt64 = 0x8080_8080_8080_8080
        guard v & highs == 0 else { return nil }
        // Per byte c < 0x80: c + (0x80 - lo) reaches bit 7 exactly when c >= lo, and no byte carries over.
        let digit = ((v &+ 0x5050_5050_5050_5050) & ~(v &+ 0x4646_4646_4646_4646)) & highs           // 0x30...0x39
        let lower = v | 0x2020_2020_2020_2020
        let letter = ((lower &+ 0x1F1F_1F1F_1F1F_1F1F) & ~(lower &+ 0x1919_1919_1919_1919)) & highs  // a...f, A...F
        guard digit | letter == highs else { return nil }
        // The digit's value: its low nibble, plus 9 for a letter ('a' and 'A' end in 1).
        let nibbles = (v & 0x0F0F_0F0F_0F0F_0F0F) &+ (letter >> 7) &* 9
        // First digit most significant: reverse the bytes, then fold the nibbles together in pairs.
        var x = nibbles.byteSwapped
        x = (x | x >> 4) & 0x00FF_00FF_00FF_00FF
        x = (x | x >> 8) & 0x0000_FFFF_0000_FFFF
        x = (x | x >> 16) & 0xFFFF_FFFF
        return x
    }

    init?(_ text: String) {
        var text = text
        guard let key = text.withUTF8({ UUIDKey($0) }) else { return nil }
        self = key
    }

    /// Lower-case `8-4-4-4-12`.
    var uuidString: String {
        let hex = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(36)
        for i in 0..<32 {
            let word = i < 16 ? high : low
            let shift = UInt64(60 - (i % 16) * 4)
            out.append(hex[Int((word >> shift) & 0xF)])
            if i == 7 || i == 11 || i == 15 || i == 19 { out.append(UInt8(ascii: "-")) }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
