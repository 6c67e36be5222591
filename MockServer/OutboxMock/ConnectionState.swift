import NIOCore

/// A connection's lifecycle as a value, in swift-nio's state-machine style: whether a request read whole is processed
/// now, waits behind an answer still owed (HTTP/1.1 answers go out in request order), or is dropped because the
/// connection is finished. The handler (`ConnectionHandler`) tells it what happened and carries out what it returns;
/// `ConnectionStateTests` drives it without a socket.
struct ConnectionState<Request> {
    enum Mode: Equatable, Sendable {
        /// A request may be processed as soon as it is read.
        case ready
        /// An answer is owed later (a delayed answer, a paced read or write): requests read meanwhile wait.
        case answering
        /// Closing, closed, hanging or faulted: nothing more is read, processed or answered.
        case finished
    }

    private(set) var mode: Mode = .ready
    private var queued = CircularBuffer<Request>()

    var isFinished: Bool { mode == .finished }
    /// Nothing owed and nothing waiting: a request may be answered right away (a 100 Continue, a drop before its body).
    var isIdle: Bool { mode == .ready && queued.isEmpty }
    var queuedCount: Int { queued.count }

    /// A request was read whole: returns it when it is to be processed now; nil when it waits or is dropped.
    mutating func requestRead(_ request: Request) -> Request? {
        switch mode {
        case .ready:
            return request
        case .answering:
            queued.append(request)
            return nil
        case .finished:
            return nil
        }
    }

    /// The answer being made is owed later: requests read meanwhile wait behind it.
    mutating func answerDeferred() {
        if mode == .ready { mode = .answering }
    }

    /// The deferral ended: the owed answer goes now.
    mutating func deferralEnded() {
        if mode == .answering { mode = .ready }
    }

    /// An answer was written and the connection stays open: returns the next waiting request to process, if any.
    mutating func answered() -> Request? {
        guard mode == .ready else { return nil }
        return queued.popFirst()
    }

    /// Nothing more is read, processed or answered; what waited is dropped (its client sees the connection end).
    mutating func finish() {
        mode = .finished
        queued.removeAll()
    }
}
