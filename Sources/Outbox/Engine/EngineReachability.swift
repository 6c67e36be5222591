import FoundationEssentials
import Logging

/// Reachability as delivery sees it (SPEC N1, N2, R6): the rtnetlink watcher's word unless the host overrides it.
/// Owned by the loop thread; tells delivery and the device context what changed.
final class EngineReachability {
    private let loop: EventLoop
    private weak var delivery: DeliveryGroup?
    private var watcher: ReachabilityWatcher?
    /// SPEC N2: the host's override; nil lets the watcher decide.
    private var override: Reachability?
    /// The network type changed (for the device context, SPEC A10).
    private let networkTypeChanged: (String) -> Void

    /// `Configuration.watchesNetwork`: whether any endpoint but loopback is watched.
    private let watches: Bool
    private let logger: Logger

    /// Starts a watcher when `watches` and the endpoint is not loopback (SPEC N1: loopback is always reachable).
    init(loop: EventLoop, delivery: DeliveryGroup, endpoint: String, watches: Bool, logger: Logger,
         networkTypeChanged: @escaping (String) -> Void) {
        self.loop = loop
        self.delivery = delivery
        self.networkTypeChanged = networkTypeChanged
        self.watches = watches
        self.logger = logger
        startWatching(for: endpoint)
    }

    /// The watcher's network type; nil when no watcher runs.
    var watchedNetworkType: String? { watcher?.state.networkType }
    /// Whether a watcher runs (tests).
    var isWatching: Bool { watcher != nil }

    /// SPEC N1, R8: the endpoint changed; whether to watch is decided again — a remote endpoint needs the watcher
    /// (R6, R7 depend on it), a loopback one none, and delivery is then online whatever the network does.
    func endpointChanged(to endpoint: String) {
        loop.assertOnLoopThread()
        let needsWatcher = watches && !isLoopbackEndpoint(endpoint)
        if needsWatcher && watcher == nil {
            startWatching(for: endpoint)
            if let type = watcher?.state.networkType { networkTypeChanged(type) }
        } else if !needsWatcher, watcher != nil {
            let wasOnline = watcher?.state.online ?? true
            close()
            if override == nil && !wasOnline { delivery?.reachability(online: true) }
        }
    }

    private func startWatching(for endpoint: String) {
        guard watches && !isLoopbackEndpoint(endpoint) else { return }
        do {
            let watcher = try ReachabilityWatcher(loop: loop, logger: logger) { [unowned self] state in
                self.stateChanged(state)
            }
            self.watcher = watcher
            if override == nil && !watcher.state.online { delivery?.reachability(online: false) }
        } catch {
            logger.warning("no reachability watcher; assuming online", metadata: ["outbox.error": "\(error)"])
        }
    }

    private func stateChanged(_ state: NetworkState) {
        networkTypeChanged(state.networkType)
        guard override == nil else { return }
        delivery?.reachability(online: state.online)
        // SPEC R6: the watcher reports a change of the default route's interface too; online, that is a change.
        if state.online { delivery?.networkChanged() }
    }

    /// SPEC N2: the host's word overrides the watcher; `.online` after `.offline` is a network change (R6).
    func setOverride(_ reachability: Reachability?) {
        loop.assertOnLoopThread()
        override = reachability
        switch reachability {
        case .online?: delivery?.reachability(online: true)
        case .offline?: delivery?.reachability(online: false)
        case nil: delivery?.reachability(online: watcher?.state.online ?? true)
        }
    }

    /// SPEC D18: delivery was rebuilt for a new list of destinations; it hears the network as it is now.
    func attach(_ delivery: DeliveryGroup) {
        self.delivery = delivery
        switch override {
        case .online?: delivery.reachability(online: true)
        case .offline?: delivery.reachability(online: false)
        case nil: delivery.reachability(online: watcher?.state.online ?? true)
        }
    }

    func close() {
        watcher?.close()
        watcher = nil
    }
}

/// Whether `endpoint`'s host is this machine, always reachable (SPEC N1): the one answer for the engine and the fleet.
package func isLoopbackEndpoint(_ endpoint: String) -> Bool {
    guard let host = URLComponents(string: endpoint)?.host?.lowercased() else { return false }
    return host == "localhost" || host.hasPrefix("127.") || host == "::1" || host == "[::1]"
}
