import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The listening socket and the open connections. A `refuse` outage closes the listening socket —
/// so the kernel answers new connections with RST, "connection refused" — and every open
/// connection, then binds the same port again when the outage ends (SPEC M3 "down periods").
final class Listener: Sendable {
    private struct State {
        var group: MultiThreadedEventLoopGroup?
        var serverChannel: Channel?
        var port: Int
        var children: [ObjectIdentifier: Channel] = [:]
        /// Monotonic ns until which the port stays closed.
        var outageUntilNs: UInt64?
        /// A re-bind in progress after an outage; stop() waits for it so no listener outlives the loops.
        var binding: EventLoopFuture<Channel>?
        var stopped = false
        /// Timers of the scenario's time-window outages (replaced on reset and scenario swap).
        var scheduled: [Scheduled<Void>] = []
        /// Timers that re-open the port; cancelled by stop().
        var timers: [Scheduled<Void>] = []
    }

    let host: String
    private let state: NIOLockedValueBox<State>
    private let log: (@Sendable (String) -> Void)?
    /// Outage ends are monotonic readings of the server's clock.
    private let clock: any MockClock

    init(host: String, port: Int, clock: any MockClock, log: (@Sendable (String) -> Void)?) {
        self.host = host
        self.state = NIOLockedValueBox(State(port: port))
        self.clock = clock
        self.log = log
    }

    var port: Int { state.withLockedValue { $0.port } }

    /// Binds the first time; `makeBootstrap` builds the channel pipeline of each accepted connection.
    func start(group: MultiThreadedEventLoopGroup, bootstrap: @escaping @Sendable () -> ServerBootstrap) throws {
        let port = try state.withLockedValue { s -> Int in
            guard s.group == nil, !s.stopped else { throw MockServerError.alreadyStarted }
            s.group = group
            return s.port
        }
        // Only once started: on a stopped listener it would hold the core (and so this listener) for good.
        self.bootstrap.withLockedValue { $0 = bootstrap }
        let channel = try bootstrap().bind(host: host, port: port).wait()
        let bound = channel.localAddress?.port ?? port
        let keep = state.withLockedValue { s -> Bool in
            guard !s.stopped else { return false }
            s.serverChannel = channel
            s.port = bound
            return true
        }
        if !keep {
            channel.close(promise: nil)
            self.bootstrap.withLockedValue { $0 = nil }
        }
    }

    private let bootstrap = NIOLockedValueBox<(@Sendable () -> ServerBootstrap)?>(nil)

    /// Called for each accepted connection; false when it must be closed at once (outage or stop).
    func register(_ channel: Channel) -> Bool {
        let accepted = state.withLockedValue { s -> Bool in
            guard !s.stopped, s.outageUntilNs == nil else { return false }
            s.children[ObjectIdentifier(channel)] = channel
            return true
        }
        if accepted {
            channel.closeFuture.whenComplete { [weak self] _ in
                self?.state.withLockedValue { _ = $0.children.removeValue(forKey: ObjectIdentifier(channel)) }
            }
        }
        return accepted
    }

    /// Closes the port and every connection (but `keep`) until `untilNs` (monotonic); a later outage
    /// extends it. The returned futures complete once the port and those connections are closed.
    @discardableResult
    func beginOutage(untilNs: UInt64, except keep: Channel? = nil) -> [EventLoopFuture<Void>] {
        let (server, children) = state.withLockedValue { s -> (Channel?, [Channel]) in
            guard !s.stopped, let group = s.group else { return (nil, []) }
            s.outageUntilNs = max(s.outageUntilNs ?? 0, untilNs)
            let server = s.serverChannel
            s.serverChannel = nil
            let children = Array(s.children.values)
            s.children.removeAll()
            let delay = Int64(untilNs) - Int64(clock.monotonicNs())
            s.timers.append(group.next().scheduleTask(in: .nanoseconds(max(0, delay))) { [weak self] in
                self?.reopenIfDue()
            })
            return (server, children)
        }
        var closed = children.filter { $0 !== keep }.map { $0.close() }
        if let server { closed.append(server.close()) }
        return closed
    }

    /// Ends any outage now (a reset or a new scenario).
    func endOutage() {
        state.withLockedValue { $0.outageUntilNs = nil }
        reopenIfDue()
    }

    private func reopenIfDue(attempt: Int = 0) {
        let now = clock.monotonicNs()
        guard let makeBootstrap = bootstrap.withLockedValue({ $0 }) else { return }
        let go = state.withLockedValue { s -> (EventLoopFuture<Channel>, Int, EventLoop)? in
            guard !s.stopped, s.serverChannel == nil, s.binding == nil, let group = s.group else { return nil }
            if let until = s.outageUntilNs, until > now { return nil }
            s.outageUntilNs = nil
            let future = makeBootstrap().bind(host: host, port: s.port)
            s.binding = future
            return (future, s.port, group.next())
        }
        guard let (future, port, loop) = go else { return }
        future.whenComplete { [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let channel):
                let keep = self.state.withLockedValue { s -> Bool in
                    s.binding = nil
                    guard !s.stopped, s.outageUntilNs == nil else { return false }
                    s.serverChannel = channel
                    return true
                }
                if !keep {
                    channel.close(promise: nil)
                    self.reopenIfDue()
                }
            case .failure(let error):
                // The port may still be held for a moment (or taken by someone else): retry for ~5 s.
                self.state.withLockedValue { s in
                    s.binding = nil
                    guard !s.stopped else { return }
                    guard attempt < 100 else {
                        self.log?("outbox-mock: cannot bind \(self.host):\(port) again after an outage: \(error)")
                        return
                    }
                    s.timers.append(loop.scheduleTask(in: .milliseconds(50)) { [weak self] in
                        self?.reopenIfDue(attempt: attempt + 1)
                    })
                }
            }
        }
    }

    /// Replaces the timers of pure time-window outages (after a reset or a scenario swap).
    func replaceSchedule(generation: Int, epochNs: UInt64, outages: [(from: Double, until: Double)],
                         isCurrent: @escaping @Sendable (Int) -> Bool) {
        let (old, loop) = state.withLockedValue { s -> ([Scheduled<Void>], EventLoop?) in
            let old = s.scheduled
            s.scheduled = []
            return (old, s.group?.next())
        }
        for task in old { task.cancel() }
        endOutage()
        guard loop != nil else { return }  // not started: start() schedules
        let now = clock.monotonicNs()
        state.withLockedValue { s in
            guard !s.stopped, let loop = s.group?.next() else { return }
            for window in outages {
                let from = epochNs + UInt64(window.from * 1e9)
                let until = epochNs + UInt64(window.until * 1e9)
                guard until > now else { continue }
                let delay = Int64(from) - Int64(now)
                s.scheduled.append(loop.scheduleTask(in: .nanoseconds(max(0, delay))) { [weak self] in
                    guard isCurrent(generation) else { return }
                    self?.beginOutage(untilNs: until)
                })
            }
        }
    }

    /// Closes everything and waits until it is closed; the group is shut down by the caller.
    /// Returns false when it was already stopped.
    @discardableResult
    func stop() -> Bool {
        let first = state.withLockedValue { s -> Bool in
            defer { s.stopped = true }
            return !s.stopped
        }
        guard first else { return false }
        // The bootstrap's closure holds the core, which holds this listener: dropped here, or every stopped
        // server stays allocated for good (LeakSanitizer, `make sanitize`).
        bootstrap.withLockedValue { $0 = nil }
        let (server, children, tasks, binding) = state.withLockedValue { s in
            let out = (s.serverChannel, Array(s.children.values), s.scheduled + s.timers, s.binding)
            s.serverChannel = nil
            s.children.removeAll()
            s.scheduled = []
            s.timers = []
            return out
        }
        for task in tasks { task.cancel() }
        if let channel = try? binding?.wait() { try? channel.close().wait() }
        try? server?.close().wait()
        for child in children { try? child.close().wait() }
        return true
    }
}
