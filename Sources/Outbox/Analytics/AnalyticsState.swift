/// A moment as the caller saw it: wall time for the log's timestamp, CLOCK_BOOTTIME for durations.
struct Moment: Equatable, Sendable {
    var wallMs: Int64
    var monoNs: Int64

    static func now(_ clock: any OutboxClock) -> Moment { Moment(wallMs: clock.wallMs(), monoNs: clock.monoNs()) }
}

/// SPEC A1–A2: who starts sessions.
public enum SessionTracking: Sendable, Equatable {
    /// SPEC A1: a session starts at engine start and when the app returns to the foreground after more than
    /// `sessionTimeout` in the background (App Center's default).
    case automatic
    /// SPEC A2 (App Center's and Curio's `enableManualSessionTracker()`): sessions start only on `startSession()`;
    /// logs before the first one have `sid = null`.
    case manual
}

/// What the host and the engine tell the analytics model, in the order of the intake queue.
enum AnalyticsCommand: Sendable, Equatable {
    case engineStarted(Moment)
    /// The engine shuts down: the app leaves the foreground for good ($AppEnd, SPEC A5).
    case engineStopping(Moment)
    case enterBackground(Moment)
    case enterForeground(Moment)
    case startSession(Moment)
    case endSession(Moment)
    /// SPEC D3: a log at this moment finds the session at its longest: it ends, and a new one starts.
    case sessionLimit(Moment)
    case setUserID(String?)
    /// SPEC A10: handled by the device context, not by `AnalyticsState`.
    case setCountryCode(String?)
}

extension AnalyticsCommand {
    /// When the command was made, for those that carry it.
    var moment: Moment? {
        switch self {
        case .engineStarted(let at), .engineStopping(let at), .enterBackground(let at), .enterForeground(let at),
             .startSession(let at), .endSession(let at), .sessionLimit(let at):
            return at
        case .setUserID, .setCountryCode:
            return nil
        }
    }
}

/// A log the model decided to write, with the session and user it belongs to.
struct AnalyticsLog: Equatable, Sendable {
    var type: LogType
    /// The type's own fields (`"durationMs":…`, `"name":…`), without braces; may be empty.
    var body: [UInt8]
    var moment: Moment
    var sid: UUIDBytes?
    /// `Stamp.bytes(sid:userID:)` of this log.
    var stamp: [UInt8]
}

enum AnalyticsEffect: Equatable, Sendable {
    case log(AnalyticsLog)
    /// SPEC A8: the user id must be persisted (nil: removed).
    case persistUserID(String?)
}

/// Sessions, the app's lifecycle and the user (SPEC A1–A3, A5, A8) as a pure state machine:
/// `(state, command) -> (state, effects)`. The loop thread owns one and feeds it the commands of the intake queue in
/// order, so every log is stamped with the session and user that were current when its call was made — also when
/// several threads call at once. Durations come from the monotonic readings carried by the commands.
struct AnalyticsState: Sendable {
    struct Settings: Equatable, Sendable {
        var sessionTracking: SessionTracking = .automatic
        /// SPEC A1: a background stretch longer than this ends the session (default 20 s).
        var sessionTimeoutNs: Int64 = 20_000_000_000
        /// SPEC A5: track `$AppStart` / `$AppEnd`.
        var tracksAppLifecycle = false
        /// SPEC D3: a session this long on the boot clock ends, and a new one starts (PostHog's limit is 24 h).
        var maxSessionNs: Int64 = 24 * 3600 * 1_000_000_000
    }

    struct Session: Equatable, Sendable {
        var id: UUIDBytes
        var startNs: Int64
    }

    enum Lifecycle: Equatable, Sendable {
        case notStarted
        case foreground(sinceNs: Int64)
        case background(sinceNs: Int64)
        case stopped
    }

    static let appStart = "$AppStart"
    static let appEnd = "$AppEnd"
    static let eventDuration = "$event_duration"
    static let isFirstTime = "$is_first_time"
    static let resumeFromBackground = "$resume_from_background"

    let settings: Settings
    private(set) var session: Session?
    private(set) var userID: String?
    private(set) var lifecycle: Lifecycle = .notStarted
    /// SPEC A5: true until the first `$AppStart` of this install was written.
    private(set) var isFirstStart: Bool
    /// The session and user fields for the next log (SPEC T7).
    private(set) var stamp: [UInt8]

    init(settings: Settings = Settings(), userID: String? = nil, isFirstStart: Bool = false) {
        self.settings = settings
        self.userID = userID
        self.isFirstStart = isFirstStart
        self.stamp = Stamp.bytes(sid: nil, userID: userID)
    }

    mutating func apply(_ command: AnalyticsCommand, ids: inout IDGenerator) -> [AnalyticsEffect] {
        var effects: [AnalyticsEffect] = []
        switch command {
        case .engineStarted(let at):
            guard lifecycle == .notStarted else { break }
            lifecycle = .foreground(sinceNs: at.monoNs)
            if settings.sessionTracking == .automatic { begin(at, ids: &ids, into: &effects) }
            appStart(at, resumed: false, into: &effects)

        case .enterForeground(let at):
            guard case .background(let since) = lifecycle else { break }
            lifecycle = .foreground(sinceNs: at.monoNs)
            // SPEC A1: "more than sessionTimeout" — a background stretch of exactly the timeout keeps the session.
            if settings.sessionTracking == .automatic && (session == nil || at.monoNs - since > settings.sessionTimeoutNs) {
                begin(at, ids: &ids, into: &effects)
            }
            appStart(at, resumed: true, into: &effects)

        case .enterBackground(let at):
            guard case .foreground(let since) = lifecycle else { break }
            lifecycle = .background(sinceNs: at.monoNs)
            appEnd(at, foregroundSinceNs: since, into: &effects)

        case .engineStopping(let at):
            if case .foreground(let since) = lifecycle { appEnd(at, foregroundSinceNs: since, into: &effects) }
            lifecycle = .stopped

        case .startSession(let at):
            begin(at, ids: &ids, into: &effects)

        case .sessionLimit(let at):
            // SPEC D3: the session reached its longest; the next log belongs to a new one.
            guard let current = session, at.monoNs - current.startNs >= settings.maxSessionNs else { break }
            end(current, at, into: &effects)
            begin(at, ids: &ids, into: &effects)

        case .endSession(let at):
            guard let current = session else { break }
            end(current, at, into: &effects)

        case .setUserID(let id):
            guard id != userID else { break }
            userID = id
            stamp = Stamp.bytes(sid: session?.id, userID: id)
            effects.append(.persistUserID(id))

        case .setCountryCode:
            break
        }
        return effects
    }

    private mutating func end(_ current: Session, _ at: Moment, into effects: inout [AnalyticsEffect]) {
        // The session's whole length, background stretches within the timeout included (they did not end it).
        var writer = JSONWriter(capacity: 32)
        writer.raw("\"durationMs\":")
        writer.double(TimerBook.milliseconds(max(0, at.monoNs - current.startNs)))
        effects.append(.log(log(.endSession, writer.bytes, at)))
        session = nil
        stamp = Stamp.bytes(sid: nil, userID: userID)
    }

    /// SPEC D3: whether a log at `monoNs` finds the current session past its longest (`sessionLimit` then rolls it).
    func sessionLimitReached(atMonoNs monoNs: Int64) -> Bool {
        guard let session else { return false }
        return monoNs - session.startNs >= settings.maxSessionNs
    }

    private mutating func begin(_ at: Moment, ids: inout IDGenerator, into effects: inout [AnalyticsEffect]) {
        session = Session(id: ids.uuidV7(unixMs: at.wallMs), startNs: at.monoNs)
        stamp = Stamp.bytes(sid: session?.id, userID: userID)
        effects.append(.log(log(.startSession, [], at)))
    }

    private mutating func appStart(_ at: Moment, resumed: Bool, into effects: inout [AnalyticsEffect]) {
        guard settings.tracksAppLifecycle else { return }
        let first = isFirstStart && !resumed
        isFirstStart = false
        event(Self.appStart, [Self.isFirstTime: .bool(first), Self.resumeFromBackground: .bool(resumed)], at, into: &effects)
    }

    private func appEnd(_ at: Moment, foregroundSinceNs: Int64, into effects: inout [AnalyticsEffect]) {
        guard settings.tracksAppLifecycle else { return }
        let duration = TimerBook.milliseconds(TimerBook.segment(at.monoNs - foregroundSinceNs))
        event(Self.appEnd, [Self.eventDuration: .double(duration)], at, into: &effects)
    }

    private func event(_ name: String, _ properties: [String: PropertyValue], _ at: Moment, into effects: inout [AnalyticsEffect]) {
        // Fixed names and finite values: validation cannot fail; if it ever did, the log is skipped, never a crash.
        guard let body = try? EventValidator.validate(name: name, properties: properties).body else { return }
        effects.append(.log(log(.event, body, at)))
    }

    private func log(_ type: LogType, _ body: [UInt8], _ at: Moment) -> AnalyticsLog {
        AnalyticsLog(type: type, body: body, moment: at, sid: session?.id, stamp: stamp)
    }
}
