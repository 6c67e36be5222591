import Dispatch
import Foundation
import Testing
@testable import Outbox

/// SPEC K1 and T7 (docs/BEHAVIOUR.md): in a sealed store callers build and seal their logs' payloads
/// (`CallerPayloads`); the loop keeps them only while the stamp and key they were built under are still its own.
struct CallerPayloadsTests {
    static let key = StoreSealTests.keyA

    static func payloadObject(_ log: StoredLog) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(log.payload)) as? [String: Any]) ?? [:]
    }

    /// Runs `work` on the loop, waits for it, and returns its value.
    static func onLoop<T: Sendable>(_ engine: OutboxEngine, _ work: @escaping @Sendable (EngineCore) -> T) async throws -> T {
        let box = LoopResultBox<T>()
        try engine.intake.submit(.task { [core = engine.core] in box.value = work(core) })
        await engine.persisted()
        return try #require(box.value)
    }

    static func sealedEngine(_ dir: TempDirectory) throws -> OutboxEngine {
        var configuration = testConfiguration(dir.file("store.sqlite"))
        configuration.storeKey = key
        return try OutboxEngine(configuration: configuration)
    }

    // SPEC W2, T7: each type's payload begins with its own name (the prefixes are literals, the names raw values).
    @Test func eachTypesPayloadPrefixNamesItsType() {
        for type in LogType.allCases {
            #expect(Array(type.payloadPrefix) == Array(#"{"type":"\#(type.rawValue)","id":""#.utf8))
        }
    }

    // SPEC K1, T7: events tracked from two threads into a sealed store: each payload was sealed by its caller, reads
    // back whole (name, properties, session, user) and is sealed under the store's key in the file. A plain store's
    // callers build nothing.
    @Test func aSealedStoresCallersSealTheirOwnPayloads() async throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let engine = try Self.sealedEngine(dir)
        defer { engine.shutdown() }
        try engine.setUserId("caller-user")
        try engine.startSession()
        await engine.persisted()
        let group = DispatchGroup()
        for thread in 0..<2 {
            group.enter()
            Thread {
                for index in 0..<300 { try? engine.trackEvent("CallerSealed", properties: ["t": .int(Int64(thread)), "i": .int(Int64(index))]) }
                group.leave()
            }.start()
        }
        await withCheckedContinuation { continuation in group.notify(queue: .global()) { continuation.resume() } }
        await engine.persisted()
        let (built, rebuilt) = try await Self.onLoop(engine) { ($0.callerBuiltLogs, $0.rebuiltLogs) }
        #expect(built == 600)
        #expect(rebuilt == 0)
        let all = try await engine.withStore { try $0.allLogs() }
        let logs = all.filter { Self.payloadObject($0)["type"] as? String == "event" }
        #expect(logs.count == 600)
        let sid = try #require(all.compactMap { Self.payloadObject($0)["sid"] as? String }.first)
        var seen = Set<String>()
        for log in logs {
            let object = Self.payloadObject(log)
            #expect(object["name"] as? String == "CallerSealed")
            #expect(object["userId"] as? String == "caller-user")
            #expect(object["sid"] as? String == sid)
            var idText: [UInt8] = []
            log.id.write(into: &idText)
            #expect(object["id"] as? String == String(decoding: idText, as: UTF8.self))
            let values = properties(of: log)
            seen.insert("\(values["t"] ?? "")-\(values["i"] ?? "")")
        }
        #expect(seen.count == 600)
        let keyIDs = try await engine.withStore { store in
            let select = try store.db.prepare("SELECT DISTINCT substr(payload, 1, 5) FROM logs")
            var all: [[UInt8]] = []
            while try select.step() { all.append(select.blob(at: 0)) }
            return all
        }
        #expect(keyIDs == [[StoreSealer.marker] + withUnsafeBytes(of: Self.key.id.bigEndian) { Array($0) }])

        let plainDir = TempDirectory()
        defer { plainDir.remove() }
        let plain = try OutboxEngine(configuration: testConfiguration(plainDir.file("plain.sqlite")))
        defer { plain.shutdown() }
        for index in 0..<10 { try plain.trackEvent("Plain", properties: ["i": .int(Int64(index))]) }
        await plain.persisted()
        #expect(try await Self.onLoop(plain) { $0.callerBuiltLogs + $0.rebuiltLogs } == 0)
    }

    // SPEC T7: a log carries the session and user current in queue order. The loop is held while one thread alternates
    // user changes and events, so every event was built under a stamp that is stale by the time the loop reaches it:
    // each is built again, and each carries the user set just before it.
    @Test func aUserChangeQueuedAheadOfACallersLogStampsIt() async throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let engine = try Self.sealedEngine(dir)
        defer { engine.shutdown() }
        await engine.persisted()
        let (builtBefore, rebuiltBefore) = try await Self.onLoop(engine) { ($0.callerBuiltLogs, $0.rebuiltLogs) }
        let held = DispatchSemaphore(value: 0)
        let holding = DispatchSemaphore(value: 0)
        try engine.intake.submit(.task { holding.signal(); held.wait() })
        holding.wait()
        for index in 0..<40 {
            try engine.setUserId("user-\(index)")
            try engine.trackEvent("Stamped", properties: ["i": .int(Int64(index))])
        }
        held.signal()
        await engine.persisted()
        let (built, rebuilt) = try await Self.onLoop(engine) { ($0.callerBuiltLogs, $0.rebuiltLogs) }
        #expect(rebuilt - rebuiltBefore == 40)
        #expect(built == builtBefore)
        let logs = try await engine.withStore { try $0.allLogs() }.filter { Self.payloadObject($0)["name"] as? String == "Stamped" }
        #expect(logs.count == 40)
        for log in logs {
            let index = try #require(properties(of: log)["i"] as? Int)
            #expect(Self.payloadObject(log)["userId"] as? String == "user-\(index)")
        }
    }

    // SPEC K1, R8: a log its caller sealed under the current key goes in as it is; one sealed under the key a rotation
    // is replacing (kept for a retry while the rotation began) is sealed again under the new key. Both read back.
    @Test func aCallersSealedLogGoesInAsItIsOrUnderTheNewKey() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let store = try Fixture.open(path, limits: StoreSealTests.sealed(Self.key))
        defer { store.close() }
        let sealerA = try StoreSealer(Self.key)
        func presealed(_ ordinal: Int, by sealer: StoreSealer) throws -> NewLog {
            var log = Fixture.log(ordinal)
            log.payload = try sealer.seal(log.payload, .log(log.id))
            log.sealedUnder = sealer.keyID
            return log
        }
        let first = try presealed(1, by: sealerA)
        _ = try store.append([first, Fixture.log(2)], newEventNames: [])
        let stored = try store.db.prepare("SELECT payload FROM logs ORDER BY seq LIMIT 1")
        #expect(try stored.step())
        #expect(stored.blob(at: 0) == first.payload)
        stored.reset()

        try store.beginRotation(to: StoreSealTests.keyB)
        _ = try store.append([try presealed(3, by: sealerA)], newEventNames: [])
        let last = try store.db.prepare("SELECT substr(payload, 2, 4) FROM logs ORDER BY seq DESC LIMIT 1")
        #expect(try last.step())
        #expect(last.blob(at: 0) == withUnsafeBytes(of: StoreSealTests.keyB.id.bigEndian) { Array($0) })
        last.reset()
        while try !store.rotateStep(limit: 100) {}
        #expect(try store.allLogs().map(\.payload) == [1, 2, 3].map { Fixture.log($0).payload })
    }
}
