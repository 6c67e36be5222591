import Glibc
import Synchronization

/// Event names already admitted (SPEC T4), readable without a lock: a caller whose event name is here skips the
/// set look-up under the intake's lock. Most events reuse a handful of names, and a look-up in a `Set<String>`
/// (hashing the name, comparing it) would be a good part of the time each caller holds the lock.
///
/// A cache in front of the intake's set, which stays the rule: only names the set holds are added, and names are
/// never removed, so a name found here is admitted. A name not found (new, or not added because the table was
/// full) goes to the set under the lock, as before. Lookups compare UTF-8 bytes; a name that equals a known one
/// only under Unicode canonical equivalence misses here and is found in the set.
///
/// Open addressing with linear probing in a table of fixed size that is never more than half full, so that every
/// probe ends at an empty slot. Each slot holds the address of an immutable entry (hash, length, bytes), published
/// with a releasing store once written; entries live as long as the table. Only one thread adds at a time (the
/// intake's lock); any thread may look up.
final class KnownNames: @unchecked Sendable {
    private let slots: UnsafeMutablePointer<Atomic<UInt>>
    private let slotMask: Int
    /// Entries at most: half the slots.
    private let limit: Int
    /// Entries added; under the intake's lock.
    private var stored = 0

    /// `expected`: how many names the engine may hold (the configured limit); the table holds at most 2048.
    init(expected: Int) {
        var slotCount = 16
        while slotCount < 2 * expected && slotCount < 4096 { slotCount *= 2 }
        slots = .allocate(capacity: slotCount)
        for index in 0..<slotCount { (slots + index).initialize(to: Atomic<UInt>(0)) }
        slotMask = slotCount - 1
        limit = slotCount / 2
    }

    deinit {
        for index in 0...slotMask {
            if let entry = UnsafeMutableRawPointer(bitPattern: slots[index].load(ordering: .relaxed)) { entry.deallocate() }
        }
        slots.deinitialize(count: slotMask + 1)
        slots.deallocate()
    }

    /// From any thread.
    func contains(_ name: String) -> Bool {
        name.utf8.withContiguousStorageIfAvailable { find($0, hash: Self.hash($0)).found } ?? false
    }

    /// Under the intake's lock, for a name its set holds. Does nothing once the table is half full.
    func insert(_ name: String) {
        guard stored < limit else { return }
        _ = name.utf8.withContiguousStorageIfAvailable { utf8 in
            let hash = Self.hash(utf8)
            let (found, slot) = find(utf8, hash: hash)
            guard !found else { return }
            let entry = UnsafeMutableRawPointer.allocate(byteCount: 16 + utf8.count, alignment: 8)
            entry.storeBytes(of: hash, as: UInt64.self)
            entry.storeBytes(of: utf8.count, toByteOffset: 8, as: Int.self)
            if let base = utf8.baseAddress { (entry + 16).copyMemory(from: base, byteCount: utf8.count) }
            slots[slot].store(UInt(bitPattern: entry), ordering: .releasing)
            stored += 1
        }
    }

    /// Whether the name is in the table, and else the empty slot where it would go.
    private func find(_ utf8: UnsafeBufferPointer<UInt8>, hash: UInt64) -> (found: Bool, slot: Int) {
        var slot = Int(truncatingIfNeeded: hash) & slotMask
        let bytes = UnsafeRawBufferPointer(utf8)
        while true {
            guard let entry = UnsafeRawPointer(bitPattern: slots[slot].load(ordering: .acquiring)) else { return (false, slot) }
            if entry.load(as: UInt64.self) == hash, entry.load(fromByteOffset: 8, as: Int.self) == bytes.count,
               Self.equal(entry + 16, bytes) {
                return (true, slot)
            }
            slot = (slot + 1) & slotMask
        }
    }

    private static func equal(_ stored: UnsafeRawPointer, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        return memcmp(stored, base, bytes.count) == 0
    }

    /// Eight bytes at a time, each word mixed by a multiply and a shift (not keyed: the names come from the host's
    /// code, and the table's size is fixed).
    static func hash(_ utf8: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var hash = 0x9E37_79B9_7F4A_7C15 ^ UInt64(utf8.count)
        guard let base = utf8.baseAddress else { return hash }
        let raw = UnsafeRawPointer(base)
        var index = 0
        while index &+ 8 <= utf8.count {
            hash = (hash ^ raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) &* 0xFF51_AFD7_ED55_8CCD
            hash ^= hash &>> 32
            index &+= 8
        }
        var tail: UInt64 = 0
        var shift: UInt64 = 0
        while index < utf8.count {
            tail |= UInt64(base[index]) &<< shift
            shift &+= 8
            index &+= 1
        }
        hash = (hash ^ tail) &* 0xC4CE_B9FE_1A85_EC53
        return hash ^ (hash &>> 29)
    }
}
