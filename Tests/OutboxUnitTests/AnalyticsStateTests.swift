import Foundation
import Testing
@testable import Outbox

private let second: Int64 = 1_000_000_000

private func at(_ seconds: Int64) -> Moment { Moment(wallMs: 1_700_000_000_000 + seconds * 1000, monoNs: seconds * second) }

private extension [AnalyticsEffect] {
    var logs: [AnalyticsLog] { compactMap { if case .log(let log) = $0 { return log } else { return nil } } }
    var types: [LogType] { logs.map(\.type) }
}

/// The event name and typed properties of an analytics log's body.
private func event(_ log: AnalyticsLog) -> (name: String, properties: [String: Any]) {
    let object = (try? JSONSerialization.jsonObject(with: Data(("{" + String(decoding: log.body, as: UTF8.self) + "}").utf8))
                  as? [String: Any]) ?? [:]
    var properties: [String: Any] = [:]
    for entry in object["typedProperties"] as? [[String: Any]] ?? [] {
        if let name = entry["name"] as? String { properties[name] = entry["value"] }
    }
    return (object["name"] as? String ?? "", properties)
}

@Suite("Sessions, lifecycle and user, pure (SPEC A1–A3, A5, A8)")
struct AnalyticsStateTests {
    private func state(_ tracking: SessionTracking = .automatic, timeout: Int64 = 20, lifecycle: Bool = false,
                       firstStart: Bool = false) -> AnalyticsState {
        AnalyticsState(settings: .init(sessionTracking: tracking, sessionTimeoutNs: timeout * second, tracksAppLifecycle: lifecycle),
                       isFirstStart: firstStart)
    }

    // SPEC A1: a session starts at engine start, with a startSession log that carries its sid.
    @Test func aSessionStartsAtEngineStart() throws {
        var ids = IDGenerator(seed: 7)
        var model = state()
        let effects = model.apply(.engineStarted(at(0)), ids: &ids)
        #expect(effects.types == [.startSession])
        let sid = try #require(model.session?.id)
        #expect(effects.logs.first?.sid == sid)
        #expect(String(decoding: model.stamp, as: UTF8.self) == ",\"sid\":\"\(sid.string)\"")
    }

    // SPEC A1: back in the foreground after just under / exactly the timeout: same session; just over: a new one.
    @Test(arguments: [(Int64(19_999), false), (Int64(20_000), false), (Int64(20_001), true)])
    func sessionRenewalDependsOnTheBackgroundStretch(backgroundMs: Int64, renewed: Bool) {
        var ids = IDGenerator(seed: 1)
        var model = state(timeout: 20)
        _ = model.apply(.engineStarted(at(0)), ids: &ids)
        let first = model.session?.id
        _ = model.apply(.enterBackground(at(5)), ids: &ids)
        let back = Moment(wallMs: 0, monoNs: 5 * second + backgroundMs * 1_000_000)
        let effects = model.apply(.enterForeground(back), ids: &ids)
        #expect((model.session?.id != first) == renewed)
        #expect(effects.types == (renewed ? [.startSession] : []))
    }

    // SPEC A1: the session timeout counts background time only; a long foreground keeps the session.
    @Test func aLongForegroundKeepsTheSession() {
        var ids = IDGenerator(seed: 7)
        var model = state(timeout: 20)
        _ = model.apply(.engineStarted(at(0)), ids: &ids)
        let first = model.session?.id
        _ = model.apply(.enterBackground(at(3600)), ids: &ids)
        _ = model.apply(.enterForeground(at(3601)), ids: &ids)
        #expect(model.session?.id == first)
    }

    // SPEC A2: manual mode: no session until startSession(); every call starts a new one.
    @Test func manualModeStartsSessionsOnlyOnStartSession() {
        var ids = IDGenerator(seed: 7)
        var model = state(.manual)
        #expect(model.apply(.engineStarted(at(0)), ids: &ids).isEmpty)
        #expect(model.session == nil)
        #expect(String(decoding: model.stamp, as: UTF8.self) == ",\"sid\":null")
        _ = model.apply(.enterBackground(at(1)), ids: &ids)
        #expect(model.apply(.enterForeground(at(500)), ids: &ids).isEmpty)
        #expect(model.session == nil)
        var seen = Set<UUIDBytes>()
        for second in 600..<603 {
            let effects = model.apply(.startSession(at(Int64(second))), ids: &ids)
            #expect(effects.types == [.startSession])
            if let sid = model.session?.id { seen.insert(sid) }
        }
        #expect(seen.count == 3)
    }

    // SPEC A3: endSession carries the session's duration and clears the sid; without a session it does nothing.
    @Test func endSessionCarriesTheDurationAndClearsTheSid() throws {
        var ids = IDGenerator(seed: 7)
        var model = state()
        _ = model.apply(.engineStarted(at(10)), ids: &ids)
        let sid = model.session?.id
        let effects = model.apply(.endSession(Moment(wallMs: 0, monoNs: 72 * second + 345_678)), ids: &ids)
        let log = try #require(effects.logs.first)
        #expect(log.type == .endSession && log.sid == sid)
        #expect(String(decoding: log.body, as: UTF8.self) == "\"durationMs\":62000.346")
        #expect(model.session == nil)
        #expect(model.apply(.endSession(at(80)), ids: &ids).isEmpty)
        // Automatic mode: the next foreground starts a session, whatever the background stretch.
        _ = model.apply(.enterBackground(at(81)), ids: &ids)
        #expect(model.apply(.enterForeground(at(82)), ids: &ids).types == [.startSession])
    }

    // SPEC A5: $AppStart at start (first time only on the install's first start) and on foreground with
    // $resume_from_background; $AppEnd with the foreground stretch; repeated lifecycle calls are ignored.
    @Test func appStartAndAppEndFollowTheLifecycle() {
        var ids = IDGenerator(seed: 7)
        var model = state(lifecycle: true, firstStart: true)
        let start = model.apply(.engineStarted(at(0)), ids: &ids).logs
        #expect(start.map(\.type) == [.startSession, .event])
        #expect(event(start[1]).name == "$AppStart")
        #expect(event(start[1]).properties["$is_first_time"] as? Bool == true)
        #expect(event(start[1]).properties["$resume_from_background"] as? Bool == false)

        let end = model.apply(.enterBackground(Moment(wallMs: 0, monoNs: 42 * second + 500_000)), ids: &ids).logs
        #expect(event(end[0]).name == "$AppEnd")
        #expect(event(end[0]).properties["$event_duration"] as? Double == 42000.5)
        #expect(model.apply(.enterBackground(at(50)), ids: &ids).isEmpty)

        let resumed = model.apply(.enterForeground(at(60)), ids: &ids).logs
        #expect(resumed.map(\.type) == [.event])   // 18 s in the background: same session
        #expect(event(resumed[0]).properties["$is_first_time"] as? Bool == false)
        #expect(event(resumed[0]).properties["$resume_from_background"] as? Bool == true)
        #expect(model.apply(.enterForeground(at(61)), ids: &ids).isEmpty)

        // Shutdown ends the foreground stretch once.
        #expect(model.apply(.engineStopping(at(70)), ids: &ids).logs.map { event($0).name } == ["$AppEnd"])
        #expect(model.apply(.engineStopping(at(71)), ids: &ids).isEmpty)
    }

    // SPEC A5: on foreground after the timeout, the new session's startSession precedes $AppStart, which carries it.
    @Test func appStartOfANewSessionCarriesTheNewSid() {
        var ids = IDGenerator(seed: 7)
        var model = state(lifecycle: true)
        _ = model.apply(.engineStarted(at(0)), ids: &ids)
        _ = model.apply(.enterBackground(at(1)), ids: &ids)
        let logs = model.apply(.enterForeground(at(100)), ids: &ids).logs
        #expect(logs.map(\.type) == [.startSession, .event])
        #expect(logs[1].sid == model.session?.id && logs[0].sid == logs[1].sid)
    }

    // SPEC A8, T7: the user id joins the stamp of later logs and is persisted; nil signs out.
    @Test func theUserIdIsStampedAndPersisted() {
        var ids = IDGenerator(seed: 7)
        var model = state(.manual)
        #expect(model.apply(.setUserID("u-1"), ids: &ids) == [.persistUserID("u-1")])
        #expect(String(decoding: model.stamp, as: UTF8.self) == ",\"sid\":null,\"userId\":\"u-1\"")
        #expect(model.apply(.setUserID("u-1"), ids: &ids).isEmpty)
        #expect(model.apply(.setUserID(nil), ids: &ids) == [.persistUserID(nil)])
        #expect(String(decoding: model.stamp, as: UTF8.self) == ",\"sid\":null")
    }
}
