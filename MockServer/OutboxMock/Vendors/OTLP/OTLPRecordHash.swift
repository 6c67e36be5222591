/// The de-duplication hash of an OTLP record (SPEC V3, V4b): FNV-1a with 128 bits, over length-prefixed parts.
///
/// It must be the same in every process and on every run (a mock restarted between a client's attempts still
/// compares keys it printed), which Swift's seeded `Hasher` is not; 128 bits keep accidental collisions out of
/// reach at any volume a test bench sees. Each part is prefixed with its length so that two different splits of
/// the same bytes (resource | scope | record) never hash alike. A value type: the state after the resource and
/// scope is copied once per record instead of hashing them again.
struct OTLPRecordHash {
    private var state: UInt128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d
    private static let prime: UInt128 = 0x0000_0000_0100_0000_0000_0000_0000_013B

    init(domain: String) {
        add(Array(domain.utf8)[...])
    }

    mutating func add(_ part: [UInt8]) {
        add(part[...])
    }

    mutating func add(_ part: ArraySlice<UInt8>) {
        var length = UInt64(part.count)
        for _ in 0..<8 {
            mix(UInt8(truncatingIfNeeded: length))
            length >>= 8
        }
        for byte in part { mix(byte) }
    }

    @inline(__always)
    private mutating func mix(_ byte: UInt8) {
        state ^= UInt128(byte)
        state = state &* Self.prime
    }

    /// 32 lower-case hex digits.
    var hex: String {
        var value = state
        var digits = [UInt8](repeating: UInt8(ascii: "0"), count: 32)
        let alphabet = Array("0123456789abcdef".utf8)
        for i in stride(from: 31, through: 0, by: -1) {
            digits[i] = alphabet[Int(value & 0xF)]
            value >>= 4
        }
        return String(decoding: digits, as: UTF8.self)
    }
}
