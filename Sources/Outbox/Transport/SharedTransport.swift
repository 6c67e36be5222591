import Logging

/// One HTTP client for every engine on one host loop (SPEC F4): one curl multi handle, one bounded pool of kept-alive
/// connections and one admission queue, instead of one of each per engine. A process that runs many engines on a
/// few loops (`outbox fleet`) creates one per loop and puts it in each engine's `Configuration.sharedTransport`.
///
/// Each engine still has at most 3 requests inside curl (SPEC C3); all of them together at most
/// `maxActiveTransfers`. Requests beyond either cap wait in the transport's queue, first come first served, and
/// their timeout starts only when curl takes them. An engine's shutdown cancels its own requests, no one else's.
///
/// ```swift
/// let shared = try SharedTransport(loop: uvLoop)          // on the loop's thread
/// var configuration = Configuration(storePath: path)
/// configuration.runMode = .hostLoop(uvLoop)
/// configuration.sharedTransport = shared
/// let engine = try OutboxEngine(configuration: configuration)
/// // …
/// engine.shutdown()
/// shared.close()                                          // after the engines on the loop shut down
/// ```
///
/// Loop thread only, like the engines in host-loop mode: create it, and call `close()`, on the thread that runs the
/// loop. Engines whose transport settings (`requestTimeout`, `caFile`) differ from the first one's get their own.
public final class SharedTransport: @unchecked Sendable {
    /// Requests in curl at once for the whole loop.
    public let maxActiveTransfers: Int
    let loop: EventLoop
    /// Its transport's curl handles are the loop thread's.
    private let owner: ThreadOwner
    private var transport: Transport?
    /// The first engine's settings, which every engine on this transport has.
    private var options: TransportOptions?
    private var nextLane = 1
    private var isClosed = false

    /// `loop` is the host's `uv_loop_t *`, the one the engines' `RunMode.hostLoop` names. `maxActiveTransfers`:
    /// 1 – 10 000; the connection pool keeps at most one more idle connection than that.
    public init(loop: UnsafeMutableRawPointer, maxActiveTransfers: Int = 32) throws {
        guard (1...10_000).contains(maxActiveTransfers) else {
            throw OutboxError.invalidConfiguration("SharedTransport maxActiveTransfers must be 1 – 10000, got \(maxActiveTransfers)")
        }
        self.maxActiveTransfers = maxActiveTransfers
        self.loop = try EventLoop(mode: .hostLoop(loop))
        owner = ThreadOwner(loop: self.loop)
    }

    /// Cancels whatever is still queued or in flight, frees curl and closes the transport's loop handles. Call on the
    /// loop thread once the engines that use it shut down. Idempotent.
    public func close() {
        guard !isClosed else { return }
        owner.check()
        isClosed = true
        transport?.close()
        transport = nil
        loop.closeAll()
    }

    /// Requests in curl now, and waiting for a slot (for tests and the fleet's progress).
    public var activeCount: Int { transport?.activeCount ?? 0 }
    public var queuedCount: Int { transport?.queuedCount ?? 0 }
    /// The most requests ever in curl at once.
    public var maxActiveObserved: Int { transport?.maxActiveObserved ?? 0 }

    /// A sender for one engine, or nil when this transport cannot serve it (closed, other settings): the engine then
    /// makes its own.
    func lane(options: TransportOptions, logger: Logger) throws -> TransportLane? {
        owner.check()
        guard !isClosed else { return nil }
        let transport: Transport
        if let existing = self.transport {
            guard self.options == options else { return nil }
            transport = existing
        } else {
            var shared = options
            shared.maxActiveTransfers = maxActiveTransfers
            transport = try Transport(loop: loop, options: shared, logger: logger)
            transport.laneCap = options.maxActiveTransfers
            self.transport = transport
            self.options = options
        }
        defer { nextLane += 1 }
        return TransportLane(transport: transport, lane: nextLane)
    }
}

/// One engine's sender on a `SharedTransport`: its requests carry its lane, and closing it cancels only them.
final class TransportLane: HTTPSender {
    let transport: Transport
    let lane: Int
    private var isClosed = false

    init(transport: Transport, lane: Int) {
        self.transport = transport
        self.lane = lane
    }

    func send(_ request: HTTPRequest, completion: @escaping (TransferResult) -> Void) -> TransferID {
        // A closed lane sends nothing, but answers as a send does: on a later loop turn, never inside this call
        // (a caller's bookkeeping for the transfer is not done before `send` returns).
        transport.send(request, lane: lane, refusing: isClosed, completion: completion)
    }

    func cancel(_ id: TransferID) {
        guard !isClosed else { return }
        transport.cancel(id)
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        transport.cancelAll(lane: lane)
    }
}
