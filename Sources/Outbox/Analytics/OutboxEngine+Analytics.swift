import FoundationEssentials
import Logging
import Synchronization

extension OutboxEngine {
    // MARK: - Lifecycle (SPEC A1, A4, A5)

    /// Tells the engine the app went to the background (SPEC A1). Running timers and open screens pause (SPEC A4);
    /// with `tracksAppLifecycle`, `$AppEnd` is tracked with the foreground stretch in `$event_duration` (SPEC A5).
    /// Repeated calls are ignored; after `shutdown()` the call does nothing.
    ///
    /// ```swift
    /// engine.enterBackground()   // the window was hidden, the screen locked…
    /// engine.enterForeground()   // …and back: a new session if the app was away longer than sessionTimeout
    /// ```
    public func enterBackground() {
        stopwatches.books.withLock { books in
            let at = Moment.now(configuration.clock)
            books.timers.enterBackground(nowNs: at.monoNs)
            books.screens.enterBackground(nowNs: at.monoNs)
            try? intake.submit(.analytics(.enterBackground(at)))
        }
    }

    /// Tells the engine the app is in the foreground again (SPEC A1): after more than `sessionTimeout` in the
    /// background a new session starts (automatic tracking). Timers paused by `enterBackground()` resume — a timer
    /// the user paused stays paused (SPEC A4). With `tracksAppLifecycle`, `$AppStart` is tracked with
    /// `$resume_from_background = true` (SPEC A5). Repeated calls are ignored.
    public func enterForeground() {
        stopwatches.books.withLock { books in
            let at = Moment.now(configuration.clock)
            books.timers.enterForeground(nowNs: at.monoNs)
            books.screens.enterForeground(nowNs: at.monoNs)
            try? intake.submit(.analytics(.enterForeground(at)))
        }
    }

    // MARK: - Sessions (SPEC A1–A3)

    /// Starts a new session and sends its `startSession` log (SPEC A2): every call starts a new one. With
    /// `configuration.sessionTracking = .manual` this is the only way sessions start; logs before the first call
    /// have `sid = null`.
    ///
    /// ```swift
    /// configuration.sessionTracking = .manual
    /// let engine = try OutboxEngine(configuration: configuration)
    /// try engine.trackEvent("splash")       // sid: null
    /// try engine.startSession()             // startSession log, new sid
    /// try engine.endSession()               // endSession log with durationMs; sid: null until the next session
    /// ```
    public func startSession() throws {
        try intake.submit(.analytics(.startSession(Moment.now(configuration.clock))), urgent: false)
        core.sessionOpen.store(true, ordering: .relaxed)
    }

    /// Ends the current session with an `endSession` log carrying its duration in ms (SPEC A3, Curio). Later logs
    /// have `sid = null` until a session starts (`startSession()`, or in automatic mode the next foreground).
    /// Without a current session it does nothing.
    public func endSession() throws {
        try intake.submit(.analytics(.endSession(Moment.now(configuration.clock))), urgent: false)
        core.sessionOpen.store(false, ordering: .relaxed)
    }

    /// Whether a session is open, as the calls made so far leave it (SPEC E5: the C interface refuses to end none).
    @_spi(CInterface) public var hasOpenSession: Bool { core.sessionOpen.load(ordering: .relaxed) }

    // MARK: - Timers (SPEC A4)

    /// Starts a duration timer (Sensors `trackTimerStart`); `trackTimerEnd` tracks the event `name` with
    /// `$event_duration` in ms. Durations use CLOCK_BOOTTIME: changing the wall clock changes nothing.
    ///
    /// ```swift
    /// let id = try engine.trackTimerStart("video")
    /// engine.trackTimerPause(id)      // the user paused the video
    /// engine.trackTimerResume(id)
    /// try engine.trackTimerEnd(id, properties: ["title": "Intro"])   // "video" with $event_duration: 61234.5
    /// ```
    @discardableResult
    public func trackTimerStart(_ name: String) throws -> TimerID {
        guard !name.isEmpty else { throw OutboxError.emptyEventName }
        let clock = configuration.clock
        let (handle, forgotten) = stopwatches.books.withLock { $0.timers.start(name, nowNs: clock.monoNs()) }
        if let forgotten {
            logger.warning("too many open timers; the oldest was forgotten", metadata: [
                "outbox.timer": "\(forgotten.name)", "outbox.limit": "\(TimerBook.defaultCapacity)"])
        }
        return TimerID(handle: handle)
    }

    /// Pauses the most recent timer of this name; a paused timer stays paused (SPEC A4).
    public func trackTimerPause(_ name: String) { pauseTimer(.name(name)) }
    public func trackTimerPause(_ id: TimerID) { pauseTimer(.handle(id.handle)) }
    /// Resumes the most recent timer of this name; resuming a running timer does nothing (SPEC A4).
    public func trackTimerResume(_ name: String) { resumeTimer(.name(name)) }
    public func trackTimerResume(_ id: TimerID) { resumeTimer(.handle(id.handle)) }

    /// Ends the most recent timer of this name and tracks the event with `$event_duration` (ms, 3 decimals, a typed
    /// `double`). With no such timer, the event is tracked without a duration (SPEC A4). Throws as `trackEvent`.
    public func trackTimerEnd(_ name: String, properties: [String: PropertyValue] = [:], flags: LogFlags = .normal) throws {
        try endTimer(.name(name), properties: properties, flags: flags)
    }

    /// Ends this timer: two timers of one name end independently (SPEC A4).
    public func trackTimerEnd(_ id: TimerID, properties: [String: PropertyValue] = [:], flags: LogFlags = .normal) throws {
        try endTimer(.handle(id.handle), properties: properties, flags: flags)
    }

    private func pauseTimer(_ key: TimerBook.Key) {
        let clock = configuration.clock
        stopwatches.books.withLock { $0.timers.pause(key, nowNs: clock.monoNs()) }
    }

    private func resumeTimer(_ key: TimerBook.Key) {
        let clock = configuration.clock
        stopwatches.books.withLock { $0.timers.resume(key, nowNs: clock.monoNs()) }
    }

    private func endTimer(_ key: TimerBook.Key, properties: [String: PropertyValue], flags: LogFlags) throws {
        // Refuse a bad event before the timer is gone, so that the caller can fix it and end the timer again.
        switch key {
        case .name(let name): _ = try EventValidator.validate(name: name, properties: properties)
        case .handle(let handle): _ = try EventValidator.validate(name: handle.name, properties: properties)
        }
        let clock = configuration.clock
        let ended = stopwatches.books.withLock { $0.timers.end(key, nowNs: clock.monoNs()) }
        var properties = properties
        if let ns = ended.durationNs { properties[AnalyticsState.eventDuration] = .double(TimerBook.milliseconds(ns)) }
        try trackEvent(ended.name, properties: properties, flags: flags)
    }

    // MARK: - Categorised events and explicit durations (SPEC A7)

    /// Curio's `sendEvent(key, value)` / `endEvent(key, value, duration)`: the event `name` (a `"Cat1>Cat2>Cat3"`
    /// name is also sent as the `category` path) with `$event_value` and, when given, `$event_duration` in ms.
    ///
    /// ```swift
    /// try engine.trackEvent("Video>Music>Play", value: "clip-42", duration: .milliseconds(61_500))
    /// ```
    public func trackEvent(_ name: String, value: String, duration: Duration? = nil,
                           properties: [String: PropertyValue] = [:], flags: LogFlags = .normal) throws {
        var properties = properties
        properties[Self.eventValue] = .string(value)
        if let duration { properties[AnalyticsState.eventDuration] = .double(try Self.milliseconds(duration)) }
        try trackEvent(name, properties: properties, flags: flags)
    }

    /// An event with an explicit `$event_duration` in ms (SPEC A7). A negative duration throws `invalidDuration`.
    public func trackEvent(_ name: String, duration: Duration, properties: [String: PropertyValue] = [:],
                           flags: LogFlags = .normal) throws {
        var properties = properties
        properties[AnalyticsState.eventDuration] = .double(try Self.milliseconds(duration))
        try trackEvent(name, properties: properties, flags: flags)
    }

    static let eventValue = "$event_value"

    static func milliseconds(_ duration: Duration) throws(OutboxError) -> Double {
        guard duration >= .zero else { throw .invalidDuration("\(duration) is negative") }
        return TimerBook.milliseconds(duration.clampedNanoseconds)
    }

    // MARK: - Screens (SPEC A6)

    /// A screen view with an optional known duration (Sensors `$AppViewScreen`): a `screen` log.
    ///
    /// ```swift
    /// try engine.trackScreen(title: "Settings", path: "/settings")
    /// let player = try engine.startScreen(title: "Player", path: "/player/42")   // Curio startScreen
    /// let lyrics = try engine.startScreen(title: "Lyrics")                       // nested: tracked independently
    /// try engine.endScreen(lyrics)                                               // screen log with durationMs
    /// try engine.endScreen(player)
    /// ```
    public func trackScreen(title: String, path: String? = nil, duration: Duration? = nil,
                            properties: [String: PropertyValue] = [:]) throws {
        if let duration, duration < .zero { throw OutboxError.invalidDuration("\(duration) is negative") }
        try sendScreen(title: title, path: path, durationNs: duration?.clampedNanoseconds, properties: properties)
    }

    /// Opens a screen (Curio `startScreen`); `endScreen` sends its `screen` log with the time it was open, background
    /// stretches excluded. Throws `emptyScreenTitle`.
    @discardableResult
    public func startScreen(title: String, path: String? = nil) throws -> ScreenID {
        guard !title.isEmpty else { throw OutboxError.emptyScreenTitle }
        let clock = configuration.clock
        let (handle, forgotten) = stopwatches.books.withLock { $0.screens.start(title, nowNs: clock.monoNs(), detail: path) }
        if let forgotten {
            logger.warning("too many open screens; the oldest was forgotten", metadata: ["outbox.screen": "\(forgotten.name)"])
        }
        return ScreenID(handle: handle)
    }

    /// Closes this screen and sends its `screen` log with `durationMs`.
    public func endScreen(_ id: ScreenID, properties: [String: PropertyValue] = [:]) throws {
        try endScreen(.handle(id.handle), properties: properties)
    }

    /// Closes the most recent open screen of this title; with none open, the screen is sent without a duration.
    public func endScreen(title: String, properties: [String: PropertyValue] = [:]) throws {
        try endScreen(.name(title), properties: properties)
    }

    private func endScreen(_ key: TimerBook.Key, properties: [String: PropertyValue]) throws {
        _ = try LogBodies.screen(title: "t", path: nil, durationNs: nil, properties: properties)  // refuse before closing
        let clock = configuration.clock
        let ended = stopwatches.books.withLock { $0.screens.end(key, nowNs: clock.monoNs()) }
        try sendScreen(title: ended.name, path: ended.detail, durationNs: ended.durationNs, properties: properties)
    }

    private func sendScreen(title: String, path: String?, durationNs: Int64?, properties: [String: PropertyValue]) throws {
        let result = try LogBodies.screen(title: title, path: path, durationNs: durationNs, properties: properties)
        if !result.adjustments.isEmpty { warn(name: title, result.adjustments) }
        try admitLog(.screen, result.body)
    }

    // MARK: - Users and location (SPEC A8)

    /// Sets the signed-in user's id (Sensors `login`), persisted across restarts and sent as `userId` on every later
    /// log (SPEC T7, A8); nil signs the user out. The anonymous install id is `installID`.
    /// Throws `invalidUserID` for an empty id or one over 256 characters.
    ///
    /// ```swift
    /// try engine.setUserId("u-1842")
    /// try engine.setUserProperties(["plan": "pro", "seats": 3])        // a userProperties log
    /// try engine.sendLocation(latitude: 41.0082, longitude: 28.9784)    // a location log (Curio)
    /// ```
    public func setUserId(_ userID: String?) throws {
        try LogBodies.validateUserID(userID)
        try intake.submit(.analytics(.setUserID(userID)), urgent: false)
    }

    /// Sends the user's properties (Curio `sendUserTags`, Sensors `profile_set`) as a `userProperties` log: 1–20
    /// typed properties, limited as event properties (SPEC T3). Throws `emptyUserProperties`, `invalidPropertyValue`.
    public func setUserProperties(_ properties: [String: PropertyValue]) throws {
        let result = try LogBodies.userProperties(properties)
        if !result.adjustments.isEmpty { warn(name: "userProperties", result.adjustments) }
        try admitLog(.userProperties, result.body)
    }

    /// The user signed in (SPEC A8a; Segment's and PostHog's `identify`): sets the user id as `setUserId` does and
    /// stores an `identify` log with the user's traits (0–20, limited as user properties), so that the server links
    /// the anonymous install to the user — PostHog `$identify` with `$anon_distinct_id`, Segment `identify`, OTLP
    /// `outbox.identify`; App Center's wire, which has no identify, gets a `userProperties` log.
    /// Throws `invalidUserID`, `invalidPropertyValue`.
    ///
    /// ```swift
    /// try engine.identify(userId: "u-1842", traits: ["plan": "pro"])
    /// ```
    public func identify(userId: String, traits: [String: PropertyValue] = [:]) throws {
        try LogBodies.validateUserID(userId)
        let result = try LogBodies.identify(traits)
        if !result.adjustments.isEmpty { warn(name: "identify", result.adjustments) }
        // In queue order: the identify log is stamped with the new user id (T7).
        try intake.submit(.analytics(.setUserID(userId)), urgent: false)
        try admitLog(.identify, result.body)
    }

    /// Sends a `location` log (Curio `sendLocation`). Throws `invalidLocation` outside −90…90 / −180…180, for
    /// non-finite numbers or a negative accuracy (metres).
    public func sendLocation(latitude: Double, longitude: Double, accuracy: Double? = nil) throws {
        try admitLog(.location, LogBodies.location(latitude: latitude, longitude: longitude, accuracy: accuracy).body)
    }

    // MARK: - Device context (SPEC A10)

    /// Overrides the device context's `countryCode` (App Center `setCountryCode`) for logs tracked from now on;
    /// nil removes it. A two-letter ISO 3166-1 code, upper-cased. Not persisted: set it at every start.
    public func setCountryCode(_ code: String?) throws {
        let normalised = try LogBodies.countryCode(code)
        try intake.submit(.analytics(.setCountryCode(normalised)), urgent: false)
    }

    /// The device context new logs are captured under, with the source of each field (SPEC A10).
    public func deviceContext() async throws -> DeviceContext {
        if loop.isOnLoopThread { return core.device }
        let core = self.core
        return try await withCheckedThrowingContinuation { continuation in
            do {
                try intake.submit(.task { continuation.resume(returning: core.device) })
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    private func admitLog(_ type: LogType, _ body: [UInt8]) throws {
        let clock = configuration.clock
        try admit(EventDraft(priority: .normal, wallMs: clock.wallMs(), monoNs: clock.monoNs(), body: body, type: type), name: nil)
    }
}

extension Duration {
    /// Nanoseconds, saturating at Int64's bounds (a duration of centuries is not worth a trap).
    var clampedNanoseconds: Int64 { saturated(unitsPerSecond: 1_000_000_000) }
}
