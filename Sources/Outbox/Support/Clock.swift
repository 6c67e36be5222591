import Glibc
import Synchronization

/// Wall and monotonic time, injectable so that tests control expiry, back-off and durations.
public protocol OutboxClock: Sendable {
    /// Milliseconds since the Unix epoch.
    func wallMs() -> Int64
    /// Nanoseconds of CLOCK_BOOTTIME (keeps counting during suspend, unlike CLOCK_MONOTONIC).
    func monoNs() -> Int64
}

/// The real clocks of this machine.
public struct SystemClock: OutboxClock {
    public init() {}
    public func wallMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
    public func monoNs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_BOOTTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}

/// A clock the test moves by hand. Thread-safe.
public final class ManualClock: OutboxClock, Sendable {
    private let now: Mutex<(wall: Int64, mono: Int64)>

    public init(wallMs: Int64 = 1_700_000_000_000, monoNs: Int64 = 1_000_000_000) {
        now = Mutex((wallMs, monoNs))
    }

    public func wallMs() -> Int64 { now.withLock { $0.wall } }
    public func monoNs() -> Int64 { now.withLock { $0.mono } }

    /// Moves both clocks forward.
    public func advance(ms: Int64) {
        now.withLock {
            $0.wall += ms
            $0.mono += ms * 1_000_000
        }
    }
    /// Moves only the wall clock (a user or NTP changing the time); the monotonic clock is unaffected.
    public func jumpWall(ms: Int64) {
        now.withLock { $0.wall += ms }
    }
}
