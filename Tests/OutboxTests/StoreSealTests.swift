import CStoreSeal
import Foundation
import Testing
@testable import Outbox

/// SPEC K1 (docs/BEHAVIOUR.md): a store sealed under a key — the key file's rules, the sealing itself, a wrong or
/// missing key, a plain store sealed, a key rotated, a sealed row altered on disk.
struct StoreSealTests {
    static let keyA = try! StoreKey(bytes: (0..<32).map { UInt8($0) })
    static let keyB = try! StoreKey(bytes: (0..<32).map { UInt8(255 - $0) })

    static func sealed(_ key: StoreKey = keyA) -> StoreLimits {
        var limits = StoreLimits()
        limits.key = key
        return limits
    }

    /// A log whose payload carries `marker`, so that the file can be searched for it.
    static func markedLog(_ ordinal: Int, marker: String) -> NewLog {
        var log = Fixture.log(ordinal)
        log.payload = Array("{\"i\":\(ordinal),\"name\":\"\(marker)-\(ordinal)\"}".utf8)
        return log
    }

    /// Every byte of the store's files: the database, its WAL, and whatever else starts with its name.
    static func fileBytes(_ path: String) -> Data {
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        var all = Data()
        for file in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where file.hasPrefix(name) {
            all.append(FileManager.default.contents(atPath: directory + "/" + file) ?? Data())
        }
        return all
    }

    /// Flips the lowest bit of byte `index` of one stored value.
    static func flipBit(_ db: Database, table: String, column: String, row: String, at index: Int) throws {
        let select = try db.prepare("SELECT \(column) FROM \(table) WHERE \(row)")
        #expect(try select.step())
        var value = select.blob(at: 0)
        select.reset()
        value[index] ^= 0x01
        try db.execute("UPDATE \(table) SET \(column) = ? WHERE \(row)", [.blob(value)])
    }

    static func contains(_ path: String, _ text: String) -> Bool {
        fileBytes(path).range(of: Data(text.utf8)) != nil
    }

    // MARK: The key file

    @Test func aKeyFileHoldsThirtyTwoRawBytesOrSixtyFourHexDigits() throws {
        let raw = Array((0..<32).map { UInt8($0 * 7 & 0xFF) })
        #expect(try StoreKey.parse(raw[...], path: "k").bytes == raw)
        let hex = raw.map { String(format: "%02x", $0) }.joined()
        #expect(try StoreKey.parse(Array(hex.utf8)[...], path: "k").bytes == raw)
        #expect(try StoreKey.parse(Array((hex.uppercased() + "\n").utf8)[...], path: "k").bytes == raw)
        // Two newlines, a space, 31 or 33 bytes, a letter that is not hex: each refused, saying what the file must hold.
        for bad in [hex + "\n\n", hex + " ", String(hex.dropLast()) + "g"] {
            #expect(throws: OutboxError.self) { try StoreKey.parse(Array(bad.utf8)[...], path: "k") }
        }
        for count in [0, 31, 33, 63] {
            let error = #expect(throws: OutboxError.self) { try StoreKey.parse([UInt8](repeating: 0x41, count: count)[...], path: "/k") }
            #expect(error?.description.contains("/k holds \(count) bytes") == true)
        }
        let nonHex = #expect(throws: OutboxError.self) { try StoreKey.parse(Array(String(repeating: "z", count: 64).utf8)[...], path: "/k") }
        #expect(nonHex?.description.contains("not all hex digits") == true)
    }

    @Test func aKeyFileReadableByOthersOrMissingIsRefusedNamingIt() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.key")
        let hex = String(repeating: "ab", count: 32) + "\n"
        FileManager.default.createFile(atPath: path, contents: Data(hex.utf8), attributes: [.posixPermissions: 0o640])
        let open = #expect(throws: OutboxError.self) { try StoreKey(contentsOfFile: path) }
        #expect(open?.description.contains("readable by its group or others (mode 640)") == true)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        let key = try StoreKey(contentsOfFile: path)
        #expect(key.bytes == [UInt8](repeating: 0xAB, count: 32))
        // The description names the key by its id, never by its bytes.
        #expect(!key.description.lowercased().contains("abab"))
        let missing = #expect(throws: OutboxError.self) { try StoreKey(contentsOfFile: dir.file("absent.key")) }
        #expect(missing?.description.contains("absent.key: cannot open it") == true)
        let directory = #expect(throws: OutboxError.self) { try StoreKey(contentsOfFile: dir.path) }
        #expect(directory?.description.contains("is not a regular file") == true)
    }

    // MARK: Sealing

    @Test func aSealedValueOpensOnlyWithItsKeyAndSlot() throws {
        let sealer = try StoreSealer(Self.keyA)
        let id = UUIDBytes(high: 1, low: 2)
        let plain = Array("{\"name\":\"secret\"}".utf8)
        let sealed = try sealer.seal(plain, .log(id))
        #expect(sealed.count == plain.count + StoreSealer.overhead)
        #expect(sealed.withUnsafeBytes { sealer.open($0, .log(id)) } == plain)
        // Another slot (a payload copied into another row), another key, one bit flipped: none opens.
        #expect(sealed.withUnsafeBytes { sealer.open($0, .log(UUIDBytes(high: 1, low: 3))) } == nil)
        #expect(sealed.withUnsafeBytes { sealer.open($0, .reason(id)) } == nil)
        #expect(try sealed.withUnsafeBytes { try StoreSealer(Self.keyB).open($0, .log(id)) } == nil)
        for index in [0, 5, 20, sealed.count - 1] {
            var altered = sealed
            altered[index] ^= 0x01
            #expect(altered.withUnsafeBytes { sealer.open($0, .log(id)) } == nil)
        }
        // Two seals of one value differ (a fresh nonce each).
        #expect(try sealer.seal(plain, .log(id)) != sealed)
    }

    // SPEC K1: the sealer calls libcrypto's AES-256-GCM provider directly (EVP's calls cost more per row); what it
    // writes is what EVP writes: each way opens the other's values, of every length around a block, and neither opens
    // one altered or under other additional data.
    @Test func theProviderCallsAndEVPSealAndOpenAlike() throws {
        let key = Self.keyA.bytes
        let direct = try #require(outbox_sealer_new(key))
        let evp = try #require(outbox_sealer_new_via(key, 1))
        defer { outbox_sealer_free(direct); outbox_sealer_free(evp) }
        // Debian's libcrypto offers the provider's functions: without them every seal would take the slower way.
        #expect(outbox_sealer_is_direct(direct) == 1)
        #expect(outbox_sealer_is_direct(evp) == 0)
        let aad = Array("additional".utf8), other = Array("Additional".utf8)
        let overhead = Int(OUTBOX_SEAL_OVERHEAD)
        for count in [0, 1, 15, 16, 17, 300, 5000] {
            let plain = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ count) }
            for (sealer, opener) in [(direct, evp), (evp, direct)] {
                var sealed = [UInt8](repeating: 0, count: count + overhead)
                #expect(outbox_seal(sealer, aad, aad.count, plain, count, &sealed) == 0)
                var opened = [UInt8](repeating: 0, count: count)
                #expect(outbox_unseal(opener, aad, aad.count, sealed, sealed.count, &opened) == 0)
                #expect(opened == plain, "\(count) bytes")
                #expect(outbox_unseal(opener, other, other.count, sealed, sealed.count, &opened) != 0)
                for index in [0, 12, sealed.count - 1] {
                    var altered = sealed
                    altered[index] ^= 0x80
                    #expect(outbox_unseal(opener, aad, aad.count, altered, altered.count, &opened) != 0)
                    #expect(outbox_unseal(sealer, aad, aad.count, altered, altered.count, &opened) != 0)
                }
            }
        }
    }

    // SPEC K1: a commit seals its payloads a run at a time (`StoreSealer.aheadLimit`) before inserting them. Over
    // several runs, one of them holding a value far larger than the rest (the run's buffer grows mid-run), every row
    // reads back as its own payload, and a payload moved to another row does not open there.
    @Test func aCommitOfSeveralRunsSealsEachRowUnderItsOwnID() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let count = 2 * StoreSealer.aheadLimit + 22
        let logs = (1...count).map { Fixture.log($0, payloadBytes: $0 == StoreSealer.aheadLimit + 5 ? 200_000 : 60 + $0) }
        let store = try Fixture.open(path, limits: Self.sealed())
        defer { store.close() }
        _ = try store.append(logs, newEventNames: [])
        let stored = try store.allLogs()
        #expect(stored.map(\.id) == logs.map(\.id))
        #expect(stored.map(\.payload) == logs.map(\.payload))
        let second = try store.db.prepare("SELECT payload FROM logs ORDER BY seq LIMIT 1 OFFSET 1")
        #expect(try second.step())
        let moved = second.blob(at: 0)
        second.reset()
        let keys = try #require(store.keys)
        #expect(keys.open(moved, .log(logs[1].id)) == logs[1].payload)
        #expect(keys.open(moved, .log(logs[0].id)) == nil)
    }

    // SPEC K1: logs, dead letters and their reasons, device contexts and the user id are unreadable in the file; event
    // names are kept as HMACs, and the T4 guard still counts them across an open.
    @Test func aSealedStoreHoldsNoPlaintextAndReadsBack() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        do {
            let store = try Fixture.open(path, limits: Self.sealed())
            defer { store.close() }
            let context = try store.saveContext(json: Array("{\"model\":\"KioskModelZ\"}".utf8))
            var logs = (1...20).map { Self.markedLog($0, marker: "TopSecretEvent") }
            for index in logs.indices { logs[index].context = context }
            _ = try store.append(logs, newEventNames: ["TopSecretName"])
            try store.setMeta(MetaKey.userID, "user-ZebraQuartz")
            let batch = try #require(try store.claim(limit: 2, nowMs: .max))
            try store.deadLetter(seqs: batch.logs.map(\.seq), status: 400, reason: "ReasonWithSecret")
            #expect(!Self.contains(path, "TopSecret"))
            #expect(!Self.contains(path, "KioskModelZ"))
            #expect(!Self.contains(path, "ZebraQuartz"))
            #expect(!Self.contains(path, "ReasonWithSecret"))
        }
        #expect(!Self.contains(path, "TopSecret"))
        let store = try Fixture.open(path, limits: Self.sealed())
        defer { store.close() }
        #expect(try store.allLogs().count == 18)
        #expect(try store.allLogs().allSatisfy { String(decoding: $0.payload, as: UTF8.self).contains("TopSecretEvent") })
        #expect(try store.meta(MetaKey.userID) == "user-ZebraQuartz")
        #expect(try store.latestContext()?.json == Array("{\"model\":\"KioskModelZ\"}".utf8))
        let letters = try store.deadLetters()
        #expect(letters.count == 2 && letters.allSatisfy { $0.reason == "ReasonWithSecret" && $0.status == 400 })
        #expect(try store.eventNames() == [try #require(store.keys).nameHash("TopSecretName")])
        // SPEC T4 across the open: the stored hash is the name's, and a limit of one name refuses a second one.
        let intake = Intake(enabled: true, names: try store.eventNames(), nameHasher: store.keys?.nameHasher,
                            maxNames: 1, capacity: 100)
        #expect(try intake.admit(name: "TopSecretName", draft: EventDraft(priority: .normal, wallMs: 0, monoNs: 0, body: []),
                                 body: UnsafeRawBufferPointer(start: nil, count: 0), onLoopThread: true) == .accepted)
        #expect(throws: OutboxError.tooManyEventNames(name: "Other", limit: 1)) {
            try intake.admit(name: "Other", draft: EventDraft(priority: .normal, wallMs: 0, monoNs: 0, body: []),
                             body: UnsafeRawBufferPointer(start: nil, count: 0), onLoopThread: true)
        }
    }

    // SPEC K1: a sealed store opened without a key or with another key fails with storeKeyInvalid and is left as it
    // was: not one byte changed, nothing moved aside (S7), nothing created beside it.
    @Test func aWrongOrMissingKeyLeavesTheStoreUntouched() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        do {
            let store = try Fixture.open(path, limits: Self.sealed())
            _ = try store.append([Self.markedLog(1, marker: "Kept")], newEventNames: [])
            store.close()
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        let filesBefore = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        let missing = #expect(throws: OutboxError.self) { try Fixture.open(path) }
        guard case .storeKeyInvalid(_, let reason)? = missing else { Issue.record("got \(String(describing: missing))"); return }
        #expect(reason.contains("the store is sealed"))
        let wrong = #expect(throws: OutboxError.self) { try Fixture.open(path, limits: Self.sealed(Self.keyB)) }
        guard case .storeKeyInvalid(_, let wrongReason)? = wrong else { Issue.record("got \(String(describing: wrong))"); return }
        #expect(wrongReason.contains("is not the store's"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        let filesAfter = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        #expect(filesAfter == filesBefore, "\(filesAfter)")
        // The readers of `outbox status` and `outbox dead-letters` refuse it the same way.
        #expect(throws: OutboxError.self) { try StoreInspector.inspect(path: path) }
        #expect(throws: OutboxError.self) { try LogStore.inspectDeadLetters(path: path, key: Self.keyB, ids: nil) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        // With its key it opens, everything there.
        #expect(try StoreInspector.inspect(path: path, key: Self.keyA).counts.pendingNormal == 1)
        let store = try Fixture.open(path, limits: Self.sealed())
        defer { store.close() }
        #expect(try store.allLogs().count == 1)
    }

    // SPEC K1: a plain store opened with a key is sealed, rows and all, then rebuilt: no plaintext stays in its pages.
    @Test func aPlainStoreGivenAKeyIsSealedAndRebuilt() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        do {
            let store = try Fixture.open(path)
            _ = try store.saveContext(json: Array("{\"model\":\"PlainModelQ\"}".utf8))
            _ = try store.append((1...200).map { Self.markedLog($0, marker: "PlainEvent") }, newEventNames: ["PlainName"])
            try store.setMeta(MetaKey.userID, "user-PlainUser")
            try store.deadLetter(seqs: [1, 2], status: 422, reason: "PlainReason")
            store.close()
        }
        #expect(Self.contains(path, "PlainEvent-150"))
        let store = try Fixture.open(path, limits: Self.sealed())
        #expect(store.rotationPending == false)
        for text in ["PlainEvent", "PlainModelQ", "PlainUser", "PlainReason", "PlainName"] {
            #expect(!Self.contains(path, text), "\(text) is still readable in the store")
        }
        #expect(try store.allLogs().count == 198)
        #expect(try store.deadLetters().map(\.reason) == ["PlainReason", "PlainReason"])
        #expect(try store.meta(MetaKey.userID) == "user-PlainUser")
        #expect(try store.latestContext()?.json == Array("{\"model\":\"PlainModelQ\"}".utf8))
        #expect(try store.eventNames() == [try #require(store.keys).nameHash("PlainName")])
        store.close()
        #expect(throws: OutboxError.self) { try Fixture.open(path) }
    }

    // SPEC K1, R8: a rotation seals every row again under the new key in small steps, while the store is used; rows
    // of both keys read meanwhile; the old key is kept, sealed, until the end; then only the new key opens the store.
    @Test func aRotationSealsEveryRowAgainStepByStep() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path, limits: Self.sealed())
        _ = try store.saveContext(json: Array("{\"model\":\"M\"}".utf8))
        _ = try store.append((1...600).map { Self.markedLog($0, marker: "Rot") }, newEventNames: ["RotName"])
        try store.setMeta(MetaKey.userID, "rot-user")
        try store.deadLetter(seqs: [1], status: 400, reason: "why")
        let nameHash = try #require(store.keys).nameHash("RotName")

        try store.beginRotation(to: Self.keyB)
        #expect(store.rotationPending)
        #expect(try store.metaTable.bytes(.previousKey) != nil)
        var steps = 0
        // Appends and claims between the steps: new rows go under the new key, old ones still open.
        while try !store.rotateStep(limit: 100) {
            steps += 1
            if steps == 2 {
                _ = try store.append([Self.markedLog(1000, marker: "Rot")], newEventNames: [])
                let batch = try #require(try store.claim(limit: 500, nowMs: .max))
                #expect(batch.logs.count == 500)
                try store.release(batchID: batch.batchID, nextAttemptMs: 0)
            }
        }
        #expect(steps >= 6)
        #expect(!store.rotationPending)
        #expect(try store.metaTable.bytes(.previousKey) == nil)
        let keyIDs = try store.db.prepare("SELECT DISTINCT substr(payload, 2, 4) FROM logs")
        var ids: [[UInt8]] = []
        while try keyIDs.step() { ids.append(keyIDs.blob(at: 0)) }
        #expect(ids == [withUnsafeBytes(of: Self.keyB.id.bigEndian) { Array($0) }])
        store.close()

        #expect(throws: OutboxError.self) { try Fixture.open(path, limits: Self.sealed(Self.keyA)) }
        let reopened = try Fixture.open(path, limits: Self.sealed(Self.keyB))
        defer { reopened.close() }
        #expect(try reopened.allLogs().count == 600)
        #expect(try reopened.meta(MetaKey.userID) == "rot-user")
        #expect(try reopened.deadLetters().map(\.reason) == ["why"])
        #expect(try reopened.latestContext()?.json == Array("{\"model\":\"M\"}".utf8))
        // The name key was sealed again, not replaced: the stored names still match.
        #expect(try reopened.eventNames() == [nameHash])
    }

    // SPEC K1: a rotation stopped half-way (the process killed) goes on at the next open with the new key; the old
    // key no longer opens the store.
    @Test func aRotationCutShortResumesWithTheNewKey() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        do {
            let store = try Fixture.open(path, limits: Self.sealed())
            _ = try store.append((1...300).map { Self.markedLog($0, marker: "Cut") }, newEventNames: [])
            try store.beginRotation(to: Self.keyB)
            #expect(try !store.rotateStep(limit: 100))
            store.close()
        }
        #expect(throws: OutboxError.self) { try Fixture.open(path, limits: Self.sealed(Self.keyA)) }
        let store = try Fixture.open(path, limits: Self.sealed(Self.keyB))
        defer { store.close() }
        #expect(store.rotationPending)
        #expect(try store.allLogs().count == 300)
        while try !store.rotateStep() {}
        #expect(try store.allLogs().count == 300)
        #expect(try store.metaTable.bytes(.previousKey) == nil)
    }

    // SPEC K1: a sealed row altered on disk fails GCM's tag: the claim reports it, counts it and deletes it; the rows
    // around it are delivered. Nothing crashes, nothing is skipped silently.
    @Test func anAlteredSealedRowIsCountedAndTheRestDelivered() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let (logger, box) = RecordingLogHandler.make()
        let store = try Fixture.open(path, limits: Self.sealed(), logger: logger)
        defer { store.close() }
        _ = try store.append((1...5).map { Self.markedLog($0, marker: "Alt") }, newEventNames: [])
        // One bit of row 3's ciphertext flipped, as a disk or an attacker would.
        try Self.flipBit(store.db, table: "logs", column: "payload", row: "seq = 3", at: 30)
        let batch = try #require(try store.claim(limit: 10, nowMs: .max))
        #expect(batch.logs.map(\.seq) == [1, 2, 4, 5])
        #expect(store.unreadableTotal == 1)
        #expect(store.logCount == 4)
        #expect(box.all.contains { $0.level == .error && $0.message.contains("did not open") })
        #expect(try store.complete(batchID: batch.batchID) == 4)
        #expect(try store.counts().pendingNormal == 0)
    }

    // SPEC K1: a dead letter whose sealed values do not open is listed as unreadable and stays where it is on requeue.
    @Test func anAlteredDeadLetterIsListedAsUnreadableAndNotRequeued() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path, limits: Self.sealed())
        defer { store.close() }
        _ = try store.append((1...2).map { Self.markedLog($0, marker: "Dl") }, newEventNames: [])
        try store.deadLetter(seqs: [1, 2], status: 400, reason: "bad")
        try Self.flipBit(store.db, table: "dead_letters", column: "payload", row: "log_seq = 1", at: 30)
        let letters = try store.deadLetters()
        #expect(letters.map(\.reason) == [DeadLettersTable.unreadableReason, "bad"])
        let requeue = try store.requeueDeadLetters()
        #expect(requeue.requeued == 1)
        #expect(try store.deadLetters().map(\.reason) == [DeadLettersTable.unreadableReason])
    }
}
