/// The set of App Center log ids seen since start or reset (SPEC M2 de-duplication), built for M10: a flat
/// open-addressing table of 128-bit keys with linear probing. `Set<UUIDKey>` paid for a SipHash seeding and
/// finalisation per insert; here a key is mixed with two multiplications, and a probe usually stays in
/// one cache line. The mix is seeded per process, so that a client cannot choose ids that all collide.
struct UUIDSet {
    /// Power-of-two sized; the all-zero key marks an empty slot (the zero id itself is kept in `hasZero`).
    private var slots: [UUIDKey]
    private var hasZero = false
    private(set) var count = 0
    private let seed: UInt64

    init(minimumCapacity: Int = 0) {
        var size = 64
        while size * 7 / 10 < minimumCapacity { size *= 2 }
        slots = [UUIDKey](repeating: UUIDKey(high: 0, low: 0), count: size)
        seed = UInt64.random(in: 1...UInt64.max) | 1
    }

    @inline(__always)
    private static func hash(_ key: UUIDKey, seed: UInt64) -> Int {
        var h = (key.high ^ seed) &* 0x9E37_79B9_7F4A_7C15
        h = (h ^ (h >> 29) ^ key.low) &* 0xD6E8_FEB8_6659_FD93
        return Int(truncatingIfNeeded: h ^ (h >> 32))
    }

    func contains(_ key: UUIDKey) -> Bool {
        if key.isZero { return hasZero }
        return slots.withUnsafeBufferPointer { s in
            let mask = s.count - 1
            var i = Self.hash(key, seed: seed) & mask
            while true {
                let k = s[i]
                if k == key { return true }
                if k.isZero { return false }
                i = (i + 1) & mask
            }
        }
    }

    /// Reads the slot each key starts its probe at, all of them before any insert: the table is far larger than
    /// the caches, and loads that do not wait for each other overlap their misses, where one insert after
    /// another waits for each miss in turn.
    mutating func warm<S: Sequence>(_ keys: S) where S.Element == UUIDKey {
        let seed = seed
        var sink: UInt64 = 0
        slots.withUnsafeBufferPointer { s in
            let mask = s.count - 1
            for key in keys { sink ^= s[Self.hash(key, seed: seed) & mask].low }
        }
        warmed = sink
    }

    /// Where `warm` leaves what it read, so that the reads are not optimised away.
    private var warmed: UInt64 = 0

    /// Inserts `key`; false when it was already there.
    @discardableResult
    mutating func insert(_ key: UUIDKey) -> Bool {
        if key.isZero {
            guard !hasZero else { return false }
            hasZero = true
            count += 1
            return true
        }
        // Keep the table at most 70 % full: beyond that, linear probing's runs grow quickly.
        if (count + 1) * 10 > slots.count * 7 { grow() }
        let seed = seed
        let inserted = slots.withUnsafeMutableBufferPointer { s -> Bool in
            let mask = s.count - 1
            var i = Self.hash(key, seed: seed) & mask
            while true {
                let k = s[i]
                if k == key { return false }
                if k.isZero {
                    s[i] = key
                    return true
                }
                i = (i + 1) & mask
            }
        }
        if inserted { count += 1 }
        return inserted
    }

    private mutating func grow() {
        let old = slots
        slots = [UUIDKey](repeating: UUIDKey(high: 0, low: 0), count: old.count * 2)
        let seed = seed
        slots.withUnsafeMutableBufferPointer { s in
            let mask = s.count - 1
            for key in old where !key.isZero {
                var i = Self.hash(key, seed: seed) & mask
                while !s[i].isZero { i = (i + 1) & mask }
                s[i] = key
            }
        }
    }
}

extension UUIDKey {
    /// Compared directly rather than with `.zero`, a lazily initialised global, on the probing path.
    @inline(__always) var isZero: Bool { high | low == 0 }
}
