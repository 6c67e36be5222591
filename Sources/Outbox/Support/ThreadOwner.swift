import Glibc

/// The thread a loop-owned object belongs to, checked at every entry of the store, the transport and the reachability
/// watcher — the one thread check of the library. From creation the creating thread owns the object; the engine hands
/// it to its loop (`hand(to:)`, or `init(loop:)` for what the loop owns from the start), whose thread then owns it —
/// before a dedicated loop's thread starts, that is still the creating thread (`EventLoop.ownsCallingThread`).
///
/// On in release builds too: the store's connection is opened without SQLite's own mutex (`SQLITE_OPEN_NOMUTEX`) and
/// curl's and libuv's handles have none, so a call from another thread would not fail, it would corrupt — the store's
/// file among the rest — silently and far from the call. GRDB's `SchedulingWatchdog` keeps its check in release for
/// the same reason. The check is a `pthread_equal` (two, for a loop-owned object): nothing beside a SQLite statement.
final class ThreadOwner: @unchecked Sendable {
    /// What a call from another thread does (`file` and `line`: the entry called).
    typealias Violation = (_ file: StaticString, _ line: UInt) -> Void

    private let creator = pthread_self()
    private var loop: EventLoop?
    /// `stop` unless a test, before the object is used from another thread, puts a recorder here.
    var onViolation: Violation = ThreadOwner.stop

    init() {}

    /// Owned by `loop` from the start.
    init(loop: EventLoop) { self.loop = loop }

    func hand(to loop: EventLoop) {
        check()
        self.loop = loop
    }

    /// Whether the calling thread owns the object.
    var isOwningThread: Bool {
        if let loop { return loop.ownsCallingThread }
        return pthread_equal(pthread_self(), creator) != 0
    }

    @inline(__always)
    func check(file: StaticString = #fileID, line: UInt = #line) {
        if !isOwningThread { onViolation(file, line) }
    }

    /// A violation is a programming error in the library or its host, not a condition of the input, the disk or the
    /// network: going on would let two threads into one SQLite connection or one curl handle and corrupt the store or
    /// the process, so the process stops here, where the cause is, in every build.
    static func stop(file: StaticString, line: UInt) {
        preconditionFailure("called off the thread that owns it", file: file, line: line)
    }
}
