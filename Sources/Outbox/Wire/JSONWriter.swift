import Glibc

/// Appends JSON to a byte buffer. Made for the shape of our logs: a few short strings and numbers per object.
/// `JSONEncoder` manages ~135k objects/s on this machine; writing bytes directly is an order of magnitude faster
/// and keeps `trackEvent` cheap for the caller.
///
/// Writes through a pointer into memory it was given (`init(buffer:)`, the caller's stack for an event) or
/// allocated (`init(capacity:)`), moving to a larger heap buffer when that is full. An `Array` append costs about
/// a hundred instructions of checks (uniqueness, capacity, the generic copy) before its bytes: an event is some
/// thirty appends on the caller's thread. Not copyable: it owns its heap buffer.
struct JSONWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private(set) var count = 0
    private var capacity: Int
    /// Whether `base` was allocated here (and is freed here).
    private var owned: Bool

    init(capacity: Int = 256) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
        owned = true
    }

    /// Writes into `buffer` (which must outlive the writer) until it is full, then into the heap.
    init(buffer: UnsafeMutableBufferPointer<UInt8>) {
        if let start = buffer.baseAddress, buffer.count > 0 {
            base = start
            capacity = buffer.count
            owned = false
        } else {
            capacity = 16
            base = .allocate(capacity: capacity)
            owned = true
        }
    }

    deinit { if owned { base.deallocate() } }

    /// A copy of the bytes written (one memory copy: `Array(UnsafeBufferPointer)` copies element by element).
    var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            if let target = buffer.baseAddress { target.initialize(from: base, count: count) }
            initialized = count
        }
    }

    /// The bytes written, valid until the next write.
    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Room for `count` more bytes: one allocation where the size is known, rather than doubling copies.
    mutating func reserve(_ more: Int) { if capacity - count < more { grow(more) } }

    /// Where the next `more` bytes go; the caller writes them and adds them to `count`.
    @inline(__always) private mutating func space(_ more: Int) -> UnsafeMutablePointer<UInt8> {
        if capacity &- count < more { grow(more) }
        return base + count
    }

    @inline(never) private mutating func grow(_ more: Int) {
        let newCapacity = max(2 * capacity, count + more)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.initialize(from: base, count: count)
        if owned { base.deallocate() }
        base = newBase
        capacity = newCapacity
        owned = true
    }

    @inline(__always) mutating func raw(_ byte: UInt8) {
        space(1).initialize(to: byte)
        count &+= 1
    }

    @inline(__always) mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress else { return }
        UnsafeMutableRawPointer(space(bytes.count)).copyMemory(from: source, byteCount: bytes.count)
        count &+= bytes.count
    }

    @inline(__always) mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { raw(UnsafeRawBufferPointer($0)) }
    }

    mutating func raw(_ other: [UInt8]) { other.withUnsafeBytes { raw($0) } }

    // Protocol Buffers' lengths come before what they measure: `ProtoWriter` writes a message, then its length
    // into the room it kept, moving the message when the length needs more or less room than was kept.

    /// Replaces the written byte at `index`.
    mutating func patch(_ byte: UInt8, at index: Int) {
        guard index >= 0, index < count else { return }
        base[index] = byte
    }

    /// Moves the bytes from `index` on by `shift` (up when positive, down when negative): room opens or closes at
    /// `index`.
    mutating func move(from index: Int, by shift: Int) {
        guard index >= 0, index <= count, index + shift >= 0, shift != 0 else { return }
        if shift > 0 { reserve(shift) }
        memmove(base + index + shift, base + index, count - index)
        count += shift
    }

    /// A JSON string literal with the escapes RFC 8259 requires.
    mutating func string(_ value: String) {
        // In place for native and small strings; `withUTF8` needs a copy of the string (a retain and a release).
        if value.utf8.withContiguousStorageIfAvailable({ string(utf8: $0) }) != nil { return }
        var value = value
        value.withUTF8 { string(utf8: $0) }
    }

    /// A JSON string literal of UTF-8 bytes: the runs that need no escape are appended whole, found eight bytes at a
    /// time (`firstEscape`). Property values are mostly plain text of tens of bytes, and this runs on the caller's
    /// thread for every string of every event.
    mutating func string(utf8: UnsafeBufferPointer<UInt8>) {
        // Both quotes and the text unescaped, in one reservation; escapes reserve their own room.
        reserve(utf8.count + 2)
        raw(UInt8(ascii: "\""))
        if let source = utf8.baseAddress {
            let length = utf8.count
            var start = 0
            while let index = Self.firstEscape(in: source, from: start, count: length) {
                raw(UnsafeRawBufferPointer(start: source + start, count: index - start))
                escape(source[index])
                start = index + 1
            }
            raw(UnsafeRawBufferPointer(start: source + start, count: length - start))
        }
        raw(UInt8(ascii: "\""))
    }

    /// The index of the first byte in `from..<count` that a JSON string must escape (a control byte, `"` or `\`).
    static func firstEscape(in base: UnsafePointer<UInt8>, from: Int, count: Int) -> Int? {
        let raw = UnsafeRawPointer(base)
        var index = from
        // Two words a step: half the loop's own instructions, and the two masks are computed side by side.
        while index &+ 16 <= count {
            let low = escapeMask(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)))
            let high = escapeMask(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index &+ 8, as: UInt64.self)))
            if low | high != 0 {
                return low != 0 ? index &+ low.trailingZeroBitCount &>> 3 : index &+ 8 &+ high.trailingZeroBitCount &>> 3
            }
            index &+= 16
        }
        if index &+ 8 <= count {
            let mask = escapeMask(UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)))
            if mask != 0 { return index &+ mask.trailingZeroBitCount &>> 3 }
            index &+= 8
        }
        let rest = count &- index
        guard rest > 0 else { return nil }
        if count >= 8 {
            // The last word of the string, shifted so that its first byte is `index`: the zero bytes shifted in
            // above the end are flagged, but only above the real bytes, and only the lowest flag is read.
            let last = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self))
            let offset = escapeMask(last &>> UInt64(8 &* (8 &- rest))).trailingZeroBitCount &>> 3
            return offset < rest ? index &+ offset : nil
        }
        while index < count {
            if needsEscape(base[index]) { return index }
            index &+= 1
        }
        return nil
    }

    @inline(__always) static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// The high bit of each byte of `word` (little-endian: byte 0 is the lowest) that `needsEscape`. Exact for the
    /// lowest byte flagged, which is all `firstEscape` reads: a flag above it may be false (the subtractions borrow
    /// out of a matching byte into the next), never one below (nothing borrows below the first match).
    /// Bytes from 0x80 (UTF-8 beyond ASCII) are never flagged: their own high bit masks them out (`& ~word`).
    @inline(__always) static func escapeMask(_ word: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let control = (word &- (0x20 &* ones)) & ~word
        let quotes = word ^ (UInt64(UInt8(ascii: "\"")) &* ones)
        let backslashes = word ^ (UInt64(UInt8(ascii: "\\")) &* ones)
        return (control | ((quotes &- ones) & ~quotes) | ((backslashes &- ones) & ~backslashes)) & highs
    }

    private mutating func escape(_ byte: UInt8) {
        raw(UInt8(ascii: "\\"))
        switch byte {
        case UInt8(ascii: "\""): raw(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): raw(UInt8(ascii: "\\"))
        case 0x0A: raw(UInt8(ascii: "n"))
        case 0x0D: raw(UInt8(ascii: "r"))
        case 0x09: raw(UInt8(ascii: "t"))
        case 0x08: raw(UInt8(ascii: "b"))
        case 0x0C: raw(UInt8(ascii: "f"))
        default:
            raw("u00")
            raw(Self.hexDigit(byte >> 4))
            raw(Self.hexDigit(byte & 0xF))
        }
    }

    @inline(__always) private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    mutating func int(_ value: Int64) {
        if value == 0 { raw(UInt8(ascii: "0")); return }
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
            if value < 0 { raw(UInt8(ascii: "-")) }
            raw(UnsafeRawBufferPointer(rebasing: buffer[(20 - count)...]))
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
        var text = value.description
        text.withUTF8 { raw(UnsafeRawBufferPointer($0)) }
    }

    mutating func bool(_ value: Bool) { value ? raw("true") : raw("false") }

    /// A log or session id in its canonical text form (SPEC T7), without quotes.
    mutating func id(_ id: UUIDBytes) {
        id.write(to: space(UUIDBytes.textLength))
        count &+= UUIDBytes.textLength
    }

    /// `"2026-11-22T07:33:46.123Z"` (SPEC W2), quotes included.
    mutating func timestamp(ms: Int64) {
        Timestamp.write(ms: ms, to: space(Timestamp.quotedLength))
        count &+= Timestamp.quotedLength
    }
}

/// ISO-8601 UTC timestamps with milliseconds, without Foundation's formatters (which are slow and locale-bound).
enum Timestamp {
    /// Bytes of `"yyyy-MM-ddTHH:mm:ss.SSSZ"`, quotes included.
    static let quotedLength = 26

    /// Writes `quotedLength` bytes at `start`.
    static func write(ms: Int64, to start: UnsafeMutablePointer<UInt8>) {
        let (days, msOfDay) = ms.floorDividedAndModulo(86_400_000)
        let (year, month, day) = civil(fromDays: days)
        let seconds = msOfDay / 1000
        var position = start
        position.put(UInt8(ascii: "\""))
        let yearDigits = year % 10_000
        twoDigits(yearDigits / 100, &position); twoDigits(yearDigits % 100, &position); position.put(UInt8(ascii: "-"))
        twoDigits(month, &position); position.put(UInt8(ascii: "-"))
        twoDigits(day, &position); position.put(UInt8(ascii: "T"))
        twoDigits(seconds / 3600, &position); position.put(UInt8(ascii: ":"))
        twoDigits(seconds / 60 % 60, &position); position.put(UInt8(ascii: ":"))
        twoDigits(seconds % 60, &position); position.put(UInt8(ascii: "."))
        let ms = msOfDay % 1000
        position.put(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: ms / 100)); twoDigits(ms % 100, &position)
        position.put(UInt8(ascii: "Z"))
        position.put(UInt8(ascii: "\""))
    }

    /// The timestamp without its quotes.
    static func string(ms: Int64) -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: quotedLength) { buffer in
            guard let start = buffer.baseAddress else { return "" }
            write(ms: ms, to: start)
            return String(decoding: UnsafeBufferPointer(start: start + 1, count: quotedLength - 2), as: UTF8.self)
        }
    }

    /// Writes `value` (0…99) as two digits. Every divisor is a constant, which the compiler turns into a
    /// multiplication: the loop this replaced divided by a variable power of ten, 17 hardware divisions per timestamp.
    @inline(__always) private static func twoDigits(_ value: Int64, _ position: inout UnsafeMutablePointer<UInt8>) {
        let value = UInt8(truncatingIfNeeded: value)
        position.put(UInt8(ascii: "0") &+ value / 10)
        position.put(UInt8(ascii: "0") &+ value % 10)
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

extension UnsafeMutablePointer<UInt8> {
    /// Writes one byte and moves past it.
    @inline(__always) fileprivate mutating func put(_ byte: UInt8) {
        initialize(to: byte)
        self += 1
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
