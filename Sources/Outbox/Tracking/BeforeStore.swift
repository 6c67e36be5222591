import FoundationEssentials
import Synchronization
import CoreMetrics

/// An event as the before-store hook (`Configuration.beforeStore`, SPEC H1) sees it: the name and the properties the
/// call was given — or, for `trackTimerEnd` and the categorised `trackEvent`s, with the `$event_duration` and
/// `$event_value` they add. The hook may change both; what it leaves is validated as any tracked event (SPEC T2–T4).
///
/// ```swift
/// configuration.beforeStore = { event in
///     if event.name.hasPrefix("debug.") { return false }          // dropped: counted as dropped_by_policy
///     event.properties["email"] = nil                              // never reaches the disk
///     if let plan = event.properties.removeValue(forKey: "tier") { event.properties["plan"] = plan }
///     return true
/// }
/// ```
public struct OutgoingEvent: Sendable, Equatable {
    public var name: String
    public var properties: [String: PropertyValue]

    public init(name: String, properties: [String: PropertyValue] = [:]) {
        self.name = name
        self.properties = properties
    }
}

/// SPEC H1: the hook a configuration holds, boxed so that an update can tell a new hook from the one it has (a
/// closure has no equality) and so that callers reach it through one atomic pointer (`BeforeStoreSlot`).
/// `run` may throw: the C interface's hook refuses a replacement it cannot read; the Swift hook never does.
@_spi(CInterface) public final class BeforeStoreHook: Sendable {
    let run: @Sendable (inout OutgoingEvent) throws(OutboxError) -> Bool
    /// The Swift closure it was made from, for `Configuration.beforeStore`'s getter.
    let closure: (@Sendable (inout OutgoingEvent) -> Bool)?

    init(_ closure: @escaping @Sendable (inout OutgoingEvent) -> Bool) {
        self.closure = closure
        self.run = { (event: inout OutgoingEvent) throws(OutboxError) -> Bool in closure(&event) }
    }

    /// A hook that may refuse the call with an error (the C interface's, whose replacement JSON is read here).
    @_spi(CInterface) public init(throwing run: @escaping @Sendable (inout OutgoingEvent) throws(OutboxError) -> Bool) {
        self.closure = nil
        self.run = run
    }
}

extension Configuration {
    /// SPEC H1: a hook on the caller's thread, run inside `trackEvent` (and `trackTimerEnd`, the categorised
    /// `trackEvent`s) before the event is validated and handed to the store: it may rename the event, add, change or
    /// remove properties, or drop it (return false; counted in `status().droppedByPolicy`). What it returns is
    /// validated as any event (T2–T4; a refusal is the call's error); what it removes never reaches the disk. Screens,
    /// user properties, identify traits and the engine's own `$AppStart`/`$AppEnd` do not pass through it. nil
    /// (default): no hook, and no cost. `update` may set, replace or clear it. A hook that traps is the host's bug.
    public var beforeStore: (@Sendable (inout OutgoingEvent) -> Bool)? {
        get {
            guard let hook = beforeStoreHook else { return nil }
            return hook.closure ?? { event in (try? hook.run(&event)) ?? false }
        }
        set { beforeStoreHook = newValue.map(BeforeStoreHook.init) }
    }

    /// The C interface's hook (`outbox_set_before_store`), which may refuse the call.
    @_spi(CInterface) public mutating func setBeforeStore(_ hook: BeforeStoreHook?) {
        beforeStoreHook = hook
    }
}

/// SPEC H1: where callers find the hook — one atomic load when there is none. An update publishes a new hook here
/// at once; every hook published stays alive as long as the engine does, since a caller may still be running one that
/// an update replaced (updates are rare: a pointer each). Unchecked: the atomic holds a raw pointer, and the hook it
/// points to is a `Sendable` object kept alive by `kept`.
final class BeforeStoreSlot: @unchecked Sendable {
    private let current = Atomic<UnsafeRawPointer?>(nil)
    private let kept = Mutex<[BeforeStoreHook]>([])
    /// Events the hook dropped (SPEC H1's `dropped_by_policy`), since the engine started.
    let dropped = Atomic<Int>(0)
    /// BEHAVIOUR O1: the same drops as `outbox_logs_total{outcome="dropped_by_policy"}`, made once per engine.
    let droppedMetric = Counter(label: "outbox_logs_total", dimensions: [("outcome", "dropped_by_policy")])

    init(_ hook: BeforeStoreHook?) {
        publish(hook)
    }

    /// The hook, or nil: the only cost without one.
    @inline(__always) var hook: BeforeStoreHook? {
        guard let raw = current.load(ordering: .acquiring) else { return nil }
        return Unmanaged<BeforeStoreHook>.fromOpaque(raw).takeUnretainedValue()
    }

    func publish(_ hook: BeforeStoreHook?) {
        kept.withLock { kept in
            if let hook, !kept.contains(where: { $0 === hook }) { kept.append(hook) }
            current.store(hook.map { UnsafeRawPointer(Unmanaged.passUnretained($0).toOpaque()) }, ordering: .releasing)
        }
    }
}

extension OutgoingEvent {
    /// SPEC H1: the refusals of T2–T3 for what a call was given, before the hook sees it: a call refused without a
    /// hook is refused with one (an empty name, NaN, an infinity, a date outside 0001–9999), and the hook never meets
    /// a value the engine cannot store. Cutting (long names, keys and strings, a 21st property) comes after the hook.
    func checkRefusals() throws(OutboxError) {
        guard !name.isEmpty else { throw .emptyEventName }
        // The first refused key in key order, as `EventValidator` names it.
        var refused: (key: String, error: OutboxError)?
        for (key, value) in properties {
            var reason: String?
            switch value {
            case .double(let number) where !number.isFinite:
                reason = number.isNaN ? "NaN is not a number JSON can carry" : "infinity is not allowed"
            case .date(let date) where !EventValidator.validDateRange.contains(date.timeIntervalSince1970):
                reason = "a date must lie in the years 0001–9999 (ISO 8601 dateTime)"
            default:
                break
            }
            if let reason, refused.map({ key < $0.key }) ?? true {
                refused = (key, .invalidPropertyValue(key: key, reason: reason))
            }
        }
        if let refused { throw refused.error }
    }

    /// The event as the C interface's hook receives it: `{"name":"…","properties":{…}}`, keys in order, NUL-terminated.
    /// Dates (which no C call makes) are ISO 8601 strings.
    @_spi(CInterface) public var cJSON: [UInt8] {
        var writer = JSONWriter(capacity: 64 + name.utf8.count + properties.count * 48)
        writer.raw("{\"name\":")
        writer.string(name)
        writer.raw(",\"properties\":{")
        for (index, (key, value)) in properties.sorted(by: { $0.key < $1.key }).enumerated() {
            if index > 0 { writer.raw(UInt8(ascii: ",")) }
            writer.string(key)
            writer.raw(UInt8(ascii: ":"))
            switch value {
            case .string(let text): writer.string(text)
            case .int(let number): writer.int(number)
            case .double(let number) where number.isFinite: writer.double(number)
            case .double: writer.raw("null")
            case .bool(let flag): writer.bool(flag)
            case .date(let date): writer.timestamp(ms: Int64((date.timeIntervalSince1970 * 1000).rounded(.down)))
            }
        }
        writer.raw("}}")
        writer.raw(UInt8(0))
        return writer.bytes
    }

    /// A C hook's replacement, `{"name":"…","properties":{…}}` (`properties` optional or null: none), read as
    /// `outbox_track` reads its arguments: valid UTF-8, properties a flat object of strings, numbers and booleans, each
    /// key once. Anything else refuses the call, naming what was wrong. The text is copied here: the host keeps its memory.
    @_spi(CInterface) public init(replacementJSON json: UnsafeBufferPointer<UInt8>) throws(OutboxError) {
        var name: String?
        var properties: [String: PropertyValue] = [:]
        var sawProperties = false
        do throws(JSONError) {
            var scanner = JSONScanner(json)
            guard scanner.peekKind() == .object else { throw JSONError(message: "expected an object {\"name\":…,\"properties\":{…}}") }
            try scanner.members { (key: JSONText, scanner: inout JSONScanner) throws(JSONError) in
                switch key.string {
                case "name":
                    guard name == nil else { throw JSONError(message: "'name' appears twice") }
                    guard scanner.peekKind() == .string else { throw JSONError(message: "'name' must be a string") }
                    name = try scanner.text().string
                case "properties":
                    guard !sawProperties else { throw JSONError(message: "'properties' appears twice") }
                    sawProperties = true
                    if scanner.peekKind() == .null { _ = try scanner.scalar(); return }
                    let range = try scanner.skip()
                    var inner = JSONScanner(UnsafeBufferPointer(rebasing: json[range]))
                    try inner.properties { key, value throws(JSONError) in
                        guard properties[key] == nil else { throw JSONError(message: "property '\(key)' appears twice") }
                        switch value {
                        case .value(let value): properties[key] = value
                        case .utf8(let text): properties[key] = .string(String(decoding: text, as: UTF8.self))
                        }
                    }
                case let other:
                    throw JSONError(message: "unknown key '\(other)' (a replacement has \"name\" and \"properties\")")
                }
            }
            guard scanner.peekKind() == nil else { throw JSONError(message: "unexpected text after the object") }
        } catch {
            throw .beforeStoreHook("its replacement JSON: \(error.message)")
        }
        guard let name else { throw .beforeStoreHook("its replacement JSON has no \"name\"") }
        self.init(name: name, properties: properties)
    }
}
