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

/// SplitMix64: tiny, fast, and the same sequence on every platform for a given seed.
struct SeededRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    mutating func nextUnit() -> Double { Double(next() >> 11) * 0x1p-53 }
}

struct ScenarioEngine {
    private(set) var scenario: Scenario
    private var random: SeededRandom

    init(scenario: Scenario) {
        self.scenario = scenario
        self.random = SeededRandom(seed: scenario.seed)
    }

    /// The first rule that fits, with its index. Probability is drawn only for a rule whose other keys
    /// fit, so adding a rule that never fits does not shift the draws of the others.
    mutating func decide(_ facts: RequestFacts) -> (rule: Int, outcome: Scenario.Outcome)? {
        for (i, rule) in scenario.rules.enumerated() where fits(rule.match, facts) {
            if let p = rule.match.probability {
                guard random.nextUnit() < p else { continue }
            }
            return (i, rule.outcome)
        }
        return nil
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
