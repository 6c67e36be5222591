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
    case meta(String)

    func append(to aad: inout [UInt8]) {
        switch self {
        case .log(let id), .reason(let id):
            let tag: UInt8 = if case .log = self { UInt8(ascii: "L") } else { UInt8(ascii: "R") }
            aad.append(tag)
            withUnsafeBytes(of: (id.high.bigEndian, id.low.bigEndian)) { aad.append(contentsOf: $0) }
        case .context(let id):
            aad.append(UInt8(ascii: "C"))
            withUnsafeBytes(of: id.bigEndian) { aad.append(contentsOf: $0) }
        case .meta(let key):
            aad.append(UInt8(ascii: "M"))
            aad.append(contentsOf: key.utf8)
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
    /// The additional data of the value being sealed or opened, reused.
    private var aad: [UInt8] = []
    /// `sealIntoScratch`'s output, reused.
    private var scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 16)

    init(_ key: StoreKey) throws(OutboxError) {
        guard let handle = key.bytes.withUnsafeBufferPointer({ outbox_sealer_new($0.baseAddress) }) else {
            throw .storage(code: 1, message: "libcrypto could not set up AES-256-GCM for the store key")
        }
        self.handle = handle
        keyID = key.id
        aad.reserveCapacity(64)
    }

    deinit {
        outbox_sealer_free(handle)
        scratch.deallocate()
    }

    /// The additional data of `slot`: the header the sealed value begins with, then the slot.
    private func prepareAAD(_ slot: SealSlot) {
        aad.removeAll(keepingCapacity: true)
        aad.append(Self.marker)
        withUnsafeBytes(of: keyID.bigEndian) { aad.append(contentsOf: $0) }
        slot.append(to: &aad)
    }

    /// A sealed copy of `plain` (values written now and then: dead letters, meta, a rotation's rows).
    func seal(_ plain: [UInt8], _ slot: SealSlot) throws(OutboxError) -> [UInt8] {
        Array(try sealIntoScratch(plain, slot))
    }

    /// `seal` into the sealer's own buffer, for a caller that copies the result at once (a statement's bind): no
    /// allocation per row on the commit path. The bytes are valid until the next call.
    func sealIntoScratch(_ plain: [UInt8], _ slot: SealSlot) throws(OutboxError) -> UnsafeRawBufferPointer {
        prepareAAD(slot)
        let count = plain.count + Self.overhead
        if scratch.count < count {
            scratch.deallocate()
            scratch = .allocate(byteCount: max(count, 2 * scratch.count), alignment: 16)
        }
        guard let out = scratch.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw .storage(code: 1, message: "no buffer to seal a value of the store into")
        }
        for index in 0..<Self.headerCount { out[index] = aad[index] }
        let failed = plain.withUnsafeBufferPointer { plain in
            aad.withUnsafeBufferPointer { aad in
                outbox_seal(handle, aad.baseAddress, aad.count, plain.baseAddress, plain.count, out + Self.headerCount) != 0
            }
        }
        if failed { throw .storage(code: 1, message: "libcrypto could not seal a value of the store") }
        return UnsafeRawBufferPointer(start: out, count: count)
    }

    /// The plaintext, or nil when `sealed` is not this key's or does not verify (altered, moved, truncated).
    func open(_ sealed: UnsafeRawBufferPointer, _ slot: SealSlot) -> [UInt8]? {
        guard Self.keyID(of: sealed) == keyID else { return nil }
        prepareAAD(slot)
        let count = sealed.count - Self.overhead
        var failed = false
        let plain = [UInt8](unsafeUninitializedCapacity: count) { out, initialized in
            let body = sealed.baseAddress.map { ($0 + Self.headerCount).assumingMemoryBound(to: UInt8.self) }
            failed = aad.withUnsafeBufferPointer { aad in
                outbox_unseal(handle, aad.baseAddress, aad.count, body, sealed.count - Self.headerCount, out.baseAddress) != 0
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
