import Glibc
import NIOConcurrencyHelpers

/// The time the mock reads. Monotonic time is scenario time: `at`, `after_s`/`until_s`, outage ends and request
/// durations count from the start or the last reset. Wall time is when logs arrive: `received_at`, delivery
/// delays, late logs (SPEC M7) and the `Date` header, all shifted by the scenario's `clock_skew_s`.
///
/// `MockServer.Configuration.clock` takes one; the default is `SystemMockClock`. A test drives scenario time
/// with `ManualMockClock` instead of sleeping:
///
/// ```swift
/// let clock = ManualMockClock()
/// let server = try MockServer(configuration: .init(scenario: scenario, clock: clock))
/// clock.advance(seconds: 0.5)   // the next request matches `"after_s": 0.4`
/// ```
/// Timers still run on the event loop's own time: a `delay_ms` answer and the reopening of the port after a
/// scheduled outage wait in real time on a running server (`EmbeddedEventLoop.advanceTime` in handler tests).
public protocol MockClock: Sendable {
    /// Nanoseconds on a clock that never goes back.
    func monotonicNs() -> UInt64
    /// Milliseconds since 1970-01-01 UTC.
    func wallMs() -> Int64
}

/// CLOCK_MONOTONIC and CLOCK_REALTIME, read without Foundation on the hot path.
public struct SystemMockClock: MockClock {
    public init() {}

    public func monotonicNs() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    public func wallMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}

/// A clock that moves only when told to (both readings together), for tests.
public final class ManualMockClock: MockClock {
    private let now: NIOLockedValueBox<(monotonicNs: UInt64, wallMs: Int64)>

    /// Starts at `wallMs` (2026-11-22T07:33:46Z by default) and an arbitrary monotonic reading.
    public init(wallMs: Int64 = 1_795_332_826_000, monotonicNs: UInt64 = 1_000_000_000_000) {
        now = NIOLockedValueBox((monotonicNs, wallMs))
    }

    public func monotonicNs() -> UInt64 { now.withLockedValue { $0.monotonicNs } }

    public func wallMs() -> Int64 { now.withLockedValue { $0.wallMs } }

    /// Moves both readings forward by `seconds` (≥ 0).
    public func advance(seconds: Double) {
        precondition(seconds >= 0 && seconds.isFinite, "a clock only moves forward, got \(seconds) s")
        let ns = UInt64((seconds * 1e9).rounded())
        now.withLockedValue { t in
            t.monotonicNs += ns
            t.wallMs += Int64(ns / 1_000_000)
        }
    }
}
