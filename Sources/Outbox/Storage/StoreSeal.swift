import CStoreSeal

/// Where a sealed value lives: GCM authenticates it with its value (its additional data), so that a value copied into
/// another row or column fails to open instead of reading as that row's.
enum SealSlot {
    /// `logs.payload` and `dead_letters.payload`, by the log's id.
    case log(UUIDBytes)
    /// `dead_letters.reason`, by the log's id.
    case reason(UUIDBytes)
    /// `contexts.json`, by the version's id.
    case context(Int64)
    /// A `meta` value, by its key.
    case meta(MetaKey)

    /// Calls `body` with the additional data of a value in this slot: the header a sealed value begins with
    /// (`StoreSealer.marker`, `keyID`), then the slot. On the stack, but for a meta key.
    func withAdditionalData<R>(keyID: UInt32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let tag: UInt8, first: UInt64, second: UInt64?
        switch self {
        case .log(let id): (tag, first, second) = (UInt8(ascii: "L"), id.high, id.low)
        case .reason(let id): (tag, first, second) = (UInt8(ascii: "R"), id.high, id.low)
        case .context(let id): (tag, first, second) = (UInt8(ascii: "C"), UInt64(bitPattern: id), nil)
        case .meta(let key):
            return withUnsafeBytes(of: keyID.bigEndian) { keyID in
                ([StoreSealer.marker] + Array(keyID) + [UInt8(ascii: "M")] + Array(key.rawValue.utf8)).withUnsafeBytes(body)
            }
        }
        let count = 6 + (second == nil ? 8 : 16)
        return withUnsafeTemporaryAllocation(byteCount: count, alignment: 8) { aad in
            aad.storeBytes(of: StoreSealer.marker, toByteOffset: 0, as: UInt8.self)
            aad.storeBytes(of: keyID.bigEndian, toByteOffset: 1, as: UInt32.self)
            aad.storeBytes(of: tag, toByteOffset: 5, as: UInt8.self)
            aad.storeBytes(of: first.bigEndian, toByteOffset: 6, as: UInt64.self)
            if let second { aad.storeBytes(of: second.bigEndian, toByteOffset: 14, as: UInt64.self) }
            return body(UnsafeRawBufferPointer(aad))
        }
    }
}

/// SPEC K1: one key's AES-256-GCM sealing (libcrypto, `CStoreSeal`). A sealed value is
/// `F5 | key id (4 bytes) | nonce (12) | ciphertext | tag (16)`: 33 bytes more than the plaintext. 0xF5 never begins
/// valid UTF-8, so no plain value the store holds (JSON, text) reads as sealed. The header is authenticated too.
/// Not thread-safe: the store's connection's, on its thread.
final class StoreSealer {
    static let marker: UInt8 = 0xF5
    static let headerCount = 5
    static let overhead = headerCount + Int(OUTBOX_SEAL_OVERHEAD)

    let keyID: UInt32
    private let handle: OpaquePointer
    /// `sealAhead`'s buffer, reused.
    private var ahead = UnsafeMutableRawBufferPointer.allocate(byteCount: 0, alignment: 16)

    init(_ key: StoreKey) throws(OutboxError) {
        guard let handle = key.bytes.withUnsafeBufferPointer({ outbox_sealer_new($0.baseAddress) }) else {
            throw .storage(code: 1, message: "libcrypto could not set up AES-256-GCM for the store key")
        }
        self.handle = handle
        keyID = key.id
    }

    deinit {
        outbox_sealer_free(handle)
        ahead.deallocate()
    }

    /// A sealed copy of `plain` (values written now and then: dead letters, meta, a rotation's rows).
    func seal(_ plain: [UInt8], _ slot: SealSlot) throws(OutboxError) -> [UInt8] {
        var sealed = false
        let value = [UInt8](unsafeUninitializedCapacity: plain.count + Self.overhead) { out, initialized in
            sealed = out.baseAddress.map { seal(plain, slot, into: $0) } ?? false
            initialized = sealed ? out.count : 0
        }
        guard sealed else { throw Self.sealFailed }
        return value
    }

    /// How many values `sealAhead` is given at most: enough for libcrypto to stay in the cache from one to the next,
    /// few enough that the buffer stays small (a fleet holds a sealer per open store).
    static let aheadLimit = 64

    /// Values sealed by `sealAhead`, back to back in the sealer's buffer: valid until its next call.
    struct SealedRun {
        let base: UnsafeRawPointer
        let ends: [Int]

        subscript(index: Int) -> UnsafeRawBufferPointer {
            let start = index == 0 ? 0 : ends[index - 1]
            return UnsafeRawBufferPointer(start: base + start, count: ends[index] - start)
        }
    }

    /// Seals the payloads of `logs[i]`, `i` in `indices`, one after the other into the sealer's own buffer. For the
    /// commit, which seals a run of payloads before inserting them: sealed one at a time between SQLite's inserts,
    /// which sweep the b-tree's pages through the cache, the same rows cost the commit measurably more
    /// (BENCHMARKS.md).
    func sealAhead(_ logs: [NewLog], at indices: ArraySlice<Int>) throws(OutboxError) -> SealedRun {
        var buffer = ahead
        // A run of large values does not keep its buffer.
        if buffer.count > 1 << 20 {
            buffer.deallocate()
            buffer = .allocate(byteCount: 0, alignment: 16)
        }
        var ends = [Int]()
        ends.reserveCapacity(indices.count)
        var used = 0
        var sealed = true
        for index in indices where sealed {
            let end = used + logs[index].payload.count + Self.overhead
            if buffer.count < end {
                let grown = UnsafeMutableRawBufferPointer.allocate(byteCount: max(end, 2 * buffer.count), alignment: 16)
                if used > 0 { grown.copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[..<used])) }
                buffer.deallocate()
                buffer = grown
            }
            if let base = buffer.baseAddress {
                sealed = seal(logs[index].payload, .log(logs[index].id), into: (base + used).assumingMemoryBound(to: UInt8.self))
            } else {
                sealed = false
            }
            ends.append(end)
            used = end
        }
        ahead = buffer
        guard sealed, let base = buffer.baseAddress else { throw Self.sealFailed }
        return SealedRun(base: UnsafeRawPointer(base), ends: ends)
    }

    private static let sealFailed = OutboxError.storage(code: 1, message: "libcrypto could not seal a value of the store")

    /// Writes the sealed `plain` (`overhead` bytes more) at `out`; false when libcrypto fails.
    private func seal(_ plain: [UInt8], _ slot: SealSlot, into out: UnsafeMutablePointer<UInt8>) -> Bool {
        plain.withUnsafeBytes { Self.seal($0, slot, keyID: keyID, handle: handle, into: out) }
    }

    /// Seals `plain` with the libcrypto sealer `handle` (`outbox_sealer_new`, under the key `keyID` names) into `out`,
    /// `overhead` bytes more: for a sealer of this type, or a caller's own (`CallerPayloads`).
    static func seal(_ plain: UnsafeRawBufferPointer, _ slot: SealSlot, keyID: UInt32, handle: OpaquePointer,
                     into out: UnsafeMutablePointer<UInt8>) -> Bool {
        slot.withAdditionalData(keyID: keyID) { aad in
            guard let header = aad.baseAddress else { return false }
            UnsafeMutableRawPointer(out).copyMemory(from: header, byteCount: headerCount)
            return outbox_seal(handle, header.assumingMemoryBound(to: UInt8.self), aad.count,
                               plain.baseAddress?.assumingMemoryBound(to: UInt8.self), plain.count, out + headerCount) == 0
        }
    }

    /// The plaintext, or nil when `sealed` is not this key's or does not verify (altered, moved, truncated).
    func open(_ sealed: UnsafeRawBufferPointer, _ slot: SealSlot) -> [UInt8]? {
        guard Self.keyID(of: sealed) == keyID else { return nil }
        let count = sealed.count - Self.overhead
        var failed = false
        let plain = [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
            let body = sealed.baseAddress.map { ($0 + Self.headerCount).assumingMemoryBound(to: UInt8.self) }
            failed = slot.withAdditionalData(keyID: keyID) { aad in
                outbox_unseal(handle, aad.baseAddress?.assumingMemoryBound(to: UInt8.self), aad.count, body,
                              sealed.count - Self.headerCount, out.baseAddress) != 0
            }
            initialized = count
        }
        return failed ? nil : plain
    }

    /// The key id a sealed value carries; nil for a value that is not sealed (or too short to be).
    static func keyID(of value: UnsafeRawBufferPointer) -> UInt32? {
        guard value.count >= overhead, value[0] == marker else { return nil }
        return (1...4).reduce(UInt32(0)) { $0 << 8 | UInt32(value[$1]) }
    }

    static func isSealed(_ value: UnsafeRawBufferPointer) -> Bool { value.first == marker }
}

/// The keys of a sealed store (SPEC K1): the current key's sealer, during a rotation (R8) the previous one — or
/// `.plain` while a plain store is being sealed —, and the event names' HMAC key. Values are sealed under the current
/// key; a value opens under whichever key its id names.
final class StoreKeys {
    enum Previous {
        /// The store was plain: a value that is not sealed is read as it is, until the rotation ends.
        case plain
        case sealed(StoreSealer)
    }

    let key: StoreKey
    let current: StoreSealer
    private(set) var previous: Previous?
    /// SPEC T4 kept under a key: event names are stored as HMAC-SHA-256(nameKey, name). A random key of the store's,
    /// sealed in `meta` under the store key, so that a rotation seals it again and the stored names stay valid.
    let nameKey: [UInt8]

    init(key: StoreKey, previous: Previous?, nameKey: [UInt8]) throws(OutboxError) {
        self.key = key
        current = try StoreSealer(key)
        self.previous = previous
        self.nameKey = nameKey
    }

    func rotationEnded() { previous = nil }

    func seal(_ plain: [UInt8], _ slot: SealSlot) throws(OutboxError) -> [UInt8] {
        try current.seal(plain, slot)
    }

    /// The plaintext of a stored value, or nil when it cannot be read: sealed under a key this store does not hold,
    /// altered on disk, or plain in a store that is sealed (and not being sealed now).
    func open(_ stored: UnsafeRawBufferPointer, _ slot: SealSlot) -> [UInt8]? {
        guard let id = StoreSealer.keyID(of: stored) else {
            if case .plain = previous, !StoreSealer.isSealed(stored) { return Array(stored) }
            return nil
        }
        if id == current.keyID { return current.open(stored, slot) }
        if case .sealed(let old) = previous, id == old.keyID { return old.open(stored, slot) }
        return nil
    }

    func open(_ stored: [UInt8], _ slot: SealSlot) -> [UInt8]? {
        stored.withUnsafeBytes { open($0, slot) }
    }

    /// Whether a stored value is sealed under the current key already (a rotation skips it).
    func isCurrent(_ stored: UnsafeRawBufferPointer) -> Bool {
        StoreSealer.keyID(of: stored) == current.keyID
    }

    /// How `event_names` holds `name`: 64 hex digits.
    func nameHash(_ name: String) -> String { nameHasher.hash(name) }

    var nameHasher: NameHasher { NameHasher(key: nameKey) }
}

/// SPEC T4 in a sealed store (K1): an event name as `event_names` keeps it, HMAC-SHA-256 under the store's name key,
/// in hex. A value, usable on any thread (the intake hashes a name it has not seen in this process).
struct NameHasher: Sendable {
    let key: [UInt8]

    func hash(_ name: String) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var name = name
        name.withUTF8 { utf8 in
            _ = key.withUnsafeBufferPointer { key in
                outbox_hmac_sha256(key.baseAddress, key.count, utf8.baseAddress, utf8.count, &digest)
            }
        }
        let digits = Array("0123456789abcdef".utf8)
        var hex = [UInt8]()
        hex.reserveCapacity(64)
        for byte in digest {
            hex.append(digits[Int(byte >> 4)])
            hex.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: hex, as: UTF8.self)
    }
}
