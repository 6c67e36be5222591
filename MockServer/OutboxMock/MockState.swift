import Foundation
import NIOConcurrencyHelpers

/// A log as stored: its facts, and where its JSON is read back from (`StoredLogReader`).
struct StoredLog {
    var id: UUIDKey
    var type: LogType
    var name: String?
    /// The request's body, shared by its logs (App Center), or the event's own bytes (other vendors).
    var body: StoredBody
    /// The log object's bytes in the body's JSON.
    var span: Range<Int>
    var install: String { body.install }
    var receivedAtMs: Int64 { body.receivedAtMs }
    /// Other vendors' events are stored here too, so that `/_mock/logs` keeps one arrival order; for them
    /// `id` is zero and `type` is `.event` (their key is inside the JSON).
    var vendor: Vendor { body.vendor }
}

/// A vendor's de-duplication key, scoped by vendor (SPEC V3).
struct VendorKey: Hashable {
    var vendor: Vendor
    var key: String
}

/// Everything the server has recorded since start or reset, behind one lock. Each request takes
/// the lock a few times (head, decision, answer) — never once per log.
struct RecordedState {
    var engine: ScenarioEngine
    /// Monotonic time of the start or last reset: `at`, `after_s` and `until_s` count from here.
    var epochNs: UInt64
    /// Bumped by every reset or scenario swap, so timers of the previous scenario do nothing.
    var generation = 0
    var requestCount = 0
    /// Ingestion request bodies' bytes as they came over the wire (compressed), for benchmarks; not in `MockStats`.
    var wireBytes = 0
    var statusCounts: [Int: Int] = [:]
    var faults: [FaultKind: Int] = [:]
    /// App Center's log ids, the key it de-duplicates by (SPEC M2): a flat table, not a `Set` (SPEC M10).
    var seen = UUIDSet()
    var logs: [StoredLog] = []
    var installs: [String: MockStats.InstallStats] = [:]
    var lateLogs = 0
    /// Every delivery delay, in arrival order: `MockCore` sorts them outside the lock for the percentiles.
    var delays: [Int64] = []
    /// Their sum (wrapping), kept as they arrive, so that a metrics scrape does not add them up under the lock.
    var delaySumMs: Int64 = 0
    var histogram = [Int](repeating: 0, count: DelayHistogram.bounds.count)
    var requests: [MockRequest] = []
    var inFlight = 0
    var maxInFlight = 0
    var replayCursor = 0
    /// Per vendor (SPEC V4), App Center included: its events are also `MockStats`' `logs*` counts.
    var vendorCounts: [Vendor: MockStats.VendorStats] = [:]
    var vendorSeen = Set<VendorKey>()

    init(scenario: Scenario, now: UInt64) {
        engine = ScenarioEngine(scenario: scenario)
        epochNs = now
    }

    func elapsedMs(_ now: UInt64) -> Double { Double(now &- epochNs) / 1_000_000 }

    /// The scenario's decision on a request whose body was read (unless its head settled it): the rule's or the
    /// replay's outcome, its faults and network shaping (SPEC M3, M8). Counts matches and draws from the random source.
    mutating func decide(_ r: PreparedRequest, head: HeadVerdict, nowNs: UInt64) -> MockCore.Decision {
        var decision = MockCore.Decision(nowNs: nowNs, atMs: r.startNs >= epochNs ? Int64((r.startNs - epochNs) / 1_000_000) : 0,
                                         skewMs: Int64((engine.scenario.clockSkewSeconds * 1000).rounded()))
        var rule: Int?
        if let decided = head.decided {
            (decision.outcome, decision.fault, rule) = decided
        } else if head.resumeAt < engine.scenario.rules.count {
            let facts = RequestFacts(number: head.number, elapsedSeconds: elapsedMs(nowNs) / 1000, install: r.install,
                                     path: r.path, logCount: r.batch.eventCount, logNames: r.batch.names, vendor: r.vendor)
            if let decided = engine.decide(facts, from: head.resumeAt) {
                decision.outcome = decided.outcome
                decision.fault = decided.outcome.kind
                rule = decided.rule
            }
        }
        // A scenario swapped since the head arrived may have fewer rules.
        let decidingRule = rule.flatMap { $0 < engine.scenario.rules.count ? engine.scenario.rules[$0] : nil }
        decision.network = decidingRule?.network ?? (rule == nil ? head.replayNetwork : nil)
        if let network = decidingRule?.network { decision.latencyMs = engine.latencyMs(network) }
        if let decidingRule, decidingRule.network != nil {
            decision.faults = decidingRule.faultKinds
            decision.fault = decision.faults.first
        } else {
            decision.faults = decision.fault.map { [$0] } ?? []
            for kind in decision.network?.kinds ?? [] where !decision.faults.contains(kind) { decision.faults.append(kind) }
        }
        if case .refuse(let duration)? = decision.outcome {
            // duration_s, else until the rule's window ends (Scenario.check demands one of them).
            let elapsed = elapsedMs(nowNs) / 1000
            decision.refuseSeconds = duration ?? decidingRule?.match.untilSeconds.map { max(0, $0 - elapsed) } ?? 1
        }
        return decision
    }

    /// Records what a decided request did: its bytes, faults, delivered logs, refusals and answer (SPEC M2, M4, V4).
    mutating func record(_ r: PreparedRequest, _ decision: MockCore.Decision, _ fate: MockCore.Fate, wallMs: Int64) {
        wireBytes += r.wireBytes
        for kind in decision.faults { faults[kind, default: 0] += 1 }
        if fate.records {
            let arrival = wallMs + Int64((engine.scenario.clockSkewSeconds * 1000).rounded())
            record(r.batch, body: r.storedBody, cutoffs: r.cutoffs, arrivalMs: arrival)
        }
        if fate.normalHandling {
            let refused = r.batch.refused
            if refused > 0, let vendor = r.vendor { vendorCounts[vendor, default: .zero].eventsRefused += refused }
        }
        if case .respond(let answer) = fate.action { statusCounts[answer.response.status, default: 0] += 1 }
    }

    /// Records an accepted batch, App Center's as any vendor's: de-duplication by the event's key (SPEC M2, V3),
    /// per-install counts, delays and late events (SPEC M7). `body`: the request's body, kept for the events read
    /// back from it (App Center's logs, OTLP's records rendered when read).
    mutating func record(_ batch: VendorBatch, body: StoredBody.Bytes, cutoffs: [Int64], arrivalMs: Int64) {
        let vendor = batch.vendor
        var unique = 0
        seen.warm(batch.events.lazy.compactMap(\.id))
        var kept: StoredBody?
        for (i, event) in batch.events.enumerated() {
            let fresh = if let id = event.id {
                seen.insert(id)
            } else if let key = event.key {
                vendorSeen.insert(VendorKey(vendor: vendor, key: key)).inserted
            } else {
                true
            }
            guard fresh else { continue }
            unique += 1
            if let span = event.span {
                let shared = kept ?? StoredBody(body, minify: batch.minify, install: batch.install ?? "",
                                                receivedAtMs: arrivalMs, vendor: vendor, otlp: batch.renderedWhenRead)
                kept = shared
                logs.append(StoredLog(id: event.id ?? .zero, type: event.type, name: event.name, body: shared, span: span))
            } else {
                let own = StoredBody(.plain(event.json), minify: false, install: "", receivedAtMs: arrivalMs, vendor: vendor)
                logs.append(StoredLog(id: event.id ?? .zero, type: event.type, name: event.name, body: own,
                                      span: 0..<event.json.count))
            }
            guard let timestamp = event.timestampMs else { continue }
            let delay = arrivalMs - timestamp
            delays.append(delay)
            delaySumMs &+= delay
            histogram[DelayHistogram.bucket(of: delay)] += 1
            if i < cutoffs.count, arrivalMs > cutoffs[i] { lateLogs += 1 }
        }
        vendorCounts[vendor, default: .zero].eventsReceived += batch.events.count
        vendorCounts[vendor, default: .zero].eventsUnique += unique
        vendorCounts[vendor, default: .zero].eventsDuplicate += batch.events.count - unique
        if vendor == .ga4 { vendorCounts[vendor, default: .zero].eventsInvalid = (vendorCounts[vendor]?.eventsInvalid ?? 0) + batch.invalid }
        if let install = batch.install {
            installs[install, default: .init(logsReceived: 0, logsUnique: 0)].logsReceived += batch.events.count
            installs[install, default: .init(logsReceived: 0, logsUnique: 0)].logsUnique += unique
        }
    }

    /// Every vendor, with zeros for those without traffic.
    var vendorStats: [String: MockStats.VendorStats] {
        Dictionary(uniqueKeysWithValues: Vendor.allCases.map { ($0.rawValue, vendorCounts[$0] ?? .zero) })
    }

    /// The counts; `delayMs` is left at zero for `MockCore`, which sorts the delays outside the lock.
    func stats() -> MockStats {
        let appCenter = vendorCounts[.appcenter] ?? .zero
        return MockStats(
            requests: requestCount,
            statusCounts: Dictionary(uniqueKeysWithValues: statusCounts.map { (String($0.key), $0.value) }),
            logsReceived: appCenter.eventsReceived,
            logsUnique: appCenter.eventsUnique,
            logsDuplicate: appCenter.eventsDuplicate,
            faults: Dictionary(uniqueKeysWithValues: faults.map { ($0.key.rawValue, $0.value) }),
            installs: installs,
            lateLogs: lateLogs,
            delayMs: .zero,
            maxInFlight: maxInFlight,
            vendors: vendorStats)
    }

    var delayHistogram: DelayHistogram {
        DelayHistogram(buckets: DelayHistogram.bounds.enumerated().map { i, bound in
            DelayHistogram.Bucket(label: bound.0, belowMs: bound.1, count: histogram[i])
        })
    }

    /// Clears every count and restarts the scenario clock, request numbers and random source.
    mutating func reset(scenario: Scenario, now: UInt64) {
        let keep = (generation + 1, inFlight)
        self = RecordedState(scenario: scenario, now: now)
        (generation, inFlight) = keep
        maxInFlight = inFlight
    }
}

/// The 04:00-next-day reporting cutoff of a log timestamp in a time zone (SPEC M7, Google Analytics'
/// processing deadline). Cached by 15-minute slot — every real UTC offset and DST change is a multiple
/// of 15 minutes — so a batch costs a dictionary lookup per log, not a calendar computation.
struct ReportingCutoff {
    let timeZone: TimeZone
    private let isUTC: Bool
    private var cache: [Int64: Int64] = [:]
    private static let day: Int64 = 86_400_000
    private static let slot: Int64 = 900_000

    init(timeZone: TimeZone) {
        self.timeZone = timeZone
        isUTC = timeZone.secondsFromGMT() == 0 && timeZone.nextDaylightSavingTimeTransition == nil
    }

    /// Epoch ms after which a log stamped `timestampMs` is late.
    mutating func cutoff(forTimestamp timestampMs: Int64) -> Int64 {
        if isUTC {
            return (ISOTimestamp.floorDivMod(timestampMs, Self.day).0 + 1) * Self.day + 4 * 3_600_000
        }
        let key = ISOTimestamp.floorDivMod(timestampMs, Self.slot).0
        if let hit = cache[key] { return hit }
        if cache.count > 4096 { cache.removeAll(keepingCapacity: true) }
        let value = Self.compute(timestampMs, timeZone)
        cache[key] = value
        return value
    }

    static func compute(_ timestampMs: Int64, _ tz: TimeZone) -> Int64 {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = tz
        let date = Date(timeIntervalSince1970: Double(timestampMs) / 1000)
        let startOfDay = calendar.startOfDay(for: date)
        guard let nextDay = calendar.date(byAdding: .day, value: 1, to: startOfDay),
              let cutoff = calendar.date(bySettingHour: 4, minute: 0, second: 0, of: nextDay)
        else {
            // Unreachable for Gregorian dates; fall back to the UTC rule rather than fail a request.
            return (ISOTimestamp.floorDivMod(timestampMs, day).0 + 1) * day + 4 * 3_600_000
        }
        return Int64((cutoff.timeIntervalSince1970 * 1000).rounded())
    }
}
