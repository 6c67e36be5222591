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
    /// What a healthy server answers: 200, or the 4xx that validation found.
    var normal: HTTPResponse
    /// The batch's logs when `normal` is 200, with their reporting cutoffs.
    var logs: [ValidatedLog]
    /// What the accepted logs are read back from, and whether they need minifying then.
    var storedBody: StoredBody.Bytes = .plain([])
    var minify = false
    var cutoffs: [Int64]
    var logCount: Int
    var logNames: [String]
    var wireBytes: Int
    var contentEncoding: String?
    var startNs: UInt64
    /// Whose wire the path belongs to; nil for a path no vendor serves (App Center's 404).
    var vendor: Vendor?
    /// Another vendor's decoded request (its events, refusals and answers); nil for App Center.
    var vendorBatch: VendorBatch?
}

/// What is settled when an ingestion request's head arrives: its number, and the verdict when a rule that
/// needs no body (or a replayed exchange) decides there (SPEC M8).
struct HeadVerdict {
    var number: Int
    var elapsedSeconds: Double
    /// The outcome, the fault kind to record, and the rule (nil for a replayed exchange).
    var decided: (outcome: Scenario.Outcome, fault: String?, rule: Int?)?
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
    enum Action {
        case respond(HTTPResponse, delayMs: Int)
        case refuse(untilNs: UInt64, durationSeconds: Double)
        case reset, dropAfterBody, dropBeforeBody, hang, malformed
    }

    var action: Action
    /// How the answer travels (SPEC M8): bandwidth, slices, a byte limit, a slow close. Latency is in `delayMs`.
    var network: Scenario.Network?
    /// The scenario outcome kind when a rule or a replayed fault decided; nil for normal handling.
    var fault: String?
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
                head.decided = exchange.replayOutcome.map { ($0, exchange.fault, nil) }
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

    /// Decides the request's fate (unless its head did) and records what it delivered, in one critical
    /// section (SPEC M2, M3, M8).
    func decide(_ r: PreparedRequest, head: HeadVerdict) -> Verdict {
        let now = clock.monotonicNs()
        let wall = clock.wallMs()
        return state.withLockedValue { s in
            s.wireBytes += r.wireBytes
            let at = r.startNs >= s.epochNs ? Int64((r.startNs - s.epochNs) / 1_000_000) : 0
            var outcome: Scenario.Outcome?
            var fault: String?
            var rule: Int?
            if let decided = head.decided {
                (outcome, fault, rule) = decided
            } else if head.resumeAt < s.engine.scenario.rules.count {
                let facts = RequestFacts(number: head.number, elapsedSeconds: s.elapsedMs(now) / 1000,
                                         install: r.install, path: r.path, logCount: r.logCount,
                                         logNames: r.logNames, vendor: r.vendor)
                if let decided = s.engine.decide(facts, from: head.resumeAt) {
                    outcome = decided.outcome
                    fault = decided.outcome.kind
                    rule = decided.rule
                }
            }
            // A scenario swapped since the head arrived may have fewer rules.
            let decidingRule = rule.flatMap { $0 < s.engine.scenario.rules.count ? s.engine.scenario.rules[$0] : nil }
            let ruleUntil = decidingRule?.match.untilSeconds
            let network = decidingRule?.network ?? (rule == nil ? head.replayNetwork : nil)
            var latencyMs = 0
            if let network = decidingRule?.network { latencyMs = s.engine.latencyMs(network) }
            var kinds: [String] = []
            if let decidingRule, decidingRule.network != nil {
                kinds = decidingRule.faultKinds
                fault = kinds.first
            } else {
                kinds = fault.map { [$0] } ?? []
                for kind in network?.kinds ?? [] where !kinds.contains(kind) { kinds.append(kind) }
            }
            for kind in kinds { s.faults[kind, default: 0] += 1 }
            // A vendor's accepted events are recorded even beside a 4xx (Mixpanel's /import ingests the
            // valid records of a partly refused batch).
            let accepted = r.vendorBatch.map { !$0.events.isEmpty } ?? (r.normal.status == 200 && !r.logs.isEmpty)
            var action: Verdict.Action
            var record = false
            // Whether the healthy server's handling (and so its refusals) is what the client gets.
            var normalHandling = false
            switch outcome {
            case nil:
                action = .respond(r.normal, delayMs: 0)
                record = accepted
                normalHandling = true
            case .respond(let spec)?:
                let response = spec.status == nil ? r.normal : Self.response(for: spec, batch: r.vendorBatch)
                normalHandling = spec.status == nil
                action = .respond(response, delayMs: spec.delayMs + latencyMs)
                // Only an answer the client takes as delivered records the logs: after any other
                // answer the client sends them again. The normal answer (a slow healthy server) records
                // what the healthy server does, Mixpanel's partly refused /import included.
                record = accepted && (normalHandling || (200..<300).contains(response.status))
            case .refuse(let duration)?:
                let elapsed = s.elapsedMs(now) / 1000
                // duration_s, else until the rule's window ends (Scenario.check demands one of them).
                let seconds = duration ?? ruleUntil.map { max(0, $0 - elapsed) } ?? 1
                action = .refuse(untilNs: now + UInt64(seconds * 1e9), durationSeconds: seconds)
            case .reset?: action = .reset
            case .dropAfterBody?:
                action = .dropAfterBody
                record = accepted
                normalHandling = true
            case .hang?: action = .hang
            case .malformed?: action = .malformed
            case .dropBeforeBody?: action = .dropBeforeBody
            }
            if record {
                let arrival = wall + Int64((s.engine.scenario.clockSkewSeconds * 1000).rounded())
                if let batch = r.vendorBatch {
                    s.record(vendor: batch.vendor, batch.events, body: r.storedBody, otlp: batch.renderedWhenRead,
                             cutoffs: r.cutoffs, arrivalMs: arrival)
                } else {
                    s.record(r.logs, body: r.storedBody, minify: r.minify, cutoffs: r.cutoffs, install: r.install ?? "",
                             arrivalMs: arrival)
                }
            }
            if normalHandling {
                let refused = r.vendorBatch?.refused ?? (r.normal.status == 400 ? r.logCount : 0)
                if refused > 0, let vendor = r.vendor { s.vendorCounts[vendor, default: .zero].eventsRefused += refused }
            }
            if case .respond(let response, _) = action { s.statusCounts[response.status, default: 0] += 1 }
            return Verdict(action: action, network: network, fault: fault, at: at, logCount: r.logCount,
                           skewMs: Int64((s.engine.scenario.clockSkewSeconds * 1000).rounded()))
        }
    }

    /// A scenario's answer; without a body, in the shape of the request's vendor (SPEC V2).
    static func response(for spec: Scenario.Response, batch: VendorBatch? = nil) -> HTTPResponse {
        let status = spec.status ?? 200
        var headers = spec.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        let body: String
        if let given = spec.body {
            body = given
        } else if let batch {
            var shaped = batch.injected(status)
            let named = Set(headers.map { $0.0.lowercased() })
            shaped.headers = headers + shaped.headers.filter { !named.contains($0.0.lowercased()) }
            return shaped
        } else {
            return appCenterResponse(status: status, headers: headers)
        }
        if !headers.contains(where: { $0.0.lowercased() == "content-type" }) {
            let looksJSON = body.first == "{" || body.first == "["
            headers.append(("Content-Type", looksJSON ? "application/json" : "text/plain; charset=utf-8"))
        }
        return HTTPResponse(status: status, headers: headers, body: Array(body.utf8))
    }

    /// App Center's shape of an injected status: `{"status":"Success"}` or `{"status":"Error","reason":…}`.
    static func appCenterResponse(status: Int, headers: [(String, String)] = []) -> HTTPResponse {
        let body = (200..<300).contains(status) ? #"{"status":"Success"}"#
            : #"{"status":"Error","reason":"\#(status) injected by the scenario"}"#
        let typed = headers.contains { $0.0.lowercased() == "content-type" }
        return HTTPResponse(status: status, headers: typed ? headers : headers + [("Content-Type", "application/json")],
                            body: Array(body.utf8))
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
