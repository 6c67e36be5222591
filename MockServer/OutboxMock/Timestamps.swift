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
        func digits(_ from: Int, _ n: Int) -> Int? {
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
              let millis = digits(20, 3)
        else { return .badFormat }
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

    /// Parses `8-4-4-4-12` hex digits (either case).
    init?(_ b: UnsafeBufferPointer<UInt8>) {
        guard b.count == 36, b[8] == UInt8(ascii: "-"), b[13] == UInt8(ascii: "-"), b[18] == UInt8(ascii: "-"),
              b[23] == UInt8(ascii: "-") else { return nil }
        // Dashes checked above; the 32 digits are read group by group, with no per-character position test.
        var bad: UInt8 = 0
        @inline(__always) func digits(_ from: Int, _ to: Int, into word: inout UInt64) {
            for i in from..<to {
                let c = b[i]
                let decimal = c &- UInt8(ascii: "0")
                let letter = (c | 0x20) &- UInt8(ascii: "a")
                let isDecimal = decimal < 10
                bad |= (isDecimal || letter < 6) ? 0 : 1
                word = word << 4 | UInt64(isDecimal ? decimal : letter &+ 10)
            }
        }
        var high: UInt64 = 0
        var low: UInt64 = 0
        digits(0, 8, into: &high)
        digits(9, 13, into: &high)
        digits(14, 18, into: &high)
        digits(19, 23, into: &low)
        digits(24, 36, into: &low)
        guard bad == 0 else { return nil }
        self.high = high
        self.low = low
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
