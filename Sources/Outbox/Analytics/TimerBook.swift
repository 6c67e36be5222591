/// SPEC A4 (Sensors' `SATrackTimer`): duration timers as pure value logic. Every call takes the monotonic
/// reading (CLOCK_BOOTTIME, nanoseconds) of the moment it was made, so durations never see wall-clock changes and
/// tests drive time by hand. The engine keeps one book for timers and one for screens (SPEC A6) behind a lock.
///
/// Rules:
/// - a duration is the sum of its running segments; a segment ≤ 0 or ≥ 24 h counts 0 (a clock oddity, not a
///   stretch of use);
/// - timers are found by handle, or by name — a name means its most recently started open timer;
/// - pausing a paused timer and resuming a running one do nothing;
/// - entering the background pauses the running timers, and entering the foreground resumes exactly those: a timer
///   the user paused stays paused, and a timer started (or resumed by the user) in the background starts counting
///   at the next foreground.
///
/// Unlike Sensors, an ended timer is removed from both look-ups (its name and its handle), so nothing leaks; the
/// book also holds at most `capacity` open timers and forgets the oldest beyond that.
struct TimerBook: Sendable {
    /// A segment of this length or more counts 0 (Sensors' sanity clamp).
    static let maxSegmentNs: Int64 = 24 * 3600 * 1_000_000_000
    /// Open timers kept at most; starting one more forgets the oldest.
    static let defaultCapacity = 1024

    /// One timer's identity: its name and the serial number of its start.
    struct Handle: Hashable, Sendable {
        var name: String
        var serial: UInt64
    }

    enum Key: Hashable, Sendable {
        case name(String)
        case handle(Handle)
    }

    enum State: Equatable, Sendable {
        case running(sinceNs: Int64)
        /// Paused by `pause`: stays paused across background and foreground.
        case pausedByUser
        /// Paused because the app is in the background: resumes at the next foreground.
        case pausedForBackground
    }

    struct Entry: Equatable, Sendable {
        var handle: Handle
        var state: State
        var accumulatedNs: Int64 = 0
        /// What the caller attached at start (a screen's path).
        var detail: String?
    }

    /// What `end` found.
    struct Ended: Equatable, Sendable {
        var name: String
        /// nil when no open timer matched (the event is tracked without a duration).
        var durationNs: Int64?
        var detail: String?
    }

    let capacity: Int
    private var entries: [UInt64: Entry] = [:]
    /// Open timers per name, in start order (the last one is "the most recent").
    private var byName: [String: [UInt64]] = [:]
    private var nextSerial: UInt64 = 1
    private(set) var inBackground = false

    init(capacity: Int = TimerBook.defaultCapacity) {
        self.capacity = max(1, capacity)
    }

    var count: Int { entries.count }

    func entry(_ key: Key) -> Entry? { serial(for: key).flatMap { entries[$0] } }

    /// Starts a timer; returns its handle and, when the book was full, the handle of the oldest timer it forgot.
    mutating func start(_ name: String, nowNs: Int64, detail: String? = nil) -> (handle: Handle, forgotten: Handle?) {
        var forgotten: Handle?
        if entries.count >= capacity, let oldest = entries.keys.min() {
            forgotten = entries[oldest]?.handle
            remove(oldest)
        }
        let handle = Handle(name: name, serial: nextSerial)
        nextSerial += 1
        let state: State = inBackground ? .pausedForBackground : .running(sinceNs: nowNs)
        entries[handle.serial] = Entry(handle: handle, state: state, detail: detail)
        byName[name, default: []].append(handle.serial)
        return (handle, forgotten)
    }

    /// Pauses a running timer (also one paused for the background: it then stays paused at the foreground).
    mutating func pause(_ key: Key, nowNs: Int64) {
        guard let serial = serial(for: key), var entry = entries[serial] else { return }
        switch entry.state {
        case .running(let since):
            entry.accumulatedNs += Self.segment(nowNs - since)
            entry.state = .pausedByUser
        case .pausedForBackground:
            entry.state = .pausedByUser
        case .pausedByUser:
            return
        }
        entries[serial] = entry
    }

    /// Resumes a timer the user paused; in the background it will count from the next foreground.
    mutating func resume(_ key: Key, nowNs: Int64) {
        guard let serial = serial(for: key), var entry = entries[serial], entry.state == .pausedByUser else { return }
        entry.state = inBackground ? .pausedForBackground : .running(sinceNs: nowNs)
        entries[serial] = entry
    }

    /// Ends a timer and forgets it. A key that matches no open timer gives `durationNs == nil`.
    mutating func end(_ key: Key, nowNs: Int64) -> Ended {
        guard let serial = serial(for: key), let entry = entries[serial] else {
            switch key {
            case .name(let name): return Ended(name: name)
            case .handle(let handle): return Ended(name: handle.name)
            }
        }
        remove(serial)
        return Ended(name: entry.handle.name, durationNs: Self.duration(of: entry, nowNs: nowNs), detail: entry.detail)
    }

    /// The duration so far, without ending the timer.
    func elapsedNs(_ key: Key, nowNs: Int64) -> Int64? {
        entry(key).map { Self.duration(of: $0, nowNs: nowNs) }
    }

    mutating func enterBackground(nowNs: Int64) {
        guard !inBackground else { return }
        inBackground = true
        for (serial, var entry) in entries {
            guard case .running(let since) = entry.state else { continue }
            entry.accumulatedNs += Self.segment(nowNs - since)
            entry.state = .pausedForBackground
            entries[serial] = entry
        }
    }

    mutating func enterForeground(nowNs: Int64) {
        guard inBackground else { return }
        inBackground = false
        for (serial, var entry) in entries where entry.state == .pausedForBackground {
            entry.state = .running(sinceNs: nowNs)
            entries[serial] = entry
        }
    }

    /// A segment of running time as it counts (SPEC A4: ≤ 0 or ≥ 24 h counts 0).
    static func segment(_ deltaNs: Int64) -> Int64 {
        deltaNs <= 0 || deltaNs >= maxSegmentNs ? 0 : deltaNs
    }

    static func duration(of entry: Entry, nowNs: Int64) -> Int64 {
        if case .running(let since) = entry.state { return entry.accumulatedNs + segment(nowNs - since) }
        return entry.accumulatedNs
    }

    /// Milliseconds with 3 decimals (SPEC A4), as the `double` JSON carries them: 1234.567.
    static func milliseconds(_ ns: Int64) -> Double {
        let micros = ns >= 0 ? (ns + 500) / 1000 : -((-ns + 500) / 1000)
        return Double(micros) / 1000
    }

    private func serial(for key: Key) -> UInt64? {
        switch key {
        case .name(let name): return byName[name]?.last
        case .handle(let handle): return entries[handle.serial]?.handle == handle ? handle.serial : nil
        }
    }

    private mutating func remove(_ serial: UInt64) {
        guard let entry = entries.removeValue(forKey: serial) else { return }
        let name = entry.handle.name
        byName[name]?.removeAll { $0 == serial }
        if byName[name]?.isEmpty == true { byName[name] = nil }
    }
}
