/// Every fault the mock injects, one type from the scenario file to the connection (SPEC M2, M3, M8). A rule's
/// `respond` or `action` decodes into it (`Scenario.Outcome`: the answer a `Scenario.Response`, the outage the rule's
/// `duration_s`), `ScenarioEngine` picks the rule, `MockCore.fate` resolves the answer and the outage
/// (`Verdict.Action`: the `HTTPResponse` and its delay, the instant the port opens again), and `ConnectionHandler`
/// carries it out. Only the payloads change type on the way, so a new fault is one case here (and its name in
/// `FaultKind`): the compiler then names every place that must handle it, the decoder of scenario files included.
public enum Fault<Answer, Outage> {
    /// Answer: the scenario's response, or the normal one (a rule without a status, a slow but healthy server).
    case respond(Answer)
    /// Close the listening socket (new connections are refused) and every open connection; the same port is bound
    /// again after `duration_s`, or when the rule's `until_s` ends.
    case refuse(Outage)
    /// Close the connection with a TCP reset (SO_LINGER 0) instead of answering; logs are not recorded.
    case reset
    /// Close the connection once the request head is read, before reading the body (SPEC M8); nothing is recorded.
    /// Decided when the head arrives.
    case dropBeforeBody
    /// Record the logs as received, then close the connection without answering (a lost acknowledgement).
    case dropAfterBody
    /// Never answer; the connection stays open until the client gives up.
    case hang
    /// Answer bytes that are not HTTP, then close.
    case malformed

    /// Its name in `faults` (`/_mock/stats`), `outbox_mock_faults_total{kind}`, `/_mock/requests` and recordings.
    public var kind: FaultKind {
        switch self {
        case .respond: .respond
        case .refuse: .refuse
        case .reset: .reset
        case .dropBeforeBody: .dropBeforeBody
        case .dropAfterBody: .dropAfterBody
        case .hang: .hang
        case .malformed: .malformed
        }
    }

    /// What `/_mock/requests` and a recording call the `action`: the fault's name, nil for an answer.
    var actionName: String? { kind.isAction ? kind.rawValue : nil }
}

extension Fault: Sendable where Answer: Sendable, Outage: Sendable {}
extension Fault: Equatable where Answer: Equatable, Outage: Equatable {}

/// The name of each fault, as the scenario file's `action` spells it and as it is counted: a `Fault`'s kind, or one
/// of the network faults (`Scenario.Network`) that shape an answer. Its raw value is the one name used in `faults`
/// (`/_mock/stats`), `outbox_mock_faults_total{kind}`, `/_mock/requests`' `action` and a recording's `action` and
/// `fault`.
public enum FaultKind: String, Codable, Sendable, CaseIterable {
    // A `Fault`'s kind, in the order an unknown `action`'s error lists them.
    case respond
    case refuse
    case reset
    case dropBeforeBody = "drop_before_body"
    case dropAfterBody = "drop_after_body"
    case hang
    case malformed
    // How the answer travels (`Scenario.Network`).
    case latency
    case bandwidth
    case slice
    case limitBytes = "limit_bytes"
    case slowClose = "slow_close"

    /// A fault that answers nothing usable: what a scenario's `action`, `/_mock/requests` and a recording name.
    var isAction: Bool {
        switch self {
        case .refuse, .reset, .dropAfterBody, .dropBeforeBody, .hang, .malformed: true
        case .respond, .latency, .bandwidth, .slice, .limitBytes, .slowClose: false
        }
    }
}
