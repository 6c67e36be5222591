import Foundation
import Testing
@_spi(CInterface) @testable import Outbox

/// An engine on a manual clock (wall and CLOCK_BOOTTIME move only when the test says so).
private func makeEngine(_ dir: TempDirectory, _ clock: ManualClock, _ configure: (inout Configuration) -> Void = { _ in }) throws -> OutboxEngine {
    var configuration = testConfiguration(dir.file())
    configuration.clock = clock
    configuration.sessionTracking = .automatic   // SPEC A1's default (the shared test configuration turns it off)
    configure(&configuration)
    return try OutboxEngine(configuration: configuration)
}

/// Every stored log's payload, in storage order, once everything tracked so far is committed.
private func stored(_ engine: OutboxEngine) async throws -> [[String: Any]] {
    await engine.persisted()
    return try await engine.withStore { try $0.allLogs() }.map(payloadObject)
}

private func typed(_ object: [String: Any], _ key: String = "typedProperties") -> [String: Any] {
    var result: [String: Any] = [:]
    for entry in object[key] as? [[String: Any]] ?? [] {
        if let name = entry["name"] as? String { result[name] = entry["value"] }
    }
    return result
}

private func named(_ logs: [[String: Any]], _ name: String) -> [[String: Any]] {
    logs.filter { $0["name"] as? String == name }
}

private func ofType(_ logs: [[String: Any]], _ type: String) -> [[String: Any]] {
    logs.filter { $0["type"] as? String == type }
}

/// `sid` as stored: a string, or nil for JSON null. Every log must carry the key (SPEC T7).
private func sid(_ log: [String: Any]) -> String? { log["sid"] as? String }

@Suite("Analytics model through the engine (SPEC A1–A10, T7)")
struct AnalyticsEngineTests {
    // SPEC A4: a wall-clock jump of ±1 h while a timer runs leaves its duration unchanged (CLOCK_BOOTTIME).
    @Test(arguments: [Int64(3_600_000), Int64(-3_600_000)])
    func aWallClockJumpDuringATimerLeavesItsDurationUnchanged(jumpMs: Int64) async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        let engine = try makeEngine(dir, clock)
        defer { engine.shutdown() }
        try engine.trackTimerStart("video")
        clock.advance(ms: 2000)
        clock.jumpWall(ms: jumpMs)
        clock.advance(ms: 1500)
        try engine.trackTimerEnd("video", properties: ["title": "Intro"])
        let log = try #require(named(try await stored(engine), "video").first)
        #expect(typed(log)["$event_duration"] as? Double == 3500)
        #expect(typed(log)["title"] as? String == "Intro")
        // `$event_duration` is a typed double (SPEC A4).
        let types = (log["typedProperties"] as? [[String: Any]] ?? []).filter { $0["name"] as? String == "$event_duration" }
        #expect(types.first?["type"] as? String == "double")
    }

    // SPEC A4: paused time and background time are excluded; a timer the user paused stays paused across
    // background/foreground; two timers of one name end independently by id; ending by name ends the latest.
    @Test func timersExcludePausedAndBackgroundTime() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        let engine = try makeEngine(dir, clock)
        defer { engine.shutdown() }
        let first = try engine.trackTimerStart("play")
        clock.advance(ms: 1000)
        let second = try engine.trackTimerStart("play")
        let paused = try engine.trackTimerStart("paused")
        clock.advance(ms: 1000)
        engine.trackTimerPause(paused)                 // ran 1 s
        engine.enterBackground()
        clock.advance(ms: 3_600_000)                   // an hour in the background counts for nobody
        engine.enterForeground()
        clock.advance(ms: 500)
        try engine.trackTimerEnd(first)                // 1 + 1 + 0.5 s
        clock.advance(ms: 500)
        try engine.trackTimerEnd("play")               // the latest "play": second, 1 + 1 s
        try engine.trackTimerEnd(paused)
        let logs = try await stored(engine)
        #expect(named(logs, "play").map { typed($0)["$event_duration"] as? Double } == [2500, 2000])
        #expect(typed(named(logs, "paused")[0])["$event_duration"] as? Double == 1000)
        _ = second
    }

    // SPEC A4: ending a timer that never started tracks the event without a duration.
    @Test func endingATimerThatNeverStartedTracksTheEventWithoutADuration() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try makeEngine(dir, ManualClock())
        defer { engine.shutdown() }
        try engine.trackTimerEnd("never", properties: ["k": 1])
        let log = try #require(named(try await stored(engine), "never").first)
        #expect(typed(log)["$event_duration"] == nil)
        #expect(typed(log)["k"] as? Int == 1)
        #expect(throws: OutboxError.emptyEventName) { try engine.trackTimerStart("") }
    }

    // SPEC E5: whether a session is open, as other threads see it (the C interface refuses to end none): the loop
    // sets it when it starts a session by itself (at start, back after the timeout), the caller's calls at once.
    @Test func whetherASessionIsOpenFollowsTheCallsAndTheLoopsOwnSessions() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        let engine = try makeEngine(dir, clock) { $0.sessionTimeout = .seconds(20) }
        defer { engine.shutdown() }
        await engine.persisted()
        #expect(engine.hasOpenSession, "automatic tracking opened one at start")
        try engine.endSession()
        #expect(!engine.hasOpenSession)
        engine.enterBackground()
        clock.advance(ms: 20_001)
        engine.enterForeground()
        await engine.persisted()
        #expect(engine.hasOpenSession, "back after the timeout: a new one")
        try engine.endSession()
        try engine.startSession()
        #expect(engine.hasOpenSession)
        await engine.persisted()
        #expect(engine.hasOpenSession, "the loop applying the caller's own calls does not undo them")
        let logs = try await stored(engine)
        #expect(ofType(logs, "startSession").count == 3 && ofType(logs, "endSession").count == 2)
    }

    // SPEC A1: a session starts at engine start; back in the foreground just under the timeout keeps it, just over
    // starts a new one with a startSession log; every log carries the sid current at its call (SPEC T7).
    @Test func sessionsRenewOnlyAfterMoreThanTheTimeoutInTheBackground() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        let engine = try makeEngine(dir, clock) { $0.sessionTimeout = .seconds(20) }
        defer { engine.shutdown() }
        try engine.trackEvent("a")
        engine.enterBackground()
        clock.advance(ms: 19_999)
        engine.enterForeground()
        try engine.trackEvent("b")
        engine.enterBackground()
        clock.advance(ms: 20_001)
        try engine.trackEvent("in background")     // still the old session: it ends only when the app comes back
        engine.enterForeground()
        try engine.trackEvent("c")
        let logs = try await stored(engine)
        #expect(logs.allSatisfy { $0.keys.contains("sid") })
        let starts = ofType(logs, "startSession")
        #expect(starts.count == 2)
        let s1 = try #require(sid(starts[0])), s2 = try #require(sid(starts[1]))
        #expect(s1 != s2)
        #expect(logs.first.map { $0["type"] as? String } == "startSession")
        #expect(sid(named(logs, "a")[0]) == s1)
        #expect(sid(named(logs, "b")[0]) == s1)
        #expect(sid(named(logs, "in background")[0]) == s1)
        #expect(sid(named(logs, "c")[0]) == s2)
    }

    // SPEC A2: manual mode: sid = null before the first startSession(), a new id at every call.
    @Test func manualSessionsStartOnlyOnStartSessionWithANewIdEachTime() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        let engine = try makeEngine(dir, clock) { $0.sessionTracking = .manual }
        defer { engine.shutdown() }
        try engine.trackEvent("before")
        engine.enterBackground()
        clock.advance(ms: 3_600_000)
        engine.enterForeground()                   // manual: no automatic session
        try engine.trackEvent("still before")
        try engine.startSession()
        try engine.trackEvent("x")
        try engine.startSession()
        try engine.trackEvent("y")
        let logs = try await stored(engine)
        #expect(named(logs, "before")[0]["sid"] is NSNull)
        #expect(named(logs, "still before")[0]["sid"] is NSNull)
        let starts = ofType(logs, "startSession").compactMap(sid)
        #expect(starts.count == 2 && Set(starts).count == 2)
        #expect(sid(named(logs, "x")[0]) == starts[0])
        #expect(sid(named(logs, "y")[0]) == starts[1])
    }

    // SPEC A3: endSession() sends an endSession log with the session's duration; later logs have sid = null.
    @Test func endSessionSendsItsDuration() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        let engine = try makeEngine(dir, clock)
        defer { engine.shutdown() }
        clock.advance(ms: 90_500)
        clock.jumpWall(ms: -7_200_000)             // the wall clock does not matter
        try engine.endSession()
        try engine.trackEvent("after")
        let logs = try await stored(engine)
        let end = try #require(ofType(logs, "endSession").first)
        #expect(end["durationMs"] as? Double == 90_500)
        #expect(sid(end) == sid(ofType(logs, "startSession")[0]))
        #expect(named(logs, "after")[0]["sid"] is NSNull)
    }

    // SPEC A5: $is_first_time only on the first start of an install, also after restarts; $resume_from_background
    // on foreground; $AppEnd with the foreground stretch, also at shutdown.
    @Test func appStartIsFirstTimeOnlyOnTheInstallsFirstStart() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        var first = try makeEngine(dir, clock) { $0.tracksAppLifecycle = true }
        clock.advance(ms: 4000)
        first.enterBackground()
        clock.advance(ms: 1000)
        first.enterForeground()
        clock.advance(ms: 2500)
        await first.shutdown(drainFor: .zero)
        first = try makeEngine(dir, clock) { $0.tracksAppLifecycle = true }
        defer { first.shutdown() }
        let logs = try await stored(first)
        let starts = named(logs, "$AppStart").map { (typed($0)["$is_first_time"] as? Bool, typed($0)["$resume_from_background"] as? Bool) }
        #expect(starts.count == 3)
        #expect(starts.map(\.0) == [true, false, false])
        #expect(starts.map(\.1) == [false, true, false])
        #expect(named(logs, "$AppEnd").map { typed($0)["$event_duration"] as? Double } == [4000, 2500])
    }

    // SPEC A5: without tracksAppLifecycle nothing of the kind is tracked.
    @Test func appLifecycleEventsAreOffByDefault() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try makeEngine(dir, ManualClock())
        defer { engine.shutdown() }
        engine.enterBackground()
        engine.enterForeground()
        let logs = try await stored(engine)
        #expect(named(logs, "$AppStart").isEmpty && named(logs, "$AppEnd").isEmpty)
    }

    // SPEC A6: nested screens are tracked independently; each screen log has title, path and duration.
    @Test func nestedScreensAreTrackedIndependently() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        let engine = try makeEngine(dir, clock)
        defer { engine.shutdown() }
        let player = try engine.startScreen(title: "Player", path: "/player/42")
        clock.advance(ms: 1000)
        let lyrics = try engine.startScreen(title: "Lyrics")
        clock.advance(ms: 2000)
        try engine.endScreen(lyrics, properties: ["lines": 12])
        clock.advance(ms: 2000)
        try engine.endScreen(title: "Player")
        try engine.trackScreen(title: "Settings", path: "/settings", duration: .milliseconds(750))
        try engine.trackScreen(title: "Splash")
        #expect(throws: OutboxError.emptyScreenTitle) { try engine.startScreen(title: "") }
        let screens = ofType(try await stored(engine), "screen")
        #expect(screens.map { $0["name"] as? String } == ["Lyrics", "Player", "Settings", "Splash"])
        #expect(screens.map { $0["durationMs"] as? Double } == [2000, 5000, 750, nil])
        #expect(screens.map { $0["path"] as? String } == [nil, "/player/42", "/settings", nil])
        #expect(typed(screens[0])["lines"] as? Int == 12)
        #expect(screens.allSatisfy { sid($0) != nil })
        _ = player
    }

    // SPEC A7: a categorised name is kept whole and sent as a category path; an explicit duration in ms.
    @Test func categorisedEventsCarryTheirPathValueAndExplicitDuration() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try makeEngine(dir, ManualClock())
        defer { engine.shutdown() }
        try engine.trackEvent("Video>Music>Play", value: "clip-42", duration: .milliseconds(61_500))
        try engine.trackEvent("download", duration: .microseconds(1_234_567))
        #expect(throws: OutboxError.self) { try engine.trackEvent("neg", duration: .seconds(-1)) }
        let logs = try await stored(engine)
        let play = try #require(named(logs, "Video>Music>Play").first)
        #expect(play["category"] as? [String] == ["Video", "Music", "Play"])
        #expect(typed(play)["$event_value"] as? String == "clip-42")
        #expect(typed(play)["$event_duration"] as? Double == 61_500)
        #expect(typed(named(logs, "download")[0])["$event_duration"] as? Double == 1234.567)
        #expect(named(logs, "neg").isEmpty)
    }

    // SPEC A8, T7: setUserId is persisted across restarts and sent as userId on every later log; nil signs out.
    @Test func theUserIdIsPersistedAndStampedOnEveryLaterLog() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        var engine = try makeEngine(dir, clock)
        try engine.trackEvent("anonymous")
        try engine.setUserId("u-1842")
        try engine.trackEvent("signed in")
        #expect(throws: OutboxError.self) { try engine.setUserId("") }
        #expect(throws: OutboxError.self) { try engine.setUserId(String(repeating: "u", count: 257)) }
        engine.shutdown()
        engine = try makeEngine(dir, clock)
        defer { engine.shutdown() }
        try engine.trackEvent("after restart")
        try engine.setUserId(nil)
        try engine.trackEvent("signed out")
        let logs = try await stored(engine)
        #expect(named(logs, "anonymous")[0]["userId"] == nil)
        #expect(named(logs, "signed in")[0]["userId"] as? String == "u-1842")
        #expect(named(logs, "after restart")[0]["userId"] as? String == "u-1842")
        #expect(ofType(logs, "startSession")[1]["userId"] as? String == "u-1842")
        #expect(named(logs, "signed out")[0]["userId"] == nil)
        #expect(try await engine.withStore { try $0.meta(MetaKey.userID) } == nil)
    }

    // SPEC A8: user properties as a userProperties log; a location log (Curio); validation errors.
    @Test func userPropertiesAndLocationsAreLogsOfTheirOwn() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try makeEngine(dir, ManualClock())
        defer { engine.shutdown() }
        try engine.setUserProperties(["plan": "pro", "seats": 3, "beta": true])
        try engine.sendLocation(latitude: 41.0082, longitude: 28.9784, accuracy: 12.5)
        try engine.sendLocation(latitude: -90, longitude: 180)
        #expect(throws: OutboxError.emptyUserProperties) { try engine.setUserProperties([:]) }
        #expect(throws: OutboxError.self) { try engine.setUserProperties(["x": .double(.infinity)]) }
        #expect(throws: OutboxError.self) { try engine.sendLocation(latitude: 90.5, longitude: 0) }
        #expect(throws: OutboxError.self) { try engine.sendLocation(latitude: .nan, longitude: 0) }
        #expect(throws: OutboxError.self) { try engine.sendLocation(latitude: 0, longitude: 0, accuracy: -1) }
        let logs = try await stored(engine)
        let properties = ofType(logs, "userProperties")
        #expect(properties.count == 1)
        #expect(typed(properties[0], "properties")["plan"] as? String == "pro")
        #expect(typed(properties[0], "properties")["seats"] as? Int == 3)
        let locations = ofType(logs, "location")
        #expect(locations.map { $0["latitude"] as? Double } == [41.0082, -90])
        #expect(locations.map { $0["longitude"] as? Double } == [28.9784, 180])
        #expect(locations.map { $0["accuracy"] as? Double } == [12.5, nil])
    }

    // SPEC A10: the device context is read from this machine — every field non-empty, each with its source — and
    // setCountryCode overrides the country for logs tracked afterwards; each log keeps the context it was
    // captured under.
    @Test func theDeviceContextComesFromThisMachineAndTheCountryCodeCanBeSet() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try makeEngine(dir, ManualClock()) { $0.appVersion = "2.1"; $0.appBuild = "210"; $0.appNamespace = "com.example" }
        defer { engine.shutdown() }
        var device = try await engine.deviceContext()
        let fields: [(String, String?)] = [
            ("sdkName", device.sdkName), ("sdkVersion", device.sdkVersion), ("osName", device.osName),
            ("osVersion", device.osVersion), ("osBuild", device.osBuild), ("osKernel", device.osKernel),
            ("model", device.model), ("oemName", device.oemName), ("locale", device.locale),
            ("timeZoneOffset", String(device.timeZoneOffset)), ("appVersion", device.appVersion),
            ("appBuild", device.appBuild), ("appNamespace", device.appNamespace), ("networkType", device.networkType),
        ]
        for (field, value) in fields {
            #expect(!(value ?? "").isEmpty, "\(field) is empty")
            #expect(!(device.sources[field] ?? "").isEmpty, "\(field) has no source")
        }
        #expect(["wired", "wifi", "none"].contains(device.networkType ?? ""))
        #expect(device.countryCode == nil)

        try engine.trackEvent("before")
        try engine.setCountryCode("tr")
        #expect(throws: OutboxError.invalidCountryCode("TUR")) { try engine.setCountryCode("TUR") }
        try engine.trackEvent("after")
        device = try await engine.deviceContext()
        #expect(device.countryCode == "TR")
        #expect(device.sources["countryCode"] == "setCountryCode")

        await engine.persisted()
        let contexts = try await engine.withStore { store -> [String: String] in
            var result: [String: String] = [:]
            for log in try store.allLogs() {
                guard let name = payloadObject(log)["name"] as? String, let json = try store.context(id: log.context) else { continue }
                result[name] = String(decoding: json, as: UTF8.self)
            }
            return result
        }
        #expect(contexts["before"]?.contains("countryCode") == false)
        #expect(contexts["after"]?.contains(#""countryCode":"TR""#) == true)
        #expect(contexts["after"]?.contains(#""appNamespace":"com.example""#) == true)
    }

    // SPEC A10: the minutely refresh re-reads the machine: a fact that changed (here a stale time-zone offset, as
    // after a daylight-saving switch) makes a new context version; an unchanged machine makes none; the host's
    // country code survives.
    @Test func theRefreshPicksUpChangedFactsAndKeepsTheCountryCode() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let engine = try makeEngine(dir, ManualClock())
        defer { engine.shutdown() }
        try engine.setCountryCode("DE")
        let core = engine.core
        func onLoop(_ work: @escaping () -> Void) async throws {
            try engine.intake.submit(.task(work))
            await engine.persisted()
        }
        let latest = { try await engine.withStore { try $0.latestContext() } }
        await engine.persisted()
        let first = try #require(try await latest())
        try await onLoop { core.refreshDeviceContext() }
        #expect(try await latest()?.id == first.id)

        let real = try await engine.deviceContext().timeZoneOffset
        // In one loop task, so that the engine's own minutely refresh cannot come between (a slow run, as under
        // ThreadSanitizer, reaches its first minute here).
        let versions = LoopResultBox<(stale: Int64, refreshed: Int64)>()
        try await onLoop {
            core.updateDevice { $0.timeZoneOffset = real + 60 }   // stale: the hour changed under us
            let stale = core.contextID
            core.refreshDeviceContext()
            versions.value = (stale, core.contextID)
        }
        let (stale, fresh) = try #require(versions.value)
        #expect(stale > first.id)
        #expect(fresh > stale)
        let refreshed = try #require(try await latest())
        #expect(refreshed.id == fresh)
        let json = String(decoding: refreshed.json, as: UTF8.self)
        #expect(json.contains("\"timeZoneOffset\":\(real)"))
        #expect(json.contains(#""countryCode":"DE""#))
    }

    // SPEC T6: while disabled nothing is collected, also not the logs of the analytics model.
    @Test func nothingIsCollectedWhileDisabled() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        let engine = try makeEngine(dir, clock) { $0.tracksAppLifecycle = true }
        defer { engine.shutdown() }
        try engine.setEnabled(false)
        engine.enterBackground()
        clock.advance(ms: 60_000)
        engine.enterForeground()
        try engine.startSession()
        try engine.setUserProperties(["a": 1])
        try engine.trackTimerEnd("t")
        #expect(try await stored(engine).isEmpty)
    }
}

extension AnalyticsEngineTests {
    // SPEC D3: session ids are UUIDv7 (time-ordered: the first 48 bits are the start's Unix milliseconds); a session
    // that reaches 24 h on the boot clock ends, and the next log starts a new one, also without a background stretch.
    @Test func sessionsAreUUIDv7AndEndAfter24HoursOnTheBootClock() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let clock = ManualClock()
        let engine = try makeEngine(dir, clock)
        defer { engine.shutdown() }
        try engine.trackEvent("first")
        clock.advance(ms: 24 * 3_600_000 - 1)
        try engine.trackEvent("just under a day")
        clock.advance(ms: 1)
        try engine.trackEvent("a day on")
        let logs = try await stored(engine)
        #expect(logs.compactMap { $0["type"] as? String } ==
                ["startSession", "event", "event", "endSession", "startSession", "event"])
        let starts = ofType(logs, "startSession")
        let s1 = try #require(sid(starts[0])), s2 = try #require(sid(starts[1]))
        #expect(s1 != s2)
        for (id, startMs) in [(s1, clock.wallMs() - 24 * 3_600_000), (s2, clock.wallMs())] {
            let hex = id.replacingOccurrences(of: "-", with: "")
            #expect(Array(hex)[12] == "7", "version 7: \(id)")
            #expect(["8", "9", "a", "b"].contains(Array(hex)[16]), "RFC 9562 variant: \(id)")
            #expect(Int64(hex.prefix(12), radix: 16) == startMs, "the start's Unix milliseconds: \(id)")
        }
        #expect(sid(named(logs, "just under a day")[0]) == s1)
        #expect(sid(ofType(logs, "endSession")[0]) == s1)
        #expect(sid(named(logs, "a day on")[0]) == s2)
        let duration = try #require(ofType(logs, "endSession")[0]["durationMs"] as? Double)
        #expect(duration == Double(24 * 3_600_000))
    }
}
