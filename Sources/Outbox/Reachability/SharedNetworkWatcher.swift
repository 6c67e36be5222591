import Logging

/// SPEC N1 for a host that runs many engines on loops of its own (`outbox fleet`): one rtnetlink watcher instead of
/// one per engine (`Configuration.watchesNetwork = false` on each), whose changes the host forwards to every engine
/// with `forward(_:to:)` — on the thread of the loop that engine runs on.
///
/// ```swift
/// let watcher = try SharedNetworkWatcher(hostLoop: loop, logger: logger) { old, new in
///     for engine in engines { SharedNetworkWatcher.forward(.decide(from: old, to: new, heldOffline: false), to: engine) }
/// }
/// // …on the same loop thread, before the loop ends:
/// watcher.close()
/// ```
public final class SharedNetworkWatcher {
    /// What the watcher reads from the kernel (SPEC N1): online means an interface up with an address and a default
    /// route; the route's interface tells a move from one network to another (SPEC R6).
    public struct State: Equatable, Sendable {
        public var online: Bool
        public var defaultInterface: String?

        public init(online: Bool, defaultInterface: String?) {
            self.online = online
            self.defaultInterface = defaultInterface
        }
    }

    /// What one engine is told about a change of the shared network state (SPEC N2, R6).
    public enum Action: Equatable, Sendable {
        /// `setReachability(.offline)`: delivery pauses.
        case offline
        /// `setReachability(.online)` after offline: a network change — back-off starts over, waiting batches go.
        case online
        /// Online before and after, on another interface: a network change too (`retryNow()`: back-off starts over).
        case moved

        /// The decision for an engine when the network goes from `old` to `new`. `heldOffline`: the host holds this
        /// engine offline for a reason of its own (the fleet's offline period), and it stays so until the host lets
        /// it go — then `whenReleased` decides.
        public static func decide(from old: State, to new: State, heldOffline: Bool) -> Action? {
            guard !heldOffline else { return nil }
            switch (old.online, new.online) {
            case (true, false): return .offline
            case (false, true): return .online
            case (true, true): return old.defaultInterface != new.defaultInterface ? .moved : nil
            case (false, false): return nil
            }
        }

        /// The decision for an engine the host held offline and now lets go: online only if the network is.
        public static func whenReleased(network: State) -> Action? {
            network.online ? .online : nil
        }
    }

    private let loop: EventLoop
    private let owner: ThreadOwner
    private var watcher: ReachabilityWatcher?

    /// The state now: what the last change reported, or what was read at creation.
    public private(set) var state: State

    /// Opens the netlink socket and polls it on `hostLoop` (a `uv_loop_t *`), whose thread must be the caller's;
    /// `onChange(old, new)` runs on that thread. The handle is unref'd: it never keeps the host's loop alive.
    public init(hostLoop: UnsafeMutableRawPointer, logger: Logger,
                onChange: @escaping (_ old: State, _ new: State) -> Void) throws {
        loop = try EventLoop(mode: .hostLoop(hostLoop))
        owner = ThreadOwner(loop: loop)
        state = State(NetworkState.current())
        watcher = try ReachabilityWatcher(loop: loop, logger: logger) { [unowned self] next in
            let old = self.state
            self.state = State(next)
            // The engine's watcher also reports the network type (SPEC A10); a fleet's devices need only these two.
            if old != self.state { onChange(old, self.state) }
        }
    }

    /// Closes the socket and its poll handle; on the loop's thread, before the loop is closed.
    public func close() {
        owner.check()
        watcher?.close()
        watcher = nil
    }

    /// Carries out `action` on `engine`; call it on the thread of the loop the engine runs on.
    public static func forward(_ action: Action?, to engine: OutboxEngine) {
        switch action {
        case .offline?: engine.setReachability(.offline)
        case .online?: engine.setReachability(.online)
        case .moved?: engine.retryNow()
        case nil: break
        }
    }
}

extension SharedNetworkWatcher.State {
    init(_ state: NetworkState) {
        self.init(online: state.online, defaultInterface: state.defaultInterface)
    }
}
