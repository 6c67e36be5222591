/// Every fault the mock injects, in one vocabulary (SPEC M2, M8): what a rule makes of the answer, and how the
/// answer travels. Its raw value is the one name used in `faults` (`/_mock/stats`), `outbox_mock_faults_total{kind}`,
/// `/_mock/requests`' `action` and a recording's `action` and `fault`. A new fault kind is a case here; the compiler
/// then names every place that must handle it.
public enum FaultKind: String, Codable, Sendable, CaseIterable {
    // What a rule makes of the answer (`Scenario.Outcome`).
    case respond
    case refuse
    case reset
    case dropAfterBody = "drop_after_body"
    case dropBeforeBody = "drop_before_body"
    case hang
    case malformed
    // How the answer travels (`Scenario.Network`).
    case latency
    case bandwidth
    case slice
    case limitBytes = "limit_bytes"
    case slowClose = "slow_close"

    /// An outcome kind that answers nothing usable: what `/_mock/requests` and a recording call the `action`.
    var isAction: Bool {
        switch self {
        case .refuse, .reset, .dropAfterBody, .dropBeforeBody, .hang, .malformed: true
        case .respond, .latency, .bandwidth, .slice, .limitBytes, .slowClose: false
        }
    }
}
