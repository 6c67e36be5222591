import COutboxSupport
import Dispatch
import Glibc
import Logging
@_spi(CInterface) import Outbox
import Synchronization

// SPEC E2–E3: the functions of include/outbox.h. Each one catches every error and returns a code with a message
// in the calling thread's `outbox_last_error()`; nothing here traps on what a C caller can pass.

let EINVAL: Int32 = -1
let ECONFIG: Int32 = -2
let ECLOSED: Int32 = -3
let EFULL: Int32 = -4
let ELIMIT: Int32 = -5
let EDISABLED: Int32 = -6
let ETIMEDOUT: Int32 = -7

/// What an `outbox_engine *` points to: the engine, and the C-side closed flag that makes every call after
/// `outbox_close` return OUTBOX_ECLOSED at once (the engine keeps draining meanwhile in host mode).
final class CEngine: Sendable {
    let engine: OutboxEngine
    let closed = Atomic<Bool>(false)
    /// The duration timers the host started and has not ended (SPEC E5).
    let timers = Mutex(CTimers())

    init(engine: OutboxEngine) {
        self.engine = engine
    }
}

/// The engines handed out and not yet freed: `outbox_free` takes both engines and strings, and tells them apart
/// here rather than by guessing from the memory.
private let liveEngines = Mutex(Set<UInt>())

/// A refusal a C function reports, found before or instead of the engine's own errors (a bad key, a NULL, a timer
/// not open): its OUTBOX_E… code and the reason.
struct CFailure: Error {
    var code: Int32
    var message: String
}

@discardableResult
func fail(_ code: Int32, _ message: String) -> Int32 {
    var message = message
    return message.withUTF8 { outboxc_fail(code, UnsafeRawPointer($0.baseAddress!).assumingMemoryBound(to: CChar.self), $0.count) }
}

func code(for error: OutboxError) -> Int32 {
    switch error {
    case .invalidConfiguration: ECONFIG
    case .storageFull: EFULL
    case .tooManyEventNames: ELIMIT
    case .shutDown: ECLOSED
    default: EINVAL
    }
}

/// The engine behind a handle, or the failure to report.
@inline(__always)
func openEngine(_ handle: UnsafeMutableRawPointer?, _ function: StaticString) -> CEngine? {
    guard let handle else {
        fail(EINVAL, "\(function): the engine is NULL")
        return nil
    }
    let engine = Unmanaged<CEngine>.fromOpaque(handle).takeUnretainedValue()
    guard !engine.closed.load(ordering: .acquiring) else {
        fail(ECLOSED, "\(function): the engine is closed")
        return nil
    }
    return engine
}

@_cdecl("outbox_open")
public func outbox_open(_ configJSON: UnsafePointer<CChar>?, _ uvLoop: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    var configuration: Configuration
    let level: Logger.Level
    do throws(CFailure) {
        (configuration, level) = try ConfigDecoder.configuration(try ConfigDecoder.members(configJSON))
    } catch {
        fail(error.code, "outbox_open: \(error.message)")
        return nil
    }
    let target = logTarget.withLock { $0 }
    configuration.logger = Logger(label: "outbox", factory: { _ in CLogHandler(logLevel: level, target: target) })
    configuration.logger.logLevel = level
    if let uvLoop { configuration.runMode = .hostLoop(uvLoop) }
    do {
        let engine = try OutboxEngine(configuration: configuration)
        let handle = Unmanaged.passRetained(CEngine(engine: engine)).toOpaque()
        let key = UInt(bitPattern: handle)
        liveEngines.withLock { _ = $0.insert(key) }
        return handle
    } catch let error as OutboxError {
        fail(code(for: error), "outbox_open: \(error)")
    } catch {
        fail(EINVAL, "outbox_open: \(error)")
    }
    return nil
}

@_cdecl("outbox_track")
public func outbox_track(_ handle: UnsafeMutableRawPointer?, _ name: UnsafePointer<CChar>?,
                         _ propertiesJSON: UnsafePointer<CChar>?, _ flags: Int32) -> Int32 {
    guard let c = openEngine(handle, "outbox_track") else { return handle == nil ? EINVAL : ECLOSED }
    let eventName: String, priority: LogFlags
    do throws(CFailure) {
        eventName = try text(name, "the event name")
        priority = try logFlags(flags)
    } catch {
        return fail(error.code, "outbox_track: \(error.message)")
    }
    let engine = c.engine
    guard let propertiesJSON else {
        return track(engine, eventName, UnsafeBufferPointer(start: nil, count: 0), priority)
    }
    let json = UnsafeBufferPointer(start: UnsafeRawPointer(propertiesJSON).assumingMemoryBound(to: UInt8.self),
                                   count: strlen(propertiesJSON))
    // The usual handful of properties stays on the stack: a heap allocation on the caller's thread shows in the
    // slowest calls. More than `onStack` (beyond the 20 kept, but all take part in the key order) go to an array.
    let onStack = 32
    let result = withUnsafeTemporaryAllocation(of: (key: String, value: ScannedPropertyValue).self, capacity: onStack) { buffer in
        var count = 0
        // One element at a time: the destroy of the concrete type, not the runtime's generic array destroy.
        defer { for index in 0..<count { _ = buffer.moveElement(from: index) } }
        do throws(JSONError) {
            var scanner = JSONScanner(json)
            try scanner.properties { key, value throws(JSONError) in
                guard count < onStack else { throw JSONError(message: "") }
                buffer.initializeElement(at: count, to: (key, value))
                count += 1
            }
        } catch {
            guard error.message.isEmpty else { return fail(EINVAL, "outbox_track '\(eventName)': properties: \(error.message)") }
            return Int32.min
        }
        return trackSorted(engine, eventName, UnsafeMutableBufferPointer(rebasing: buffer[0..<count]), priority)
    }
    guard result == Int32.min else { return result }
    var many: [(key: String, value: ScannedPropertyValue)] = []
    do throws(JSONError) {
        var scanner = JSONScanner(json)
        try scanner.properties { key, value throws(JSONError) in many.append((key, value)) }
    } catch {
        return fail(EINVAL, "outbox_track '\(eventName)': properties: \(error.message)")
    }
    return many.withUnsafeMutableBufferPointer { trackSorted(engine, eventName, $0, priority) }
}

/// Sorts the properties by key (the order `trackEvent` keeps the first 20 in), refuses a key given twice, tracks.
@inline(__always)
private func trackSorted(_ engine: OutboxEngine, _ name: String, _ properties: UnsafeMutableBufferPointer<(key: String, value: ScannedPropertyValue)>,
                         _ flags: LogFlags) -> Int32 {
    var properties = properties
    properties.sort { $0.key < $1.key }
    if properties.count > 1 {
        for index in 1..<properties.count where properties[index].key == properties[index - 1].key {
            return fail(EINVAL, "outbox_track '\(name)': properties: property '\(properties[index].key)' appears twice")
        }
    }
    return track(engine, name, UnsafeBufferPointer(properties), flags)
}

@inline(__always)
private func track(_ engine: OutboxEngine, _ name: String, _ properties: UnsafeBufferPointer<(key: String, value: ScannedPropertyValue)>,
                   _ flags: LogFlags) -> Int32 {
    do throws(OutboxError) {
        guard try engine.trackEvent(name, sortedProperties: properties, flags: flags) else {
            return fail(EDISABLED, "outbox_track: tracking is off (outbox_set_enabled(e, 0)); nothing was stored")
        }
        return 0
    } catch {
        return fail(code(for: error), "outbox_track: \(error)")
    }
}

public typealias CDone = @convention(c) (Int32, UnsafeMutableRawPointer?) -> Void

/// The C caller's context travels with its callback; the caller vouches for its thread safety.
private struct CCallback: @unchecked Sendable {
    let function: CDone
    let context: UnsafeMutableRawPointer?
}

@_cdecl("outbox_dispatch")
public func outbox_dispatch(_ handle: UnsafeMutableRawPointer?, _ done: CDone?, _ context: UnsafeMutableRawPointer?) -> Int32 {
    guard let c = openEngine(handle, "outbox_dispatch") else { return handle == nil ? EINVAL : ECLOSED }
    guard let done else {
        c.engine.dispatch()
        return 0
    }
    let callback = CCallback(function: done, context: context)
    do {
        try c.engine.dispatchReporting { result in
            let value: Int32 = switch result {
            case .good: 0
            case .noData: 1
            case .error: 2
            }
            callback.function(value, callback.context)
        }
    } catch {
        return fail(ECLOSED, "outbox_dispatch: the engine is closed")
    }
    return 0
}

@_cdecl("outbox_status")
public func outbox_status(_ handle: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<CChar>? {
    guard let c = openEngine(handle, "outbox_status") else { return nil }
    let status: EngineStatus
    do {
        status = try c.engine.statusWaiting()
    } catch let error as OutboxError {
        fail(code(for: error), "outbox_status: \(error)")
        return nil
    } catch {
        fail(EINVAL, "outbox_status: \(error)")
        return nil
    }
    return strdup(statusJSON(status))
}

/// SPEC X4's keys, then this engine's counters, in the CLI's spelling.
func statusJSON(_ s: EngineStatus) -> String {
    func quoted(_ text: String?) -> String {
        guard let text else { return "null" }
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
    let age = s.oldestAgeSeconds.map { "\($0)" } ?? "null"
    return "{\"pending_normal\":\(s.pendingNormal),\"pending_critical\":\(s.pendingCritical),\"in_flight\":\(s.inFlight),"
        + "\"bytes\":\(s.bytes),\"oldest_age_s\":\(age),\"dead_letters\":\(s.deadLetters),\"enabled\":\(s.enabled),"
        + "\"disabled_reason\":\(quoted(s.disabledReason)),\"install_id\":\(quoted(s.installID)),"
        + "\"destination\":\(quoted(s.destination)),\"server_rejected\":\(s.serverRejected),"
        + "\"rotating_store_key\":\(s.rotatingStoreKey),"
        + "\"stored\":\(s.stored),\"evicted\":\(s.evicted),\"rejected\":\(s.rejected),\"expired\":\(s.expired),"
        + "\"delivered\":\(s.delivered),\"dead_lettered\":\(s.deadLettered),\"retries\":\(s.retries),\"requests\":\(s.requests),\"lost_at_open\":\(s.lostAtOpen),\"unreadable\":\(s.unreadable),"
        + "\"dropped_by_policy\":\(s.droppedByPolicy),\"skipped\":\(s.skipped)}"
}

@_cdecl("outbox_set_enabled")
public func outbox_set_enabled(_ handle: UnsafeMutableRawPointer?, _ enabled: Int32) -> Int32 {
    call(handle, "outbox_set_enabled") { try $0.engine.setEnabled(enabled != 0) }
}

@_cdecl("outbox_update")
public func outbox_update(_ handle: UnsafeMutableRawPointer?, _ configJSON: UnsafePointer<CChar>?) -> Int32 {
    call(handle, "outbox_update") { c in
        let members = try ConfigDecoder.members(configJSON)
        let fixed = members.map(\.key).filter { !ConfigDecoder.updateKeys.contains($0) }
        guard fixed.isEmpty else {
            throw CFailure(code: ECONFIG, message: "only \(ConfigDecoder.updateKeys.sorted().joined(separator: ", ")) can change at run time; refused: \(fixed.joined(separator: ", "))")
        }
        try c.engine.update { configuration in
            for (key, value) in members {
                do throws(CFailure) { try ConfigDecoder.apply(key, value, to: &configuration) } catch { throw error }
            }
            do throws(CFailure) {
                try ConfigDecoder.checkDestinationKeys(members, destination: configuration.destination)
            } catch { throw error }
        }
    }
}

@_cdecl("outbox_close")
public func outbox_close(_ handle: UnsafeMutableRawPointer?, _ drainMs: Int32) -> Int32 {
    guard let handle else { return fail(EINVAL, "outbox_close: the engine is NULL") }
    return close(Unmanaged<CEngine>.fromOpaque(handle).takeUnretainedValue(), drainMs: drainMs)
}

private func close(_ c: CEngine, drainMs: Int32) -> Int32 {
    guard drainMs >= 0 else { return fail(EINVAL, "outbox_close: drain_ms must be 0 or more, got \(drainMs)") }
    // A log line may come from inside a commit or delivery's bookkeeping, which a close would re-enter.
    guard outboxc_in_log_handler() == 0 else {
        return fail(EINVAL, "outbox_close: not from inside the log handler (outbox.h)")
    }
    let engine = c.engine
    if engine.runsOnHostLoop {
        guard engine.isOnEngineLoopThread else {
            return fail(EINVAL, "outbox_close: with a caller's loop, call it on the thread that runs that loop")
        }
    } else if engine.isOnEngineLoopThread {
        return fail(EINVAL, "outbox_close: not from a callback on the engine's own thread (it waits for that thread)")
    }
    guard c.closed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
        return fail(ECLOSED, "outbox_close: the engine is already closed")
    }
    if engine.runsOnHostLoop {
        // Returns at once, also from a `done` callback: the drain holds the host's `uv_run` (SPEC C7) and stops
        // the engine from a timer of its own, after the callback returned.
        engine.drain(forMs: UInt64(drainMs)) { _ in engine.shutdown() }
        return 0
    }
    let finished = DispatchSemaphore(value: 0)
    let drained = Atomic<Bool>(false)
    engine.drain(forMs: UInt64(drainMs)) { wasDrained in
        drained.store(wasDrained, ordering: .releasing)
        finished.signal()
    }
    finished.wait()
    engine.shutdown()
    guard drained.load(ordering: .acquiring) else {
        return fail(ETIMEDOUT, "outbox_close: the drain of \(drainMs) ms ended with logs still stored; they stay for the next start")
    }
    return 0
}

@_cdecl("outbox_free")
public func outbox_free(_ pointer: UnsafeMutableRawPointer?) {
    guard let pointer else { return }
    let key = UInt(bitPattern: pointer)
    guard liveEngines.withLock({ $0.contains(key) }) else {
        free(pointer)
        return
    }
    let c = Unmanaged<CEngine>.fromOpaque(pointer).takeUnretainedValue()
    if !c.closed.load(ordering: .acquiring) {
        let result = close(c, drainMs: 0)
        // On the wrong thread for a caller's loop the engine cannot stop here: keep it rather than free what the
        // loop still uses (the message says why).
        if result == EINVAL { return }
    }
    liveEngines.withLock { _ = $0.remove(key) }
    Unmanaged<CEngine>.fromOpaque(pointer).release()
}

@_cdecl("outbox_set_log_handler")
public func outbox_set_log_handler(_ function: CLogFunction?, _ context: UnsafeMutableRawPointer?) {
    let target = CLogTarget(function: function, context: context)
    logTarget.withLock { $0 = target }
}
