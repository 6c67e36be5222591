/// The engine's minute chores on the loop (unref'd: they never keep a host's loop alive): the device context is
/// read again (SPEC A10) and logs past their age are deleted (SPEC S4) even while nothing is claimed.
final class Housekeeping {
    static let intervalMs: UInt64 = 60_000
    private let timer: LoopTimer

    init(loop: EventLoop, chores: @escaping () -> Void) {
        timer = LoopTimer(loop: loop, action: chores)
        timer.unref()
        timer.start(afterMs: Self.intervalMs, repeatMs: Self.intervalMs)
    }
}
