import Testing
@testable import Outbox

/// `make torture`'s clock jumps cannot see sessions (`outbox emit` tracks no lifecycle), so the rule is proved here,
/// on the pure state: the background stretch that renews a session is measured on the boot clock.
@Suite("Sessions against wall-clock steps (SPEC A1)")
struct SessionClockTests {
    private static let second: Int64 = 1_000_000_000
    private static let day: Int64 = 86_400_000

    private func renewed(backgroundSeconds: Int64, wallStepMs: Int64) -> Bool {
        var ids = IDGenerator(seed: 3)
        var model = AnalyticsState(settings: .init(sessionTracking: .automatic, sessionTimeoutNs: 20 * Self.second,
                                                   tracksAppLifecycle: false))
        let wall0: Int64 = 1_700_000_000_000
        _ = model.apply(.engineStarted(Moment(wallMs: wall0, monoNs: 0)), ids: &ids)
        let first = model.session?.id
        _ = model.apply(.enterBackground(Moment(wallMs: wall0 + 5000, monoNs: 5 * Self.second)), ids: &ids)
        let back = Moment(wallMs: wall0 + 5000 + backgroundSeconds * 1000 + wallStepMs,
                          monoNs: (5 + backgroundSeconds) * Self.second)
        _ = model.apply(.enterForeground(back), ids: &ids)
        return model.session?.id != first
    }

    // SPEC A1: a wall clock stepped by ±1 day or ±25 days during a short background stretch keeps the session, and
    // one stepped back during a long stretch does not keep it: only boot-clock time counts.
    @Test(arguments: [day, -day, 25 * day, -25 * day])
    func aWallStepDuringTheBackgroundDoesNotDecideTheSession(stepMs: Int64) {
        #expect(!renewed(backgroundSeconds: 3, wallStepMs: stepMs))
        #expect(renewed(backgroundSeconds: 30, wallStepMs: -stepMs))
    }
}
