import ArgumentParser
import Outbox

/// SPEC R9–R10 on the command line (`emit`, `fleet`): recovery probing is on by default.
struct RecoveryOptions: ParsableArguments {
    @Flag(name: .customLong("no-recovery-probe"),
          help: "Turn recovery probing off (SPEC R9–R10): retries and disabling as App Center has them (R3/R5) alone.")
    var off = false

    /// With `--testing` and retry intervals shorter than a second, the probes run on the retries' scale (the
    /// shortest interval, capped at the longest), so that a test's fault resolves in its own seconds; otherwise the
    /// defaults (1 s doubling to 10 s).
    func apply(to configuration: inout Configuration, testing: Bool) {
        guard !off else {
            configuration.recoveryProbe = nil
            return
        }
        guard testing, let shortest = configuration.retryIntervals.min(), let longest = configuration.retryIntervals.max(),
              shortest < .seconds(1) else { return }
        let cap = min(.seconds(10), max(shortest, longest))
        configuration.recoveryProbe = RecoveryProbe(initialInterval: shortest, maxInterval: cap, longFaultInterval: cap,
                                                    drainJitter: shortest)
    }
}
