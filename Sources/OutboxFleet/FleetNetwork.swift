import Dispatch
import Logging
import Outbox

/// SPEC F1 "one netlink watcher for the whole fleet", N1, N2: the devices' engines run without a watcher of their own
/// (`watchesNetwork = false`: N sockets would cost N descriptors), and this one, on the first loop, hears the kernel
/// and tells every loop, which tells each of its devices on its own thread. A device the fleet holds offline stays
/// offline until its offline period ends; then it comes back only if the network is up
/// (`SharedNetworkWatcher.Action`).
final class FleetNetwork: @unchecked Sendable {
    private let loops: [FleetLoop]
    /// Set and closed on the first loop's thread only.
    private var watcher: SharedNetworkWatcher?

    private init(loops: [FleetLoop]) { self.loops = loops }

    /// Opens the watcher on the first loop and gives every loop the state it read; nil when the endpoint is on
    /// loopback, which is always reachable (SPEC N1), or when the kernel refuses a netlink socket (then the devices
    /// stay online, as an engine without a watcher does).
    static func start(loops: [FleetLoop], endpointIsLoopback: Bool, logger: Logger) -> FleetNetwork? {
        guard !endpointIsLoopback, let first = loops.first else { return nil }
        let network = FleetNetwork(loops: loops)
        let opened = DispatchSemaphore(value: 0)
        first.run { loop in
            defer { opened.signal() }
            do {
                let watcher = try SharedNetworkWatcher(hostLoop: loop.loopPointer, logger: logger) { old, new in
                    logger.info("network changed", metadata: ["outbox.online": "\(new.online)",
                                                              "outbox.interface": "\(new.defaultInterface ?? "none")"])
                    network.forward(from: old, to: new)
                }
                network.watcher = watcher
                // The loops assume online until told otherwise.
                network.forward(from: SharedNetworkWatcher.State(online: true, defaultInterface: watcher.state.defaultInterface),
                                to: watcher.state)
            } catch {
                logger.warning("no netlink watcher for the fleet; devices stay online", metadata: ["outbox.error": "\(error)"])
            }
        }
        opened.wait()
        return network
    }

    /// Every loop, each on its own thread, hears the change.
    func forward(from old: SharedNetworkWatcher.State, to new: SharedNetworkWatcher.State) {
        for loop in loops { loop.networkChanged(from: old, to: new) }
    }

    /// Closes the watcher on the first loop's thread; before the loops stop.
    func close() {
        guard let first = loops.first else { return }
        let closed = DispatchSemaphore(value: 0)
        first.run { _ in
            self.watcher?.close()
            self.watcher = nil
            closed.signal()
        }
        closed.wait()
    }
}

extension FleetDevice {
    /// Tells the device's engine what the network did (SPEC N2, R6); on its loop's thread.
    func hear(_ action: SharedNetworkWatcher.Action?) {
        guard let engine else { return }  // not admitted yet, or closed (SPEC F4)
        SharedNetworkWatcher.forward(action, to: engine)
    }
}
