import Glibc

/// Random version-4 UUIDs (and time-ordered version-7 ones) from a xoshiro256** generator seeded by the kernel. Log ids need uniqueness, not
/// secrecy, and `SystemRandomNumberGenerator` costs a system call per 8 bytes on Linux.
/// Not thread-safe: the loop thread owns one.
struct IDGenerator: RandomNumberGenerator {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    init() {
        // Seeded once from the kernel (getrandom through the standard library); cheap thereafter.
        var system = SystemRandomNumberGenerator()
        state = (system.next(), system.next(), system.next(), system.next())
        if state == (0, 0, 0, 0) { state.0 = 1 }
    }

    init(seed: UInt64) {
        var splitmix = seed
        func next() -> UInt64 {
            splitmix &+= 0x9E37_79B9_7F4A_7C15
            var z = splitmix
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        state = (next(), next(), next(), next())
    }

    mutating func next() -> UInt64 {
        let result = ((state.1 &* 5) << 7 | (state.1 &* 5) >> 57) &* 9
        let t = state.1 << 17
        state.2 ^= state.0
        state.3 ^= state.1
        state.1 ^= state.2
        state.0 ^= state.3
        state.2 ^= t
        state.3 = (state.3 << 45) | (state.3 >> 19)
        return result
    }

    /// SPEC D3: a version-7 UUID — the first 48 bits the Unix time in milliseconds, then random bits — for session
    /// ids, which PostHog requires time-ordered. It draws as many random words as `uuid()`, so the ids that follow
    /// are the same as before with a seeded generator.
    mutating func uuidV7(unixMs: Int64) -> UUIDBytes {
        var high = next()
        var low = next()
        high = UInt64(UInt64(truncatingIfNeeded: max(0, unixMs)) & 0xFFFF_FFFF_FFFF) << 16 | (high & 0x0FFF) | 0x7000
        low = (low & ~(0xC << 60)) | (0x8 << 60)    // RFC 9562 variant
        return UUIDBytes(high: high, low: low)
    }

    mutating func uuid() -> UUIDBytes {
        var high = next()
        var low = next()
        high = (high & ~0xF000) | 0x4000            // version 4
        low = (low & ~(0xC << 60)) | (0x8 << 60)    // RFC 4122 variant
        return UUIDBytes(high: high, low: low)
    }
}

extension UUIDBytes {
    /// Bytes of the canonical text form.
    static let textLength = 36

    /// Appends the canonical lower-case `8-4-4-4-12` form.
    func write(into bytes: inout [UInt8]) {
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "-"), count: Self.textLength))
        bytes.withUnsafeMutableBufferPointer { out in
            if let base = out.baseAddress { write(to: base + start) }
        }
    }

    /// Writes the canonical lower-case `8-4-4-4-12` form, `textLength` bytes, at `start`: two hex digits per byte
    /// from one shift and mask each (this runs for every log stored and every log sent).
    func write(to start: UnsafeMutablePointer<UInt8>) {
        var position = start
        for index in 0..<16 {
            if index == 4 || index == 6 || index == 8 || index == 10 {
                position.initialize(to: UInt8(ascii: "-"))
                position += 1
            }
            let word = index < 8 ? high : low
            let byte = Int(truncatingIfNeeded: word >> (UInt64(7 - index % 8) * 8)) & 0xFF
            position.initialize(to: Self.digit(byte >> 4))
            (position + 1).initialize(to: Self.digit(byte & 0xF))
            position += 2
        }
    }

    @inline(__always) private static func digit(_ nibble: Int) -> UInt8 {
        UInt8(truncatingIfNeeded: nibble < 10 ? 0x30 + nibble : 0x57 + nibble)
    }

    var string: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(36)
        write(into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Parses the canonical form (either case); nil for anything else.
    init?(string: String) {
        self.init(utf8: string.utf8)
    }

    /// Parses the canonical form from its UTF-8 bytes (either case); nil for anything else.
    init?<Bytes: Collection<UInt8>>(utf8: Bytes) {
        var high: UInt64 = 0, low: UInt64 = 0, nibbles = 0
        for (position, char) in utf8.enumerated() {
            if position == 8 || position == 13 || position == 18 || position == 23 {
                guard char == UInt8(ascii: "-") else { return nil }
                continue
            }
            let value: UInt8
            switch char {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = char - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = char - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = char - UInt8(ascii: "A") + 10
            default: return nil
            }
            if nibbles < 16 { high = high << 4 | UInt64(value) } else { low = low << 4 | UInt64(value) }
            nibbles += 1
        }
        guard nibbles == 32, utf8.count == 36 else { return nil }
        self.init(high: high, low: low)
    }
}
