import NIOCore

/// One event loop's answers, flushed together once the loop has handled every connection that was ready.
///
/// With one request in flight per connection, a client waits for each answer; flushing each at once woke the
/// client (and, on loopback, ran its TCP receive path) once per answer, on the mock's CPU. Flushed together, a
/// turn that handled four connections wakes it once (SPEC M10).
///
/// Used only on its own event loop, which is what makes the unchecked `Sendable` sound.
final class FlushBatcher: @unchecked Sendable {
    private let loop: EventLoop
    private var pending: [ChannelHandlerContext] = []

    init(loop: EventLoop) {
        self.loop = loop
    }

    /// `context` has written an answer: it is flushed after this turn's other ready connections.
    func add(_ context: ChannelHandlerContext) {
        pending.append(context)
        // Tasks run after the loop has handled all the I/O events of its turn.
        if pending.count == 1 { loop.execute { self.flushNow() } }
    }

    func flushNow() {
        guard !pending.isEmpty else { return }
        let contexts = pending
        pending.removeAll(keepingCapacity: true)
        for context in contexts { context.flush() }
    }
}
