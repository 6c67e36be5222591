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
///
/// A pthread mutex rather than `Synchronization.Mutex`: the engine's loop reads this clock while a test moves it,
/// and Mutex's contended slow path lives in the uninstrumented libswiftSynchronization, so ThreadSanitizer saw no
/// ordering between the two and reported a race (scripts/tsan.supp). It understands pthread mutexes.
public final class ManualClock: OutboxClock, @unchecked Sendable {
    // Allocated once: a pthread mutex must not move, which a stored property does not promise.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let now = UnsafeMutablePointer<(wall: Int64, mono: Int64)>.allocate(capacity: 1)

    public init(wallMs: Int64 = 1_700_000_000_000, monoNs: Int64 = 1_000_000_000) {
        pthread_mutex_init(mutex, nil)
        now.initialize(to: (wallMs, monoNs))
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
        now.deinitialize(count: 1)
        now.deallocate()
    }

    private func locked<T>(_ body: (inout (wall: Int64, mono: Int64)) -> T) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body(&now.pointee)
    }

    public func wallMs() -> Int64 { locked { $0.wall } }
    public func monoNs() -> Int64 { locked { $0.mono } }

    /// Moves both clocks forward.
    public func advance(ms: Int64) {
        locked {
            $0.wall += ms
            $0.mono += ms * 1_000_000
        }
    }
    /// Moves only the wall clock (a user or NTP changing the time); the monotonic clock is unaffected.
    public func jumpWall(ms: Int64) {
        locked { $0.wall += ms }
    }
}
