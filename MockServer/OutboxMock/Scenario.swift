import Foundation

/// A fault-injection scenario (SPEC M3, X2): the first rule whose `match` fits a request decides its
/// fate; a request that no rule matches is handled normally (validated, recorded, 200).
///
/// ```json
/// {"seed": 42, "clock_skew_s": 0,
///  "rules": [{"match": {"requests": "1-3"}, "respond": {"status": 429, "headers": {"Retry-After": "2"}}},
///            {"match": {"probability": 0.3}, "action": "reset"}]}
/// ```
///
/// ```swift
/// let flaky = try Scenario.load(path: MockServer.scenarioPath("flaky"))
/// server.setScenario(flaky)
/// ```
/// Decoding is strict: an unknown key (a typo such as `"mach"`) is an error, not a silently ignored rule.
public struct Scenario: Codable, Sendable, Equatable {
    /// Seeds the random source of `probability` matches, so that a run can be reproduced.
    public var seed: UInt64
    /// Added to the server's clock: the `Date` header, `received_at`, delivery delays and the late-log
    /// cutoff all use the skewed clock, as a server whose clock is off would.
    public var clockSkewSeconds: Double
    /// Free text, ignored by the server.
    public var description: String?
    public var rules: [Rule]

    public init(seed: UInt64 = 0, clockSkewSeconds: Double = 0, description: String? = nil, rules: [Rule] = []) {
        self.seed = seed
        self.clockSkewSeconds = clockSkewSeconds
        self.description = description
        self.rules = rules
    }

    /// One rule: when `match` fits, `outcome` happens, shaped by `network` (SPEC M8). A rule with only a
    /// `network` object has the outcome `.respond(Response())`: the normal answer, shaped.
    public struct Rule: Codable, Sendable, Equatable {
        public var match: Match
        public var outcome: Outcome
        public var network: Network?
        public var comment: String?

        public init(match: Match = Match(), outcome: Outcome = .respond(Response()), network: Network? = nil,
                    comment: String? = nil) {
            self.match = match
            self.outcome = outcome
            self.network = network
            self.comment = comment
        }

        /// The names under which this rule's faults are counted (`faults`, later `outbox_mock_faults_total{kind}`):
        /// the outcome's kind — unless it is the plain answer a `network`-only rule shapes — then each network fault.
        var faultKinds: [FaultKind] {
            var kinds: [FaultKind] = []
            if !(outcome == .respond(Response()) && network != nil) { kinds.append(outcome.kind) }
            kinds += network?.kinds ?? []
            return kinds
        }

        /// Decided when the request head arrives: the body is never read (drop_before_body) or is read at a
        /// rate (kbps), so the rule must not need the body to fit.
        var isHeadRule: Bool { outcome == .dropBeforeBody || network?.kbps != nil }
    }

    /// Network faults as fault proxies (Toxiproxy, WireMock) inject them, combined with the rule's answer
    /// (SPEC M8): `{"latency_ms": 800, "jitter_ms": 100, "kbps": 64, "slice_bytes": 1, "slice_delay_ms": 20,
    /// "limit_bytes": 10, "slow_close_ms": 500}`, every key optional.
    public struct Network: Codable, Sendable, Equatable {
        /// Added before the answer (to `respond.delay_ms`).
        public var latencyMs: Int?
        /// The latency varies by up to this much either way, drawn from the scenario's seeded random source.
        public var jitterMs: Int?
        /// Bandwidth in kilobits per second (1 kbps = 1000 bit/s): the request is read, and the answer
        /// written, no faster.
        public var kbps: Double?
        /// The answer is written in pieces of this many bytes …
        public var sliceBytes: Int?
        /// … with this pause between pieces.
        public var sliceDelayMs: Int?
        /// Only this many bytes of the answer (head included) are written, then the connection closes.
        public var limitBytes: Int?
        /// After the answer (sent with `Connection: close`) the connection stays open this long, then closes.
        public var slowCloseMs: Int?

        public init(latencyMs: Int? = nil, jitterMs: Int? = nil, kbps: Double? = nil, sliceBytes: Int? = nil,
                    sliceDelayMs: Int? = nil, limitBytes: Int? = nil, slowCloseMs: Int? = nil) {
            self.latencyMs = latencyMs
            self.jitterMs = jitterMs
            self.kbps = kbps
            self.sliceBytes = sliceBytes
            self.sliceDelayMs = sliceDelayMs
            self.limitBytes = limitBytes
            self.slowCloseMs = slowCloseMs
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case latencyMs = "latency_ms", jitterMs = "jitter_ms", kbps, sliceBytes = "slice_bytes",
                 sliceDelayMs = "slice_delay_ms", limitBytes = "limit_bytes", slowCloseMs = "slow_close_ms"
        }

        public init(from decoder: Decoder) throws {
            try rejectUnknownKeys(decoder, allowed: CodingKeys.allCases.map(\.rawValue))
            let c = try decoder.container(keyedBy: CodingKeys.self)
            func integer(_ key: CodingKeys) throws -> Int? {
                guard c.contains(key) else { return nil }
                guard let value = try? c.decode(Int.self, forKey: key), value >= 0 else {
                    throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [key],
                                                            debugDescription: "must be an integer ≥ 0"))
                }
                return value
            }
            latencyMs = try integer(.latencyMs)
            jitterMs = try integer(.jitterMs)
            if c.contains(.kbps) {
                guard let value = try? c.decode(Double.self, forKey: .kbps), value.isFinite, value > 0 else {
                    throw DecodingError.dataCorrupted(.init(codingPath: c.codingPath + [CodingKeys.kbps],
                                                            debugDescription: "must be a number > 0"))
                }
                kbps = value
            }
            sliceBytes = try integer(.sliceBytes)
            sliceDelayMs = try integer(.sliceDelayMs)
            limitBytes = try integer(.limitBytes)
            slowCloseMs = try integer(.slowCloseMs)
        }

        /// The fault kinds present, as counted in `faults`.
        var kinds: [FaultKind] {
            var kinds: [FaultKind] = []
            if latencyMs != nil || jitterMs != nil { kinds.append(.latency) }
            if kbps != nil { kinds.append(.bandwidth) }
            if sliceBytes != nil || sliceDelayMs != nil { kinds.append(.slice) }
            if limitBytes != nil { kinds.append(.limitBytes) }
            if slowCloseMs != nil { kinds.append(.slowClose) }
            return kinds
        }

        /// Values decoding alone cannot check; nil when the object is fine.
        func problem() -> String? {
            if kinds.isEmpty {
                return "network: needs at least one of \(CodingKeys.allCases.map(\.rawValue).joined(separator: ", "))"
            }
            if jitterMs != nil && latencyMs == nil { return "network.jitter_ms needs latency_ms" }
            if sliceBytes == 0 { return "network.slice_bytes must be ≥ 1" }
            if sliceDelayMs != nil && sliceBytes == nil { return "network.slice_delay_ms needs slice_bytes" }
            return nil
        }
    }

    /// Every key that is present must fit; an empty match fits every request.
    public struct Match: Codable, Sendable, Equatable {
        /// Ingestion request numbers since start or reset, 1-based: `"3"`, `"1-5"`, `"10-"`, or a
        /// comma-separated list of those (`"1,4,7-9"`).
        public var requests: RequestNumbers?
        /// Seconds since start or reset: the rule fits from `afterSeconds` (inclusive) …
        public var afterSeconds: Double?
        /// … until `untilSeconds` (exclusive).
        public var untilSeconds: Double?
        /// Fits with this probability (0…1), drawn from the scenario's seeded random source.
        public var probability: Double?
        /// The `Install-ID` header equals this (case-insensitive).
        public var install: String?
        /// The request path without its query equals this; a trailing `*` matches a prefix.
        public var path: String?
        /// The batch is valid and holds an event or screen with this `name`.
        public var logName: String?
        /// The batch holds at least this many logs.
        public var minLogs: Int?
        /// The request is on this vendor's wire (SPEC V, M8).
        public var vendor: Vendor?

        public init(requests: RequestNumbers? = nil, afterSeconds: Double? = nil, untilSeconds: Double? = nil,
                    probability: Double? = nil, install: String? = nil, path: String? = nil,
                    logName: String? = nil, minLogs: Int? = nil, vendor: Vendor? = nil) {
            self.requests = requests
            self.afterSeconds = afterSeconds
            self.untilSeconds = untilSeconds
            self.probability = probability
            self.install = install
            self.path = path
            self.logName = logName
            self.minLogs = minLogs
            self.vendor = vendor
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case requests, afterSeconds = "after_s", untilSeconds = "until_s", probability, install, path,
                 logName = "log_name", minLogs = "min_logs", vendor
        }

        public init(from decoder: Decoder) throws {
            try rejectUnknownKeys(decoder, allowed: CodingKeys.allCases.map(\.rawValue))
            let c = try decoder.container(keyedBy: CodingKeys.self)
            requests = try c.decodeIfPresent(RequestNumbers.self, forKey: .requests)
            afterSeconds = try c.decodeIfPresent(Double.self, forKey: .afterSeconds)
            untilSeconds = try c.decodeIfPresent(Double.self, forKey: .untilSeconds)
            probability = try c.decodeIfPresent(Double.self, forKey: .probability)
            install = try c.decodeIfPresent(String.self, forKey: .install)
            path = try c.decodeIfPresent(String.self, forKey: .path)
            logName = try c.decodeIfPresent(String.self, forKey: .logName)
            minLogs = try c.decodeIfPresent(Int.self, forKey: .minLogs)
            vendor = try c.decodeIfPresent(Vendor.self, forKey: .vendor)
        }

        /// Fits only once the body is read and validated.
        var needsBody: Bool { logName != nil || minLogs != nil }

        /// Only a time window: such a `refuse` rule takes the port down on a timer, request or not.
        var isPureTimeWindow: Bool {
            untilSeconds != nil && requests == nil && probability == nil && install == nil && path == nil
                && logName == nil && minLogs == nil && vendor == nil
        }
    }

    /// What happens to a matched request: a `Fault` as the scenario file states it. `respond` without a status
    /// handles the request normally after the delay (a slow but healthy server); `refuse` without `duration_s` lasts
    /// until the rule's `until_s`.
    public typealias Outcome = Fault<Response, Double?>

    /// `{"status": 503, "headers": {"Retry-After": "2"}, "body": "…", "delay_ms": 200}`
    public struct Response: Codable, Sendable, Equatable {
        public var status: Int?
        public var headers: [String: String]
        public var body: String?
        public var delayMs: Int

        public init(status: Int? = nil, headers: [String: String] = [:], body: String? = nil, delayMs: Int = 0) {
            self.status = status
            self.headers = headers
            self.body = body
            self.delayMs = delayMs
        }

        enum CodingKeys: String, CodingKey, CaseIterable {
            case status, headers, body, delayMs = "delay_ms"
        }

        public init(from decoder: Decoder) throws {
            try rejectUnknownKeys(decoder, allowed: CodingKeys.allCases.map(\.rawValue))
            let c = try decoder.container(keyedBy: CodingKeys.self)
            status = try c.decodeIfPresent(Int.self, forKey: .status)
            headers = try c.decodeIfPresent([String: String].self, forKey: .headers) ?? [:]
            body = try c.decodeIfPresent(String.self, forKey: .body)
            delayMs = try c.decodeIfPresent(Int.self, forKey: .delayMs) ?? 0
        }

        public func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encodeIfPresent(status, forKey: .status)
            if !headers.isEmpty { try c.encode(headers, forKey: .headers) }
            try c.encodeIfPresent(body, forKey: .body)
            if delayMs != 0 { try c.encode(delayMs, forKey: .delayMs) }
        }
    }

    // MARK: Coding

    enum CodingKeys: String, CodingKey, CaseIterable {
        case seed, clockSkewSeconds = "clock_skew_s", description, rules
    }

    public init(from decoder: Decoder) throws {
        try rejectUnknownKeys(decoder, allowed: CodingKeys.allCases.map(\.rawValue))
        let c = try decoder.container(keyedBy: CodingKeys.self)
        if c.contains(.seed) {
            guard let seed = try? c.decode(UInt64.self, forKey: .seed) else {
                throw DecodingError.dataCorrupted(.init(codingPath: [CodingKeys.seed],
                                                        debugDescription: "must be an integer ≥ 0"))
            }
            self.seed = seed
        } else {
            seed = 0
        }
        clockSkewSeconds = try c.decodeIfPresent(Double.self, forKey: .clockSkewSeconds) ?? 0
        description = try c.decodeIfPresent(String.self, forKey: .description)
        rules = try c.decodeIfPresent([Rule].self, forKey: .rules) ?? []
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(seed, forKey: .seed)
        try c.encode(clockSkewSeconds, forKey: .clockSkewSeconds)
        try c.encodeIfPresent(description, forKey: .description)
        try c.encode(rules, forKey: .rules)
    }

    /// Decodes and checks a scenario from JSON.
    public static func decode(from data: Data) throws -> Scenario {
        // Foundation's decoder lets a trailing comma through and says only "not valid JSON": the mock's own strict
        // parser reads the text first and says where it breaks.
        try strictJSONCheck(data)
        let scenario: Scenario
        do {
            scenario = try JSONDecoder().decode(Scenario.self, from: data)
        } catch let error as DecodingError {
            throw ScenarioError.invalid(Self.describe(error))
        } catch let error as ScenarioError {
            throw error
        } catch {
            throw ScenarioError.invalid("not valid JSON (\(error))")
        }
        try scenario.check()
        return scenario
    }

    /// Loads a scenario file (see `Fixtures/scenarios/`).
    public static func load(path: String) throws -> Scenario {
        let data = try readFile(path) { ScenarioError.unreadable(path: path, reason: $0) }
        do {
            return try decode(from: data)
        } catch ScenarioError.invalid(let message) {
            throw ScenarioError.invalid("\(path): \(message)")
        }
    }

    /// The scenario as pretty JSON (what `GET /_mock/scenario` answers).
    public func jsonData() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)) ?? Data("{}".utf8)
    }

    /// Checks the values that decoding alone cannot.
    public func check() throws {
        guard clockSkewSeconds.isFinite else { throw ScenarioError.invalid("clock_skew_s must be finite") }
        for (i, rule) in rules.enumerated() {
            func bad(_ message: String) -> ScenarioError { .invalid("rules[\(i)]: \(message)") }
            let m = rule.match
            if let p = m.probability, !(0...1).contains(p) { throw bad("probability must be between 0 and 1") }
            if let a = m.afterSeconds, !(a.isFinite && a >= 0) { throw bad("after_s must be ≥ 0") }
            if let u = m.untilSeconds, !(u.isFinite && u >= 0) { throw bad("until_s must be ≥ 0") }
            if let a = m.afterSeconds, let u = m.untilSeconds, u <= a { throw bad("until_s must be after after_s") }
            if let n = m.minLogs, n < 0 { throw bad("min_logs must be ≥ 0") }
            switch rule.outcome {
            case .respond(let r):
                if let s = r.status, !(100...599).contains(s) { throw bad("status must be 100…599") }
                if r.delayMs < 0 { throw bad("delay_ms must be ≥ 0") }
                for (name, value) in r.headers where !HTTPResponse.isValidHeader(name: name, value: value) {
                    throw bad("header \"\(name)\" is not a valid HTTP header")
                }
            case .refuse(let duration):
                if let d = duration, !(d.isFinite && d > 0) { throw bad("duration_s must be > 0") }
                if duration == nil && m.untilSeconds == nil {
                    throw bad("refuse needs duration_s or a match with until_s (when to accept connections again)")
                }
            case .reset, .dropBeforeBody, .dropAfterBody, .hang, .malformed:
                break
            }
            if let network = rule.network {
                if let problem = network.problem() { throw bad(problem) }
                guard case .respond = rule.outcome else {
                    throw bad("network combines with respond (or the default answer), not with action \"\(rule.outcome.kind.rawValue)\"")
                }
            }
            if rule.isHeadRule {
                let what = rule.outcome == .dropBeforeBody ? "drop_before_body" : "network.kbps"
                if m.needsBody {
                    throw bad("\(what) is decided when the request head arrives: it cannot match on log_name or min_logs")
                }
                if let earlier = rules[..<i].firstIndex(where: { $0.match.needsBody }) {
                    throw bad("\(what) is decided when the request head arrives: it cannot follow rules[\(earlier)], "
                              + "which matches on the body (log_name or min_logs); put it first")
                }
            }
        }
    }

    static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [CodingKey]) -> String {
            var out = ""
            for key in keys {
                if let i = key.intValue { out += "[\(i)]" } else { out += (out.isEmpty ? "" : ".") + key.stringValue }
            }
            return out.isEmpty ? "scenario" : out
        }
        switch error {
        case .typeMismatch(_, let c), .valueNotFound(_, let c), .keyNotFound(_, let c):
            if case .keyNotFound(let key, _) = error {
                return "\(path(c.codingPath + [key])): missing"
            }
            return "\(path(c.codingPath)): \(c.debugDescription)"
        case .dataCorrupted(let c):
            if let underlying = c.underlyingError { return "\(path(c.codingPath)): not valid JSON (\(underlying))" }
            return "\(path(c.codingPath)): \(c.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}

extension Scenario.Rule {
    enum CodingKeys: String, CodingKey, CaseIterable {
        case match, respond, action, durationSeconds = "duration_s", network, comment
    }

    public init(from decoder: Decoder) throws {
        try rejectUnknownKeys(decoder, allowed: CodingKeys.allCases.map(\.rawValue))
        let c = try decoder.container(keyedBy: CodingKeys.self)
        match = try c.decodeIfPresent(Scenario.Match.self, forKey: .match) ?? Scenario.Match()
        comment = try c.decodeIfPresent(String.self, forKey: .comment)
        outcome = try Scenario.Outcome(from: decoder)
        network = try c.decodeIfPresent(Scenario.Network.self, forKey: .network)
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(match, forKey: .match)
        try c.encodeIfPresent(comment, forKey: .comment)
        try c.encodeIfPresent(network, forKey: .network)
        switch outcome {
        case .respond(let r):
            if !(r == Scenario.Response() && network != nil) { try c.encode(r, forKey: .respond) }
        case .refuse(let d):
            try c.encode(outcome.kind, forKey: .action)
            try c.encodeIfPresent(d, forKey: .durationSeconds)
        case .reset, .dropBeforeBody, .dropAfterBody, .hang, .malformed:
            try c.encode(outcome.kind, forKey: .action)
        }
    }
}

/// A rule's fault as the scenario file writes it: `respond`, or `action` (with `duration_s` for `refuse`), or only
/// `network` (the normal answer, shaped). Decoded from the rule's own object, beside its `match` and `network`.
extension Fault: Decodable where Answer == Scenario.Response, Outage == Double? {
    /// `.refuse(durationSeconds: 10)`: the port stays closed this long (nil: until the rule's `until_s`).
    public static func refuse(durationSeconds: Double?) -> Self { .refuse(durationSeconds) }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: Scenario.Rule.CodingKeys.self)
        let respond = try c.decodeIfPresent(Scenario.Response.self, forKey: .respond)
        let action = try c.decodeIfPresent(String.self, forKey: .action)
        let duration = try c.decodeIfPresent(Double.self, forKey: .durationSeconds)
        func fail(_ message: String) -> DecodingError {
            .dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: message))
        }
        switch (respond, action) {
        case (let r?, nil):
            self = .respond(r)
        case (nil, nil) where c.contains(.network):
            // SPEC M8: a network object alone shapes the normal answer.
            self = .respond(Scenario.Response())
        case (nil, let name?):
            guard let fault = FaultKind(rawValue: name).flatMap({ Self(action: $0, durationSeconds: duration) }) else {
                let known = FaultKind.allCases.filter(\.isAction).map(\.rawValue).joined(separator: ", ")
                throw fail("unknown action \"\(name)\" (\(known))")
            }
            self = fault
        default:
            throw fail("a rule needs exactly one of \"respond\" or \"action\" (or only \"network\")")
        }
        if duration != nil, case .refuse = self {} else if duration != nil {
            throw fail("duration_s only applies to the refuse action")
        }
    }

    /// The fault an `action` names (a scenario's, or a recording's to replay); nil for a name that is no action.
    init?(action: FaultKind, durationSeconds: Double?) {
        switch action {
        case .refuse: self = .refuse(durationSeconds)
        case .reset: self = .reset
        case .dropBeforeBody: self = .dropBeforeBody
        case .dropAfterBody: self = .dropAfterBody
        case .hang: self = .hang
        case .malformed: self = .malformed
        case .respond, .latency, .bandwidth, .slice, .limitBytes, .slowClose: return nil
        }
    }
}

/// Request numbers: `"3"`, `"1-5"`, `"10-"`, or a comma-separated list of those.
public struct RequestNumbers: Codable, Sendable, Equatable, CustomStringConvertible {
    /// Inclusive ranges; `upper == nil` is open-ended.
    public private(set) var ranges: [(lower: Int, upper: Int?)]
    public let description: String

    public init(_ text: String) throws {
        var ranges: [(Int, Int?)] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let item = part.trimmingSpaceAndTab
            let bounds = item.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            guard let lower = Int(bounds[0]), lower >= 1 else { throw ScenarioError.badRequests(text) }
            if bounds.count == 1 {
                ranges.append((lower, lower))
            } else if bounds[1].isEmpty {
                ranges.append((lower, nil))
            } else if let upper = Int(bounds[1]), upper >= lower {
                ranges.append((lower, upper))
            } else {
                throw ScenarioError.badRequests(text)
            }
        }
        self.ranges = ranges
        self.description = text
    }

    public func contains(_ n: Int) -> Bool {
        ranges.contains { n >= $0.lower && ($0.upper.map { n <= $0 } ?? true) }
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let n = try? c.decode(Int.self) {
            try self.init(String(n))
        } else {
            let text = try c.decode(String.self)
            do {
                try self.init(text)
            } catch {
                throw DecodingError.dataCorrupted(.init(
                    codingPath: decoder.codingPath,
                    debugDescription: "requests must look like \"3\", \"1-5\", \"10-\" or a list of those such as \"1,4,7-9\", got \"\(text)\""))
            }
        }
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.singleValueContainer()
        try c.encode(description)
    }

    public static func == (a: RequestNumbers, b: RequestNumbers) -> Bool { a.description == b.description }
}

/// Throws `invalid` naming the line and column where `data` stops being strict JSON (RFC 8259: no trailing comma,
/// no comment, nothing after the value).
func strictJSONCheck(_ data: Data) throws {
    if let problem = strictJSONProblem(data) {
        throw ScenarioError.invalid("not valid JSON at line \(problem.line), column \(problem.column): \(problem.message)")
    }
}

/// Where and why `data` is not strict JSON, read by the mock's own parser; nil when it is.
func strictJSONProblem(_ data: Data) -> (line: Int, column: Int, message: String)? {
    let failure: JSONParseError? = data.withUnsafeBytes { raw in
        do throws(JSONParseError) {
            _ = try JSONTape.parse(raw.bindMemory(to: UInt8.self))
            return nil
        } catch {
            return error
        }
    }
    guard let failure else { return nil }
    var line = 1, column = 1
    for byte in data.prefix(failure.offset) {
        if byte == UInt8(ascii: "\n") { line += 1; column = 1 } else if byte & 0xC0 != 0x80 { column += 1 }
    }
    return (line, column, failure.message)
}

/// The bytes of the file at `path`, or the error `failure` makes of the reason (errno's text) it cannot be read.
func readFile<E: Error>(_ path: String, _ failure: (String) -> E) throws -> Data {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw failure(String(cString: strerror(errno))) }
    defer { close(fd) }
    var data = Data()
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n < 0 { throw failure(String(cString: strerror(errno))) }
        if n == 0 { return data }
        data.append(contentsOf: buffer[0..<n])
    }
}

public enum ScenarioError: Error, Equatable, CustomStringConvertible {
    case unreadable(path: String, reason: String)
    case invalid(String)
    case badRequests(String)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "cannot read scenario file \(path): \(reason)"
        case .invalid(let message): "invalid scenario: \(message)"
        case .badRequests(let text): "requests must look like \"3\", \"1-5\", \"10-\" or a list of those such as \"1,4,7-9\", got \"\(text)\""
        }
    }
}

private struct AnyKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { self.stringValue = String(intValue); self.intValue = intValue }
}

/// Throws on a key outside `allowed`: a misspelt match key must not turn into a rule that fits everything.
private func rejectUnknownKeys(_ decoder: Decoder, allowed: [String]) throws {
    let c = try decoder.container(keyedBy: AnyKey.self)
    for key in c.allKeys where !allowed.contains(key.stringValue) {
        throw DecodingError.dataCorrupted(.init(
            codingPath: decoder.codingPath + [key],
            debugDescription: "unknown key \"\(key.stringValue)\" (allowed: \(allowed.joined(separator: ", ")))"))
    }
}

extension Substring {
    /// Foundation's `trimmingCharacters(in: .whitespaces)` without Foundation proper, which the release `outbox`
    /// (running this mock for its demo) must not link. Public for the CLI's own parsing.
    public var trimmingSpaceAndTab: Substring {
        func isSpace(_ c: Character) -> Bool {
            c.unicodeScalars.allSatisfy { $0.value == 0x09 || $0.properties.generalCategory == .spaceSeparator }
        }
        var text = self
        while let c = text.first, isSpace(c) { text.removeFirst() }
        while let c = text.last, isSpace(c) { text.removeLast() }
        return text
    }
}
