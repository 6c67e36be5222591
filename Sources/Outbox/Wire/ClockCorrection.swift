/// SPEC A9: the server's clock, learned from the `Date` header of its responses, corrects log timestamps when the
/// local wall clock is off by more than a threshold. The server's time is anchored on the boot clock (the server
/// time at the last response plus the CLOCK_BOOTTIME elapsed since), so a wall clock stepped between that response
/// and the next send moves no timestamp. Pure: the caller passes every clock reading.
struct ClockCorrection: Sendable, Equatable {
    /// Offsets smaller than this are ignored (a `Date` header has one-second resolution).
    var thresholdMs: Int64 = 1000

    /// The server's time at one reading of the boot clock.
    struct Anchor: Sendable, Equatable {
        var serverMs: Int64
        var monoNs: Int64
        var boot: Int64
    }
    private(set) var anchor: Anchor?

    init(thresholdMs: Int64 = 1000) { self.thresholdMs = thresholdMs }

    /// A response arrived with `Date: serverMs` when the boot clock read `monoNs` (boot `boot`).
    mutating func learn(serverMs: Int64, monoNs: Int64, boot: Int64) {
        // The header truncates to the second: the server's true time is in [serverMs, serverMs + 1000).
        anchor = Anchor(serverMs: serverMs + 500, monoNs: monoNs, boot: boot)
    }

    /// Server time minus local wall time now, when known and above the threshold.
    func offsetMs(nowWallMs: Int64, nowMonoNs: Int64, nowBoot: Int64) -> Int64? {
        guard let serverNow = serverMs(nowMonoNs: nowMonoNs, nowBoot: nowBoot) else { return nil }
        let offset = serverNow - nowWallMs
        return abs(offset) > thresholdMs ? offset : nil
    }

    /// The timestamp to send for a log captured at (`wallMs`, `monoNs`, `boot`), now being (`nowWallMs`, `nowMonoNs`,
    /// `nowBoot`). Within one boot: the server's time at the capture (server-now minus the log's boot-clock age) when
    /// the log's own wall time differs from it by more than the threshold, else its wall time. The comparison is made
    /// at the capture, not now: a log captured while the wall clock was stepped and sent after the step was undone
    /// carries the step, although the clocks agree again when it is sent. Another boot: its wall time plus the
    /// offset now.
    func timestamp(wallMs: Int64, monoNs: Int64, boot: Int64, nowWallMs: Int64, nowMonoNs: Int64, nowBoot: Int64) -> Int64 {
        guard let serverNow = serverMs(nowMonoNs: nowMonoNs, nowBoot: nowBoot) else { return wallMs }
        if boot == nowBoot && boot != 0 && nowMonoNs >= monoNs {
            let serverAtCapture = serverNow - (nowMonoNs - monoNs) / 1_000_000
            return abs(serverAtCapture - wallMs) > thresholdMs ? serverAtCapture : wallMs
        }
        guard let offset = offsetMs(nowWallMs: nowWallMs, nowMonoNs: nowMonoNs, nowBoot: nowBoot) else { return wallMs }
        return wallMs + offset
    }

    /// The server's time now, from the anchor and the boot clock; nil before a response or in another boot.
    private func serverMs(nowMonoNs: Int64, nowBoot: Int64) -> Int64? {
        guard let anchor, anchor.boot == nowBoot, nowMonoNs >= anchor.monoNs else { return nil }
        return anchor.serverMs + (nowMonoNs - anchor.monoNs) / 1_000_000
    }
}
