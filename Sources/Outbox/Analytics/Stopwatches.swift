import Synchronization

/// A duration timer started by `trackTimerStart` (SPEC A4). Two timers of one name have different ids, so they can
/// be paused and ended independently.
public struct TimerID: Hashable, Sendable, CustomStringConvertible {
    let handle: TimerBook.Handle
    /// The event name the timer's end tracks.
    public var name: String { handle.name }
    public var description: String { "\(handle.name)#\(handle.serial)" }
}

/// A screen opened by `startScreen` (SPEC A6). Nested screens, also of one title, are tracked independently.
public struct ScreenID: Hashable, Sendable, CustomStringConvertible {
    let handle: TimerBook.Handle
    public var title: String { handle.name }
    public var description: String { "\(handle.name)#\(handle.serial)" }
}

/// The open timers and screens of one engine (SPEC A4, A6), behind one lock held for microseconds. Lifecycle calls
/// hand their command to the intake while holding it, so the timers and the session model see the same order.
final class Stopwatches: Sendable {
    struct Books: Sendable {
        var timers = TimerBook()
        var screens = TimerBook()
    }
    let books = Mutex(Books())
}
