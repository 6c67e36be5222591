import Glibc
@_spi(CInterface) import Outbox
import Synchronization

// SPEC E5: the analytics model through include/outbox.h — sessions, lifecycle, screens, categorised events, the
// user, duration timers, location and reachability. E3's rules hold for each: any thread, a code and a message in
// `outbox_last_error()` for every refusal, nothing that traps on what a C caller can pass.

/// Runs `body` on the engine behind `handle`, turning every error into its code and a message naming `function`.
func call(_ handle: UnsafeMutableRawPointer?, _ function: StaticString, _ body: (CEngine) throws -> Void) -> Int32 {
    guard let c = openEngine(handle, function) else { return handle == nil ? EINVAL : ECLOSED }
    do {
        try body(c)
        return 0
    } catch let failure as CFailure {
        return fail(failure.code, "\(function): \(failure.message)")
    } catch let error as OutboxError {
        return fail(code(for: error), "\(function): \(error)")
    } catch {
        return fail(EINVAL, "\(function): \(error)")
    }
}

/// A C string as text: NULL (unless `optional`) and invalid UTF-8 are refused, naming `what`.
func text(_ pointer: UnsafePointer<CChar>?, _ what: String) throws(CFailure) -> String {
    guard let pointer else { throw CFailure(code: EINVAL, message: "\(what) is NULL") }
    let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer))
    guard JSONScanner.isValidUTF8(bytes) else { throw CFailure(code: EINVAL, message: "\(what) is not valid UTF-8") }
    return String(decoding: bytes, as: UTF8.self)
}

private func optionalText(_ pointer: UnsafePointer<CChar>?, _ what: String) throws(CFailure) -> String? {
    guard pointer != nil else { return nil }
    return try text(pointer, what)
}

/// A flat JSON object as properties, as `outbox_track` reads them (NULL: none); a key given twice is refused.
private func properties(_ pointer: UnsafePointer<CChar>?, _ what: String = "properties") throws(CFailure) -> [String: PropertyValue] {
    guard let pointer else { return [:] }
    let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: strlen(pointer))
    var result: [String: PropertyValue] = [:]
    do throws(JSONError) {
        var scanner = JSONScanner(bytes)
        try scanner.properties { key, value throws(JSONError) in
            guard result[key] == nil else { throw JSONError(message: "property '\(key)' appears twice") }
            switch value {
            case .value(let value): result[key] = value
            case .utf8(let text): result[key] = .string(String(decoding: text, as: UTF8.self))
            }
        }
    } catch {
        throw CFailure(code: EINVAL, message: "\(what): \(error.message)")
    }
    return result
}

func logFlags(_ flags: Int32) throws(CFailure) -> LogFlags {
    guard flags & ~1 == 0 else { throw CFailure(code: EINVAL, message: "unknown flags \(flags) (0 or OUTBOX_CRITICAL)") }
    return flags & 1 != 0 ? .critical : .normal
}

// MARK: - Sessions and lifecycle (SPEC A1–A3)

@_cdecl("outbox_start_session")
public func outbox_start_session(_ handle: UnsafeMutableRawPointer?) -> Int32 {
    call(handle, "outbox_start_session") { try $0.engine.startSession() }
}

@_cdecl("outbox_end_session")
public func outbox_end_session(_ handle: UnsafeMutableRawPointer?) -> Int32 {
    call(handle, "outbox_end_session") { c in
        guard c.engine.hasOpenSession else {
            throw CFailure(code: EINVAL, message: "no session is open (it ended, or none started)")
        }
        try c.engine.endSession()
    }
}

@_cdecl("outbox_enter_background")
public func outbox_enter_background(_ handle: UnsafeMutableRawPointer?) -> Int32 {
    call(handle, "outbox_enter_background") { $0.engine.enterBackground() }
}

@_cdecl("outbox_enter_foreground")
public func outbox_enter_foreground(_ handle: UnsafeMutableRawPointer?) -> Int32 {
    call(handle, "outbox_enter_foreground") { $0.engine.enterForeground() }
}

// MARK: - Screens and categorised events (SPEC A6, A7)

@_cdecl("outbox_track_screen")
public func outbox_track_screen(_ handle: UnsafeMutableRawPointer?, _ name: UnsafePointer<CChar>?,
                                _ path: UnsafePointer<CChar>?, _ propertiesJSON: UnsafePointer<CChar>?) -> Int32 {
    call(handle, "outbox_track_screen") { c in
        try c.engine.trackScreen(title: try text(name, "the screen name"), path: try optionalText(path, "the path"),
                                 properties: try properties(propertiesJSON))
    }
}

@_cdecl("outbox_track_category")
public func outbox_track_category(_ handle: UnsafeMutableRawPointer?, _ name: UnsafePointer<CChar>?,
                                  _ value: UnsafePointer<CChar>?, _ durationMs: Double,
                                  _ propertiesJSON: UnsafePointer<CChar>?, _ flags: Int32) -> Int32 {
    call(handle, "outbox_track_category") { c in
        let name = try text(name, "the event name")
        let value = try optionalText(value, "the value")
        guard !durationMs.isNaN else { throw CFailure(code: EINVAL, message: "the duration is NaN") }
        // A negative duration is none (a C caller's way to say it without a pointer).
        let duration: Duration? = durationMs < 0 ? nil : .nanoseconds(Int64(min(durationMs * 1e6, 9.2e18)))
        let properties = try properties(propertiesJSON), flags = try logFlags(flags)
        switch (value, duration) {
        case (let value?, _): try c.engine.trackEvent(name, value: value, duration: duration, properties: properties, flags: flags)
        case (nil, let duration?): try c.engine.trackEvent(name, duration: duration, properties: properties, flags: flags)
        case (nil, nil): try c.engine.trackEvent(name, properties: properties, flags: flags)
        }
    }
}

// MARK: - The user (SPEC A8, A8a)

@_cdecl("outbox_set_user_id")
public func outbox_set_user_id(_ handle: UnsafeMutableRawPointer?, _ userID: UnsafePointer<CChar>?) -> Int32 {
    call(handle, "outbox_set_user_id") { c in try c.engine.setUserId(try optionalText(userID, "the user id")) }
}

@_cdecl("outbox_set_user_properties")
public func outbox_set_user_properties(_ handle: UnsafeMutableRawPointer?, _ propertiesJSON: UnsafePointer<CChar>?) -> Int32 {
    call(handle, "outbox_set_user_properties") { c in
        guard propertiesJSON != nil else { throw CFailure(code: EINVAL, message: "the properties are NULL") }
        try c.engine.setUserProperties(try properties(propertiesJSON))
    }
}

@_cdecl("outbox_identify")
public func outbox_identify(_ handle: UnsafeMutableRawPointer?, _ userID: UnsafePointer<CChar>?,
                            _ traitsJSON: UnsafePointer<CChar>?) -> Int32 {
    call(handle, "outbox_identify") { c in
        try c.engine.identify(userId: try text(userID, "the user id"), traits: try properties(traitsJSON, "traits"))
    }
}

// MARK: - Duration timers (SPEC A4)

/// The timers a C host started and has not ended, by the number it was given. As many as the engine keeps open
/// (its oldest are forgotten beyond that, and so are their numbers here).
struct CTimers {
    private var next: Int64 = 1
    private var open: [Int64: TimerID] = [:]

    mutating func add(_ timer: TimerID) -> Int64 {
        let number = next
        next += 1
        open[number] = timer
        if open.count > 1024, let oldest = open.keys.min() { open[oldest] = nil }
        return number
    }

    func timer(_ number: Int64) -> TimerID? { open[number] }

    mutating func remove(_ number: Int64) -> TimerID? { open.removeValue(forKey: number) }

    /// The engine ends the most recent timer of a name: the same one leaves this table.
    mutating func removeLatest(named name: String) {
        if let number = open.filter({ $0.value.name == name }).keys.max() { open[number] = nil }
    }
}

private func openTimer(_ c: CEngine, _ number: Int64) throws(CFailure) -> TimerID {
    guard let timer = c.timers.withLock({ $0.timer(number) }) else {
        throw CFailure(code: EINVAL, message: "timer \(number) is not open (unknown, or already ended)")
    }
    return timer
}

@_cdecl("outbox_start_timer")
public func outbox_start_timer(_ handle: UnsafeMutableRawPointer?, _ name: UnsafePointer<CChar>?) -> Int64 {
    var number: Int64 = 0
    let result = call(handle, "outbox_start_timer") { c in
        let timer = try c.engine.trackTimerStart(try text(name, "the timer's event name"))
        number = c.timers.withLock { $0.add(timer) }
    }
    return result == 0 ? number : Int64(result)
}

@_cdecl("outbox_pause_timer")
public func outbox_pause_timer(_ handle: UnsafeMutableRawPointer?, _ number: Int64) -> Int32 {
    call(handle, "outbox_pause_timer") { c in c.engine.trackTimerPause(try openTimer(c, number)) }
}

@_cdecl("outbox_resume_timer")
public func outbox_resume_timer(_ handle: UnsafeMutableRawPointer?, _ number: Int64) -> Int32 {
    call(handle, "outbox_resume_timer") { c in c.engine.trackTimerResume(try openTimer(c, number)) }
}

@_cdecl("outbox_end_timer")
public func outbox_end_timer(_ handle: UnsafeMutableRawPointer?, _ number: Int64,
                             _ propertiesJSON: UnsafePointer<CChar>?, _ flags: Int32) -> Int32 {
    call(handle, "outbox_end_timer") { c in
        let timer = try openTimer(c, number)
        // Checked before the timer ends, so that a caller can correct them and end it again.
        let properties = try properties(propertiesJSON), flags = try logFlags(flags)
        try endingTimer(c, { _ = $0.remove(number) }) {
            try c.engine.trackTimerEnd(timer, properties: properties, flags: flags)
        }
    }
}

@_cdecl("outbox_end_timer_named")
public func outbox_end_timer_named(_ handle: UnsafeMutableRawPointer?, _ name: UnsafePointer<CChar>?,
                                   _ propertiesJSON: UnsafePointer<CChar>?, _ flags: Int32) -> Int32 {
    call(handle, "outbox_end_timer_named") { c in
        let name = try text(name, "the timer's event name")
        let properties = try properties(propertiesJSON), flags = try logFlags(flags)
        try endingTimer(c, { $0.removeLatest(named: name) }) {
            try c.engine.trackTimerEnd(name, properties: properties, flags: flags)
        }
    }
}

/// Ends a timer through `end`, then forgets its number (`forget`) once the engine has ended it: on success, and when
/// the event was refused only after the timer ended (storage full, the event-name limit, a closed engine). A refusal
/// of the event itself (OUTBOX_EINVAL: its properties) comes first and leaves the timer open, to be ended again.
private func endingTimer(_ c: CEngine, _ forget: (inout CTimers) -> Void, _ end: () throws -> Void) throws {
    do {
        try end()
    } catch let error as OutboxError where code(for: error) != EINVAL {
        c.timers.withLock { forget(&$0) }
        throw error
    }
    c.timers.withLock { forget(&$0) }
}

// MARK: - Location and reachability (SPEC A8, N2)

@_cdecl("outbox_send_location")
public func outbox_send_location(_ handle: UnsafeMutableRawPointer?, _ latitude: Double, _ longitude: Double,
                                 _ accuracy: Double) -> Int32 {
    call(handle, "outbox_send_location") { c in
        guard !accuracy.isNaN else { throw CFailure(code: EINVAL, message: "the accuracy is NaN (a negative one is none)") }
        try c.engine.sendLocation(latitude: latitude, longitude: longitude, accuracy: accuracy < 0 ? nil : accuracy)
    }
}

@_cdecl("outbox_set_reachability")
public func outbox_set_reachability(_ handle: UnsafeMutableRawPointer?, _ reachability: Int32) -> Int32 {
    call(handle, "outbox_set_reachability") { c in
        switch reachability {
        case 1: c.engine.setReachability(.online)
        case 0: c.engine.setReachability(.offline)
        case -1: c.engine.setReachability(nil)
        default:
            throw CFailure(code: EINVAL, message: "reachability must be OUTBOX_ONLINE (1), OUTBOX_OFFLINE (0) or OUTBOX_WATCH_NETWORK (-1), got \(reachability)")
        }
    }
}
