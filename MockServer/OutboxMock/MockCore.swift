import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1

/// An ingestion request whose body has been read and checked, before the scenario decides its fate.
struct PreparedRequest {
    var method: HTTPMethod
    var uri: String
    var path: String
    var install: String?
    /// What the request's wire read (App Center's as every other vendor's): the healthy server's answer (200, or the
    /// refusal that validation found), how the wire answers an injected status, the events to record and their count.
    var batch: VendorBatch
    /// What the accepted events are read back from when they live in the body (`VendorBatch.readsKeptBody`).
    var storedBody: StoredBody.Bytes = .plain([])
    /// Each accepted event's reporting cutoff (SPEC M7): `Int64.max` for an event without a timestamp.
    var cutoffs: [Int64]
    var wireBytes: Int
    var contentEncoding: String?
    var startNs: UInt64
    /// Whose wire the path belongs to; nil for a path no vendor serves (the default wire's 404).
    var vendor: Vendor?

    var normal: HTTPResponse { batch.normal }
}

/// What is settled when an ingestion request's head arrives: its number, and the verdict when a rule that
/// needs no body (or a replayed exchange) decides there (SPEC M8).
struct HeadVerdict {
    var number: Int
    var elapsedSeconds: Double
    /// The outcome, the fault kind to record, and the rule (nil for a replayed exchange).
    var decided: (outcome: Scenario.Outcome, fault: FaultKind?, rule: Int?)?
    /// The first rule still to try once the body is read.
    var resumeAt: Int

    var dropsBeforeBody: Bool { decided?.outcome == .dropBeforeBody }

    /// The rate at which the body is read (SPEC M8 `kbps`), when a rule decided at the head sets one.
    var readKbps: Double?
    /// A replayed exchange's network shaping.
    var replayNetwork: Scenario.Network?
}

/// The scenario's (or the replay's) verdict on one request, with what the server recorded.
struct Verdict {
    /// The fault as the connection carries it out: the answer written, the outage until a monotonic instant.
    typealias Action = Fault<Answer, Outage>

    struct Answer {
        var response: HTTPResponse
        var delayMs: Int
    }

    struct Outage {
        /// When the port is bound again (monotonic ns).
        var untilNs: UInt64
        /// How long it stays closed: `duration_s`, else until the rule's window ends.
        var durationSeconds: Double
    }

    var action: Action
    /// How the answer travels (SPEC M8): bandwidth, slices, a byte limit, a slow close. Latency is in `delayMs`.
    var network: Scenario.Network?
    /// The scenario outcome kind when a rule or a replayed fault decided; nil for normal handling.
    var fault: FaultKind?
    /// ms since start or reset when the head arrived.
    var at: Int64
    /// Logs in the body (for `/_mock/requests`).
    var logCount: Int
    /// The scenario's clock skew, for the `Date` header of the answer.
    var skewMs: Int64
}

/// Shared by every connection: configuration, recorded state, the listening socket.
final class MockCore: Sendable {
    let configuration: MockServer.Configuration
    let state: NIOLockedValueBox<RecordedState>
    let replay: [RecordedExchange]
    let recorder: ExchangeRecorder?
    let listener: Listener
    let clock: any MockClock
    /// The delays sorted so far, for the percentiles of `/_mock/stats` and `/_mock/metrics`. Its own lock, so that
    /// sorting never holds the state's lock, which every request takes.
    private let sortedDelays = NIOLockedValueBox(SortedDelays())

    struct SortedDelays {
        /// The state's generation the values belong to; a reset (or a scenario swap) starts them again.
        var generation = -1
        var values: [Int64] = []
    }

    init(configuration: MockServer.Configuration) throws {
        self.configuration = configuration
        clock = configuration.clock
        state = NIOLockedValueBox(RecordedState(scenario: configuration.scenario ?? Scenario(),
                                                now: clock.monotonicNs()))
        replay = try configuration.replayPath.map { try RecordedExchange.load(path: $0) } ?? []
        recorder = try configuration.recordPath.map { try ExchangeRecorder(path: $0) }
        listener = Listener(host: configuration.host, port: configuration.port, clock: clock, log: configuration.log)
    }

    // MARK: - Requests

    /// Counts a request as in flight (head read, answer not written), numbers it, and lets the rules that
    /// need no body decide (SPEC M3, M8).
    func beginRequest(path: String, install: String?) -> HeadVerdict {
        let now = clock.monotonicNs()
        return state.withLockedValue { s in
            s.inFlight += 1
            s.maxInFlight = max(s.maxInFlight, s.inFlight)
            s.requestCount += 1
            var head = HeadVerdict(number: s.requestCount, elapsedSeconds: s.elapsedMs(now) / 1000, decided: nil,
                                   resumeAt: 0)
            if s.replayCursor < replay.count {
                let exchange = replay[s.replayCursor]
                s.replayCursor += 1
                head.decided = exchange.replayOutcome.map { ($0, exchange.fault.flatMap(FaultKind.init(rawValue:)), nil) }
                head.resumeAt = Int.max
                head.replayNetwork = exchange.network
                head.readKbps = exchange.network?.kbps
            } else {
                let facts = RequestFacts(number: head.number, elapsedSeconds: head.elapsedSeconds, install: install,
                                         path: path, logCount: 0, logNames: [], vendor: Vendor.route(path: path))
                switch s.engine.decideAtHead(facts) {
                case .decided(let rule, let outcome):
                    head.decided = (outcome, outcome.kind, rule)
                    head.readKbps = s.engine.scenario.rules[rule].network?.kbps
                case .deferred(let from):
                    head.resumeAt = from
                }
            }
            // Counted at the head, so that a request dropped before its body counts too (SPEC V4).
            if let vendor = Vendor.route(path: path) { s.vendorCounts[vendor, default: .zero].requests += 1 }
            // A request dropped here never reaches `decide`: count its fault now.
            if head.dropsBeforeBody, let kind = head.decided?.fault { s.faults[kind, default: 0] += 1 }
            return head
        }
    }

    /// The request's slot is free: its answer was written, it was faulted, or its connection closed.
    func endRequest(entry: MockRequest?) {
        state.withLockedValue { s in
            s.inFlight = max(0, s.inFlight - 1)
            if let entry { s.requests.append(entry) }
        }
    }

    func appendRequestEntry(_ entry: MockRequest) {
        state.withLockedValue { $0.requests.append(entry) }
    }

    /// The server's clock: real time plus the scenario's skew (SPEC X2 `clock_skew_s`).
    func skewMs() -> Int64 {
        let skew = state.withLockedValue { $0.engine.scenario.clockSkewSeconds }
        return Int64((skew * 1000).rounded())
    }

    /// What the scenario decided for a request: the outcome (nil: normal handling), the faults to count, and how the
    /// answer travels. Taken under the state's lock, since deciding counts matches and draws from the seeded random
    /// source (SPEC M3, M8).
    struct Decision {
        var outcome: Scenario.Outcome?
        /// The fault recorded for the request (the outcome's kind, or a network-only rule's first network fault).
        var fault: FaultKind?
        /// Every fault kind counted for it.
        var faults: [FaultKind] = []
        var network: Scenario.Network?
        var latencyMs = 0
        /// For `refuse`: `duration_s`, else until the rule's window ends.
        var refuseSeconds: Double = 1
        var nowNs: UInt64
        var atMs: Int64
        var skewMs: Int64
    }

    /// A request's fate once the scenario decided: what the client gets, and whether its logs count as delivered.
    /// A pure function of the decision and the request (SPEC M2, M3, M8, V2), tested without a server or a lock.
    struct Fate {
        var action: Verdict.Action
        /// The logs are recorded: the answer is one the client takes as delivered, or a lost acknowledgement.
        var records: Bool
        /// The healthy server's handling (and so its refusals) is what the client gets.
        var normalHandling: Bool
    }

    static func fate(of r: PreparedRequest, _ d: Decision) -> Fate {
        // A vendor's accepted events are recorded even beside a 4xx (Mixpanel's /import ingests the valid records of
        // a partly refused batch).
        let accepted = !r.batch.events.isEmpty
        switch d.outcome {
        case nil:
            return Fate(action: .respond(.init(response: r.normal, delayMs: 0)), records: accepted, normalHandling: true)
        case .respond(let spec)?:
            let response = spec.status == nil ? r.normal : response(for: spec, injected: r.batch.injected)
            let normal = spec.status == nil
            // Only an answer the client takes as delivered records the logs: after any other answer the client sends
            // them again. The normal answer (a slow healthy server) records what the healthy server does, Mixpanel's
            // partly refused /import included.
            return Fate(action: .respond(.init(response: response, delayMs: spec.delayMs + d.latencyMs)),
                        records: accepted && (normal || (200..<300).contains(response.status)), normalHandling: normal)
        case .refuse?:
            return Fate(action: .refuse(.init(untilNs: d.nowNs + UInt64(d.refuseSeconds * 1e9), durationSeconds: d.refuseSeconds)),
                        records: false, normalHandling: false)
        case .dropAfterBody?:
            return Fate(action: .dropAfterBody, records: accepted, normalHandling: true)
        case .reset?: return Fate(action: .reset, records: false, normalHandling: false)
        case .hang?: return Fate(action: .hang, records: false, normalHandling: false)
        case .malformed?: return Fate(action: .malformed, records: false, normalHandling: false)
        case .dropBeforeBody?: return Fate(action: .dropBeforeBody, records: false, normalHandling: false)
        }
    }

    /// Decides the request's fate (unless its head did), then records what it delivered: the scenario's decision
    /// under the state's lock, the fate outside it (`fate`, pure), the recording under the lock again (SPEC M2, M3,
    /// M8).
    func decide(_ r: PreparedRequest, head: HeadVerdict) -> Verdict {
        let now = clock.monotonicNs()
        let decision = state.withLockedValue { s in s.decide(r, head: head, nowNs: now) }
        let fate = Self.fate(of: r, decision)
        let wall = clock.wallMs()
        state.withLockedValue { s in s.record(r, decision, fate, wallMs: wall) }
        return Verdict(action: fate.action, network: decision.network, fault: decision.fault, at: decision.atMs,
                       logCount: r.batch.eventCount, skewMs: decision.skewMs)
    }

    /// A scenario's answer; without a body, in the shape of the request's wire (SPEC V2).
    static func response(for spec: Scenario.Response, injected: @Sendable (Int) -> HTTPResponse) -> HTTPResponse {
        let status = spec.status ?? 200
        var headers = spec.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        guard let body = spec.body else {
            var shaped = injected(status)
            let named = Set(headers.map { $0.0.lowercased() })
            shaped.headers = headers + shaped.headers.filter { !named.contains($0.0.lowercased()) }
            return shaped
        }
        if !headers.contains(where: { $0.0.lowercased() == "content-type" }) {
            let looksJSON = body.first == "{" || body.first == "["
            headers.append(("Content-Type", looksJSON ? "application/json" : "text/plain; charset=utf-8"))
        }
        return HTTPResponse(status: status, headers: headers, body: Array(body.utf8))
    }

    // MARK: - Scenario and reset

    func setScenario(_ scenario: Scenario) {
        let (generation, epoch, outages) = state.withLockedValue { s in
            s.engine = ScenarioEngine(scenario: scenario)
            s.generation += 1
            return (s.generation, s.epochNs, s.engine.scheduledOutages)
        }
        listener.replaceSchedule(generation: generation, epochNs: epoch, outages: outages, isCurrent: isCurrent)
    }

    /// Clears counts and logs and restarts the scenario clock, request numbers and random source.
    func reset() {
        let now = clock.monotonicNs()
        let (generation, outages) = state.withLockedValue { s in
            s.reset(scenario: s.engine.scenario, now: now)
            return (s.generation, s.engine.scheduledOutages)
        }
        listener.replaceSchedule(generation: generation, epochNs: now, outages: outages, isCurrent: isCurrent)
    }

    /// Restarts the scenario clock alone (`at`, `after_s`, `until_s` count from now, its outages rescheduled): counts,
    /// logs, request numbers and the random source go on, so nothing already recorded is lost.
    func restartClock() {
        let now = clock.monotonicNs()
        let (generation, outages) = state.withLockedValue { s in
            s.epochNs = now
            s.generation += 1
            return (s.generation, s.engine.scheduledOutages)
        }
        listener.replaceSchedule(generation: generation, epochNs: now, outages: outages, isCurrent: isCurrent)
    }

    func isCurrent(_ generation: Int) -> Bool {
        state.withLockedValue { $0.generation == generation }
    }

    /// Schedules the pure time-window outages of the scenario in force (at start).
    func scheduleOutages() {
        let (generation, epoch, outages) = state.withLockedValue { s in
            (s.generation, s.epochNs, s.engine.scheduledOutages)
        }
        listener.replaceSchedule(generation: generation, epochNs: epoch, outages: outages, isCurrent: isCurrent)
    }

    // MARK: - Snapshots

    func stats() -> MockStats {
        var (stats, percentiles) = readWithDelayPercentiles { $0.stats() }
        stats.delayMs = percentiles
        return stats
    }

    /// `read` under the state's lock, with the delay percentiles of that same moment. Under the lock only the
    /// delays that arrived since the last reading are copied; they are sorted and merged into the kept sorted
    /// list after it is released, so a scrape does not hold up ingestion for a sort (SPEC M4, M9, M10).
    func readWithDelayPercentiles<T>(_ read: (RecordedState) -> T) -> (T, MockStats.DelayPercentiles) {
        sortedDelays.withLockedValue { cache in
            let (value, generation, from, fresh) = state.withLockedValue { s -> (T, Int, Int, [Int64]) in
                let from = cache.generation == s.generation && cache.values.count <= s.delays.count
                    ? cache.values.count : 0
                // Copied into a buffer of its own: `Array(s.delays[0...])` would share the state's, which ingestion
                // appends to in place once this copy lets go of it, an order ThreadSanitizer cannot see (it does
                // not see the reference count) and reported as a race with the sort below.
                var fresh: [Int64] = []
                fresh.reserveCapacity(s.delays.count - from)
                fresh.append(contentsOf: s.delays[from...])
                return (read(s), s.generation, from, fresh)
            }
            let added = fresh.sorted()
            cache.values = from == 0 ? added : Self.merge(cache.values, added)
            cache.generation = generation
            return (value, .of(sorted: cache.values))
        }
    }

    /// Two ascending arrays as one.
    static func merge(_ a: [Int64], _ b: [Int64]) -> [Int64] {
        if b.isEmpty { return a }
        if a.isEmpty { return b }
        var out: [Int64] = []
        out.reserveCapacity(a.count + b.count)
        var i = 0
        var j = 0
        while i < a.count, j < b.count {
            if b[j] < a[i] {
                out.append(b[j])
                j += 1
            } else {
                out.append(a[i])
                i += 1
            }
        }
        out.append(contentsOf: a[i...])
        out.append(contentsOf: b[j...])
        return out
    }

    func wireBytes() -> Int { state.withLockedValue { $0.wireBytes } }

    func histogram() -> DelayHistogram { state.withLockedValue { $0.delayHistogram } }

    func requestEntries() -> [MockRequest] { state.withLockedValue { $0.requests } }

    func storedLogs() -> [StoredLog] { state.withLockedValue { $0.logs } }

    var scenario: Scenario { state.withLockedValue { $0.engine.scenario } }
}
