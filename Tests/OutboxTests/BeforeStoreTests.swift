import Foundation
import Synchronization
import Testing
@_spi(CInterface) @testable import Outbox

/// Every stored log's payload, in storage order, once everything tracked so far is committed.
private func storedLogs(_ engine: OutboxEngine) async throws -> [[String: Any]] {
    await engine.persisted()
    return try await engine.withStore { try $0.allLogs() }.map(payloadObject)
}

private func typedProperties(_ log: [String: Any]) -> [String: Any] {
    var result: [String: Any] = [:]
    for entry in log["typedProperties"] as? [[String: Any]] ?? [] {
        if let name = entry["name"] as? String { result[name] = entry["value"] }
    }
    return result
}

/// What a hook saw, from whichever thread ran it.
private final class Seen: Sendable {
    let events = Mutex<[OutgoingEvent]>([])
    let threads = Mutex<[pthread_t]>([])
    func record(_ event: OutgoingEvent) {
        events.withLock { $0.append(event) }
        threads.withLock { $0.append(pthread_self()) }
    }
    var count: Int { events.withLock { $0.count } }
}

private func engine(_ dir: TempDirectory, _ configure: (inout Configuration) -> Void) throws -> OutboxEngine {
    var configuration = testConfiguration(dir.file())
    configure(&configuration)
    return try OutboxEngine(configuration: configuration)
}

@Suite("The before-store hook on the engine (SPEC H1)")
struct BeforeStoreTests {
    // SPEC H1: the hook renames, adds, changes and removes properties on the caller's thread; the store holds only
    // what it returned.
    @Test func theHookRewritesTheEventOnTheCallersThread() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let seen = Seen()
        let engine = try engine(dir) { configuration in
            configuration.beforeStore = { event in
                seen.record(event)
                if event.name == "signup" { event.name = "sign_up" }
                event.properties["email"] = nil
                event.properties["seats"] = .int(4)
                event.properties["source"] = "hook"
                return true
            }
        }
        defer { engine.shutdown() }
        try engine.trackEvent("signup", properties: ["email": "a@example.com", "plan": "pro", "seats": 3])
        #expect(seen.events.withLock { $0 } == [OutgoingEvent(name: "signup", properties: ["email": "a@example.com", "plan": "pro", "seats": 3])])
        #expect(seen.threads.withLock { $0 }.allSatisfy { pthread_equal($0, pthread_self()) != 0 })
        let logs = try await storedLogs(engine)
        try #require(logs.count == 1)
        #expect(logs[0]["name"] as? String == "sign_up")
        let properties = typedProperties(logs[0])
        #expect(properties["email"] == nil)
        #expect(properties["plan"] as? String == "pro")
        #expect(properties["seats"] as? Int == 4)
        #expect(properties["source"] as? String == "hook")
        // SPEC T4: the name admitted is the hook's.
        #expect(try await engine.withStore { try $0.eventNames() } == ["sign_up"])
    }

    // SPEC H1: a dropped event is not stored, the call succeeds, and dropped_by_policy counts it (not while opted out).
    @Test func aDroppedEventIsCountedAndNotStored() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try engine(dir) { $0.beforeStore = { !$0.name.hasPrefix("debug.") } }
        defer { engine.shutdown() }
        try engine.trackEvent("debug.trace", properties: ["x": 1])
        try engine.trackEvent("kept")
        try engine.trackEvent("debug.other", flags: .critical)
        let logs = try await storedLogs(engine)
        #expect(logs.compactMap { $0["name"] as? String } == ["kept"])
        var status = try await engine.status()
        #expect(status.droppedByPolicy == 2)
        #expect(status.stored == 1 && status.rejected == 0)
        #expect(try await engine.withStore { try $0.eventNames() } == ["kept"])
        try engine.setEnabled(false)
        try engine.trackEvent("debug.while-out")
        status = try await engine.status()
        #expect(status.droppedByPolicy == 2)
        // After shutdown a dropped event is refused as any call is.
        engine.shutdown()
        #expect(throws: OutboxError.shutDown) { try engine.trackEvent("debug.late") }
    }

    // SPEC H1, T2–T4: what the hook returns is validated as any event; a refusal is the call's error.
    @Test func whatTheHookReturnsIsValidatedAsAnyEvent() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try engine(dir) { configuration in
            configuration.maxDistinctEventNames = 2
            configuration.beforeStore = { event in
                switch event.name {
                case "blank": event.name = ""
                case "nan": event.properties["ratio"] = .double(.nan)
                case "long": event.name = String(repeating: "n", count: 300); event.properties["k"] = .string(String(repeating: "v", count: 200))
                default: event.name = "renamed-\(event.name)"
                }
                return true
            }
        }
        defer { engine.shutdown() }
        #expect(throws: OutboxError.emptyEventName) { try engine.trackEvent("blank") }
        #expect(throws: OutboxError.invalidPropertyValue(key: "ratio", reason: "NaN is not a number JSON can carry")) {
            try engine.trackEvent("nan")
        }
        // T2–T3: cut, not refused.
        try engine.trackEvent("long")
        // T4 counts the names after the hook: "long" became a 256-character name, "a" becomes "renamed-a"; a third is refused.
        try engine.trackEvent("a")
        try engine.trackEvent("a")
        #expect(throws: OutboxError.tooManyEventNames(name: "renamed-b", limit: 2)) { try engine.trackEvent("b") }
        let logs = try await storedLogs(engine)
        #expect(logs.compactMap { $0["name"] as? String } == [String(repeating: "n", count: 256), "renamed-a", "renamed-a"])
        #expect((typedProperties(logs[0])["k"] as? String)?.count == 125)
        let status = try await engine.status()
        #expect(status.stored == 3 && status.droppedByPolicy == 0)
    }

    // SPEC H1: T4 counts the name after the hook, so callers' many names folded into one pass a limit of one.
    @Test func namesFoldedByTheHookCountOnce() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try engine(dir) { configuration in
            configuration.maxDistinctEventNames = 1
            configuration.beforeStore = { event in
                event.properties["original"] = .string(event.name)
                event.name = "folded"
                return true
            }
        }
        defer { engine.shutdown() }
        for index in 0..<5 { try engine.trackEvent("name-\(index)") }
        let logs = try await storedLogs(engine)
        #expect(logs.count == 5 && logs.allSatisfy { $0["name"] as? String == "folded" })
        #expect(logs.compactMap { typedProperties($0)["original"] as? String } == (0..<5).map { "name-\($0)" })
    }

    // SPEC H1: the call's own refusals come first — the hook never sees a NaN or an empty name.
    @Test func theCallsOwnRefusalsComeBeforeTheHook() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let seen = Seen()
        let engine = try engine(dir) { configuration in
            configuration.beforeStore = { event in
                seen.record(event)
                event.properties = [:]
                return true
            }
        }
        defer { engine.shutdown() }
        #expect(throws: OutboxError.emptyEventName) { try engine.trackEvent("") }
        #expect(throws: OutboxError.invalidPropertyValue(key: "a", reason: "infinity is not allowed")) {
            try engine.trackEvent("e", properties: ["b": .double(.nan), "a": .double(.infinity)])
        }
        #expect(throws: OutboxError.self) { try engine.trackEvent("e", properties: ["d": .date(Date(timeIntervalSince1970: 1e12))]) }
        #expect(seen.count == 0)
        #expect(try await storedLogs(engine).isEmpty)
    }

    // SPEC H1: timers' ends and the categorised events pass through the hook with what they add; screens, user
    // properties, identify traits and locations do not.
    @Test func whichCallsPassThroughTheHook() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let seen = Seen()
        let engine = try engine(dir) { configuration in
            configuration.beforeStore = { event in
                seen.record(event)
                event.properties["$event_value"] = nil
                return event.name != "drop-timer"
            }
        }
        defer { engine.shutdown() }
        let timer = try engine.trackTimerStart("video")
        try engine.trackTimerEnd(timer, properties: ["title": "Intro"])
        try engine.trackTimerStart("drop-timer")
        try engine.trackTimerEnd("drop-timer")
        try engine.trackEvent("Video>Play", value: "clip-7", duration: .milliseconds(1500))
        try engine.trackEvent("timed", duration: .milliseconds(20))
        try engine.trackScreen(title: "Settings", properties: ["tab": "privacy"])
        try engine.setUserProperties(["plan": "pro"])
        try engine.identify(userId: "u-1", traits: ["company": "acme"])
        try engine.sendLocation(latitude: 1, longitude: 2)
        let events = seen.events.withLock { $0 }
        #expect(events.map(\.name) == ["video", "drop-timer", "Video>Play", "timed"])
        #expect(events[0].properties["title"] == "Intro" && events[0].properties["$event_duration"] != nil)
        #expect(events[2].properties["$event_value"] == "clip-7" && events[2].properties["$event_duration"] == .double(1500))
        #expect(events[3].properties["$event_duration"] == .double(20))
        let logs = try await storedLogs(engine)
        let categorised = try #require(logs.first { $0["name"] as? String == "Video>Play" })
        #expect(typedProperties(categorised)["$event_value"] == nil)
        #expect(logs.contains { $0["type"] as? String == "screen" })
        #expect(try await engine.status().droppedByPolicy == 1)
    }

    // SPEC H1, R8: update sets, replaces and clears the hook, for the calls that start afterwards; a hook set alone
    // touches nothing on the loop, and beside another field it reaches that field's target as before.
    @Test func updateSetsReplacesAndClearsTheHook() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        var configuration = testConfiguration(dir.file())
        configuration.endpoint = "http://127.0.0.1:9"
        configuration.appSecret = "s"
        configuration.dispatchInterval = .zero
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        try engine.trackEvent("one")
        try engine.update { $0.beforeStore = { event in event.name = "first-\(event.name)"; return true } }
        try engine.trackEvent("two")
        #expect(try await CallerPayloadsTests.onLoop(engine) { $0.lastReconfiguration == nil })
        try engine.update { $0.beforeStore = { _ in false } }
        try engine.trackEvent("three")
        // Another field's update keeps the hook (the same box), and changes what it changes.
        try engine.update { $0.appSecret = "rotated" }
        try engine.trackEvent("four")
        let applied = try await CallerPayloadsTests.onLoop(engine) { $0.lastReconfiguration?.targets }
        #expect(applied == .wire)
        try engine.update { $0.beforeStore = nil }
        try engine.trackEvent("five")
        #expect(try await storedLogs(engine).compactMap { $0["name"] as? String } == ["one", "first-two", "five"])
        #expect(try await engine.status().droppedByPolicy == 2)
    }

    // SPEC H1: the configuration's getter gives the hook back; two boxes differ, one box copied does not.
    @Test func theHookIsAChangeableFieldWithoutAKey() throws {
        var configuration = Configuration(storePath: "/tmp/x")
        #expect(configuration.beforeStore == nil)
        configuration.beforeStore = { $0.name != "x" }
        var event = OutgoingEvent(name: "x")
        #expect(configuration.beforeStore?(&event) == false)
        let copy = configuration
        #expect(copy.fixedFieldsChanged(from: configuration).isEmpty)
        #expect(copy.applyTargets(changedFrom: configuration).isEmpty)
        var replaced = configuration
        replaced.beforeStore = { _ in true }
        #expect(replaced.applyTargets(changedFrom: configuration) == .beforeStore)
        #expect(Configuration.changeableFields.contains("beforeStore"))
        #expect(Configuration.schema.first { $0.name == "beforeStore" }?.cKey == nil)
    }

    // SPEC H1: the C interface's path (properties scanned from JSON) runs the same hook, and a hook that throws
    // (C's, refusing a replacement) refuses the call with its error and stores nothing.
    @Test func theCInterfacePathRunsTheHookAndItsRefusals() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try engine(dir) { configuration in
            configuration.setBeforeStore(BeforeStoreHook(throwing: { (event: inout OutgoingEvent) throws(OutboxError) -> Bool in
                if event.name == "refuse" { throw .beforeStoreHook("no") }
                event.properties["secret"] = nil
                return event.name != "drop"
            }))
        }
        defer { engine.shutdown() }
        let properties: [(key: String, value: ScannedPropertyValue)] = [(key: "plan", value: .value(.string("pro"))),
                                                                         (key: "secret", value: .value(.string("s3cr3t")))]
        let results = try properties.withUnsafeBufferPointer { buffer throws -> [Bool] in
            [try engine.trackEvent("kept", sortedProperties: buffer, flags: .normal),
             try engine.trackEvent("drop", sortedProperties: buffer, flags: .normal)]
        }
        #expect(results == [true, true])
        let refusal = properties.withUnsafeBufferPointer { buffer -> OutboxError? in
            do {
                _ = try engine.trackEvent("refuse", sortedProperties: buffer, flags: .normal)
                return nil
            } catch {
                return error as? OutboxError
            }
        }
        #expect(refusal == .beforeStoreHook("no"))
        let logs = try await storedLogs(engine)
        #expect(logs.compactMap { $0["name"] as? String } == ["kept"])
        #expect(typedProperties(logs[0]).keys.sorted() == ["plan"])
        #expect(try await engine.status().droppedByPolicy == 1)
    }
}
