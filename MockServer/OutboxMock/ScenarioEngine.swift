// Decides a request's fate from the scenario: pure, given the facts, the elapsed time and the
// random source (SPEC M3, X2). The server holds one under its state lock.

/// What is known about an ingestion request once its body has been read.
struct RequestFacts {
    var number: Int
    var elapsedSeconds: Double
    var install: String?
    var path: String
    var logCount: Int
    /// Names of the events and screens of a valid batch (empty when the batch is invalid).
    var logNames: [String]
    /// Whose wire the path belongs to (SPEC V, M8 `match.vendor`); nil for a path no vendor serves.
    var vendor: Vendor? = nil
}

/// SplitMix64: tiny, fast, and the same sequence on every platform for a given seed. Public for `outbox fleet`'s
/// seeded choices, so that the two do not each carry a copy.
public struct SeededRandom: Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    public mutating func nextUnit() -> Double { Double(next() >> 11) * 0x1p-53 }
}

struct ScenarioEngine {
    private(set) var scenario: Scenario
    private var random: SeededRandom

    init(scenario: Scenario) {
        self.scenario = scenario
        self.random = SeededRandom(seed: scenario.seed)
    }

    /// The first rule that fits, with its index, trying the rules from `start` on (the ones before it were
    /// tried when the head arrived). Probability is drawn only for a rule whose other keys fit, so adding a
    /// rule that never fits does not shift the draws of the others.
    mutating func decide(_ facts: RequestFacts, from start: Int = 0) -> (rule: Int, outcome: Scenario.Outcome)? {
        for (i, rule) in scenario.rules.enumerated().dropFirst(start) where fits(rule.match, facts) {
            if let p = rule.match.probability {
                guard random.nextUnit() < p else { continue }
            }
            return (i, rule.outcome)
        }
        return nil
    }

    /// What the rules say when only the head is known (SPEC M8: `drop_before_body` and `kbps` act before the
    /// body is read). Rules are tried in order until one fits — decided — or one needs the body, from which
    /// the decision waits for the body. Each rule is tried once per request, so the random draws are those
    /// of a decision made in one go.
    enum HeadDecision {
        case decided(rule: Int, outcome: Scenario.Outcome)
        case deferred(from: Int)
    }

    mutating func decideAtHead(_ facts: RequestFacts) -> HeadDecision {
        for (i, rule) in scenario.rules.enumerated() {
            if rule.match.needsBody { return .deferred(from: i) }
            guard fits(rule.match, facts) else { continue }
            if let p = rule.match.probability {
                guard random.nextUnit() < p else { continue }
            }
            return .decided(rule: i, outcome: rule.outcome)
        }
        return .deferred(from: scenario.rules.count)
    }

    /// `latency_ms` ± up to `jitter_ms`, drawn from the seeded source so that a run repeats; never negative.
    mutating func latencyMs(_ network: Scenario.Network) -> Int {
        let latency = network.latencyMs ?? 0
        guard let jitter = network.jitterMs, jitter > 0 else { return latency }
        let offset = Int(random.next() % UInt64(2 * jitter + 1)) - jitter
        return max(0, latency + offset)
    }

    private func fits(_ m: Scenario.Match, _ f: RequestFacts) -> Bool {
        if let r = m.requests, !r.contains(f.number) { return false }
        if let a = m.afterSeconds, f.elapsedSeconds < a { return false }
        if let u = m.untilSeconds, f.elapsedSeconds >= u { return false }
        if let install = m.install {
            guard let got = f.install, got.lowercased() == install.lowercased() else { return false }
        }
        if let path = m.path {
            if path.hasSuffix("*") {
                if !f.path.hasPrefix(path.dropLast()) { return false }
            } else if f.path != path {
                return false
            }
        }
        if let min = m.minLogs, f.logCount < min { return false }
        if let name = m.logName, !f.logNames.contains(name) { return false }
        if let vendor = m.vendor, f.vendor != vendor { return false }
        return true
    }

    /// Refuse rules that are pure time windows take the port down on a timer: (from, until) in seconds.
    var scheduledOutages: [(from: Double, until: Double)] {
        scenario.rules.compactMap { rule in
            guard case .refuse = rule.outcome, rule.match.isPureTimeWindow, let until = rule.match.untilSeconds
            else { return nil }
            return (rule.match.afterSeconds ?? 0, until)
        }
    }
}
