/// SPEC A9: the server's clock, learned from the `Date` header of its responses, corrects log timestamps when the
/// local wall clock is off by more than a threshold. Pure: the caller passes every clock reading.
struct ClockCorrection: Sendable, Equatable {
    /// Offsets smaller than this are ignored (a `Date` header has one-second resolution).
    var thresholdMs: Int64 = 1000
    /// server − local wall clock, when known and above the threshold.
    private(set) var offsetMs: Int64? = nil

    /// A response arrived with `Date: serverMs` while the local wall clock read `localWallMs`.
    mutating func learn(serverMs: Int64, localWallMs: Int64) {
        // The header truncates to the second: the server's true time is in [serverMs, serverMs + 1000).
        let offset = serverMs + 500 - localWallMs
        offsetMs = abs(offset) > thresholdMs ? offset : nil
    }

    /// The timestamp to send for a log captured at (`wallMs`, `monoNs`, `boot`), now being (`nowWallMs`, `nowMonoNs`,
    /// `nowBoot`): server-now minus the log's monotonic age within one boot, wall time plus offset otherwise.
    func timestamp(wallMs: Int64, monoNs: Int64, boot: Int64, nowWallMs: Int64, nowMonoNs: Int64, nowBoot: Int64) -> Int64 {
        guard let offsetMs else { return wallMs }
        if boot == nowBoot && boot != 0 && nowMonoNs >= monoNs {
            return nowWallMs + offsetMs - (nowMonoNs - monoNs) / 1_000_000
        }
        return wallMs + offsetMs
    }
}
