import OutboxMock

/// SPEC F9: how the fleet went through its scenario's fault — the requests the devices made while connections were
/// refused, how long after the fault the last log arrived, and the requests' peak after the fault against their steady
/// rate before it. Requests are the engines' own counts (`FleetSample.requests`): a refused connection never reaches
/// the mock. Times are the samples' (seconds since the sampler started).
struct FleetRecovery {
    /// The scenario's refused windows, on the samples' time axis.
    var windows: [(from: Double, until: Double)]
    /// Requests during the fault (its part within the run) per device per minute of it; nil when the run ended before
    /// the fault began.
    var faultRequestsPerDevicePerMinute: Double?
    /// From the fault's end to the mock's receipt of the last log of its backlog — the logs tracked before it ended
    /// (0 when all of them arrived before); nil when the run ended before the fault did, logs were still pending at
    /// its end or the mock's records were not read. Logs tracked after the fault are not waited for: at `--rate 0.5` tracking goes on 80 s past
    /// `outage-60`'s end.
    var recoverySeconds: Double?
    /// The most requests per second between two counted samples in the 10 s after the fault.
    var recoveryPeakRPS: Double?
    /// Requests per second in the minute before the fault (from the first event when that is nearer).
    var steadyRPS: Double?
    /// Devices open at the first tracked event: all of them when a paced run opened them first (BEHAVIOUR F9), so that
    /// `steadyRPS` is the whole fleet's rate.
    var devicesOpenAtFirstEvent: Int?

    static let peakWindow = 10.0
    static let steadyWindow = 60.0

    /// The scenario's refuse rules that have an end (`until_s`), as (from, until) seconds of its clock.
    static func faultWindows(_ scenario: Scenario?) -> [(from: Double, until: Double)] {
        guard let scenario else { return [] }
        return scenario.rules.compactMap { rule in
            guard case .refuse = rule.outcome, let until = rule.match.untilSeconds else { return nil }
            return (rule.match.afterSeconds ?? 0, until)
        }.sorted { $0.from < $1.from }
    }

    /// nil when the scenario refuses nothing in a window or nothing was tracked (its clock never started).
    /// - Parameters:
    ///   - firstEventT: the fleet's first tracked event, when the scenario clock started, in sample time.
    ///   - faultEndMs: wall-clock ms of the last window's end (`faultEndMs(_:firstEventWallMs:)`).
    ///   - lastBacklogReceivedMs: when the mock received the last log tracked before then; nil when there was none.
    ///   - backlogKnown: the mock's records were read and nothing was left pending (else `recoverySeconds` is nil).
    static func measure(scenarioWindows: [(from: Double, until: Double)], firstEventT: Double?, samples all: [FleetSample],
                        devices: Int, faultEndMs: Int64?, lastBacklogReceivedMs: Int64?, backlogKnown: Bool) -> FleetRecovery? {
        // Only the samples at which every loop counted its requests (FleetSampler.countSpacing).
        let samples = all.filter(\.requestsCounted)
        guard !scenarioWindows.isEmpty, let firstEventT, let last = samples.last else { return nil }
        let windows = scenarioWindows.map { (from: firstEventT + $0.from, until: firstEventT + $0.until) }
        var recovery = FleetRecovery(windows: windows)
        let requests = samples.map { ($0.t, Double($0.requests)) }

        var faultRequests = 0.0
        var faultSeconds = 0.0
        for window in windows where window.from < last.t {
            let until = min(window.until, last.t)
            faultRequests += value(requests, at: until) - value(requests, at: window.from)
            faultSeconds += until - window.from
        }
        if faultSeconds > 0, devices > 0 {
            recovery.faultRequestsPerDevicePerMinute = faultRequests / Double(devices) / (faultSeconds / 60)
        }

        let start = windows[0].from
        let steadyFrom = max(firstEventT, start - steadyWindow)
        if start > steadyFrom {
            recovery.steadyRPS = (value(requests, at: start) - value(requests, at: steadyFrom)) / (start - steadyFrom)
        }

        let end = windows.map(\.until).max() ?? start
        guard last.t >= end else { return recovery }
        let rates = zip(samples, samples.dropFirst()).compactMap { a, b -> Double? in
            guard b.t > a.t, b.t > end, a.t < end + peakWindow else { return nil }
            return Double(b.requests - a.requests) / (b.t - a.t)
        }
        recovery.recoveryPeakRPS = rates.max()
        if backlogKnown, let faultEndMs {
            recovery.recoverySeconds = max(0, Double((lastBacklogReceivedMs ?? faultEndMs) - faultEndMs) / 1000)
        }
        return recovery
    }

    /// The wall-clock ms at which the scenario's last refused window ends, its clock having started at the first event.
    static func faultEndMs(_ scenarioWindows: [(from: Double, until: Double)], firstEventWallMs: Int64?) -> Int64? {
        guard let firstEventWallMs, let until = scenarioWindows.map(\.until).max() else { return nil }
        return firstEventWallMs + Int64((until * 1000).rounded())
    }

    /// A cumulative count at `t`, linear between the samples around it.
    static func value(_ points: [(Double, Double)], at t: Double) -> Double {
        guard let first = points.first, let last = points.last else { return 0 }
        if t <= first.0 { return first.1 }
        if t >= last.0 { return last.1 }
        var low = 0
        var high = points.count - 1
        while high - low > 1 {
            let mid = (low + high) / 2
            if points[mid].0 <= t { low = mid } else { high = mid }
        }
        let (a, b) = (points[low], points[high])
        return b.0 > a.0 ? a.1 + (b.1 - a.1) * (t - a.0) / (b.0 - a.0) : b.1
    }

    /// summary.json's keys (SPEC F9), null where a figure was not measured.
    var jsonFields: [(String, String)] {
        func number(_ value: Double?) -> String { value.map { cFormat("%.2f", $0) } ?? "null" }
        return [
            ("fault_requests_per_device_per_min", number(faultRequestsPerDevicePerMinute)),
            ("recovery_s", number(recoverySeconds)), ("recovery_peak_rps", number(recoveryPeakRPS)),
            ("steady_rps", number(steadyRPS)),
            ("devices_open_at_first_event", devicesOpenAtFirstEvent.map(String.init) ?? "null"),
        ]
    }

    /// The same keys, all null: a run whose scenario refuses nothing in a window.
    static let nullFields: [(String, String)] = ["fault_requests_per_device_per_min", "recovery_s", "recovery_peak_rps",
                                                  "steady_rps", "devices_open_at_first_event"].map { ($0, "null") }
}
