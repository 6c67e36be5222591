import Glibc

/// The thread a loop-owned object belongs to, checked at its entries in debug builds (one SQLite connection, one
/// thread: the store is opened without SQLite's own mutex). From creation the creating thread owns it; the engine
/// hands it to its loop (`hand(to:)`), whose own check then applies — before a dedicated loop's thread starts, that is
/// still the creating thread.
final class ThreadOwner: @unchecked Sendable {
    private let creator = pthread_self()
    private var loop: EventLoop?

    init() {}

    func hand(to loop: EventLoop) {
        check()
        self.loop = loop
    }

    func check(file: StaticString = #fileID, line: UInt = #line) {
        #if DEBUG
        if let loop {
            loop.assertOnLoopThread(file: file, line: line)
        } else {
            assert(pthread_equal(pthread_self(), creator) != 0, "called off the thread that owns it", file: file, line: line)
        }
        #endif
    }
}
