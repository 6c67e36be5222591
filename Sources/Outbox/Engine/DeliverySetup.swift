import FoundationEssentials
import Logging

/// Builds delivery from a configuration, and applies a runtime update to it (SPEC R8): the transport (or the
/// engine's lane on the host's shared one, SPEC F4), the wire and the request. Owned by the loop thread.
struct DeliverySetup {
    let loop: EventLoop
    let logger: Logger

    /// SPEC D15–D16: a driver per destination over the store — the store itself for one destination named `default`,
    /// else each destination's view of it (`DestinationQueue`).
    func makeGroup(_ configuration: Configuration, destinations: [NamedDestination], store: LogStore, installID: UUID,
                   device: DeviceContext, boot: Int64) throws -> DeliveryGroup {
        let names = destinations.map { $0.name ?? NamedDestination.defaultName }
        let inUse = try store.useDestinations(names)
        var members: [DeliveryGroup.Member] = []
        for (destination, name) in zip(destinations, names) {
            var queue: any BatchQueue = store
            var storeID: Int64?
            if store.destinationBook != nil {
                guard let id = inUse.ids[name] else { throw OutboxError.invalidConfiguration("destination '\(name)' is not in the store's list") }
                queue = DestinationQueue(store: store, id: id, name: name)
                storeID = id
            }
            let driver = try makeDriver(configuration.delivering(to: destination), queue: queue, installID: installID,
                                        device: device, boot: boot)
            members.append(DeliveryGroup.Member(name: name, driver: driver, storeID: storeID))
        }
        return DeliveryGroup(members)
    }

    /// The endpoint the reachability watcher decides on (SPEC N1): a remote one when any destination has one (it
    /// needs the network), else the first; nil when nothing is sent.
    static func watchedEndpoint(_ destinations: [NamedDestination]) -> String? {
        let endpoints = destinations.compactMap(\.endpoint)
        return endpoints.first { !isLoopbackEndpoint($0) } ?? endpoints.first
    }

    func makeDriver(_ configuration: Configuration, queue: any BatchQueue, installID: UUID, device: DeviceContext,
                    boot: Int64) throws -> DeliveryDriver {
        let loop = self.loop
        let wire = configuration.wire(installID: installID)
        let driver = DeliveryDriver(
            queue: queue, sender: try makeSender(configuration), timer: LoopTimer(loop: loop),
            settings: configuration.deliverySettings,
            request: wire.request(endpoint: configuration.endpoint ?? "", headers: configuration.headers),
            clock: configuration.clock, logger: logger, device: device,
            clockSkewThresholdMs: configuration.clockSkewThreshold.milliseconds,
            bodyCompression: configuration.bodyCompression, boot: boot, wire: wire,
            assertOwner: { loop.assertOnLoopThread() })
        driver.policy = configuration.policy
        return driver
    }

    /// Applies an update validated on the caller's thread: new requests use it, batches in flight finish under the
    /// old settings. A new transport only when a field of `.transport` changed (it keeps its connections otherwise),
    /// a new wire when one of `.wire` did. Returns the wire made, and whether the transport was replaced.
    func reconfigure(_ group: DeliveryGroup, to updated: Configuration, installID: UUID,
                     targets: ConfigurationApplyTargets) -> (wire: (any DeliveryWire)?, transportReplaced: Bool) {
        var result: (wire: (any DeliveryWire)?, transportReplaced: Bool) = (nil, false)
        for destination in updated.namedDestinations {
            guard let member = group.member(named: destination.name ?? NamedDestination.defaultName) else { continue }
            let applied = reconfigure(member.driver, to: updated.delivering(to: destination), installID: installID, targets: targets)
            result = (result.wire ?? applied.wire, result.transportReplaced || applied.transportReplaced)
        }
        return result
    }

    private func reconfigure(_ delivery: DeliveryDriver, to updated: Configuration, installID: UUID,
                             targets: ConfigurationApplyTargets) -> (wire: (any DeliveryWire)?, transportReplaced: Bool) {
        loop.assertOnLoopThread()
        guard let endpoint = updated.endpoint else { return (nil, false) }
        var sender: (any HTTPSender)?
        if targets.contains(.transport) {
            do {
                sender = try makeSender(updated)
            } catch {
                logger.error("the updated transport settings could not be applied; the old ones stay",
                             metadata: ["outbox.error": "\(error)"])
            }
        }
        // The wire is a value built from the configuration: its request is given again on every update (which
        // restarts a stopped channel, R1), the same unless a field of the wire changed.
        let wire = updated.wire(installID: installID)
        let newWire = targets.contains(.wire) ? wire : nil
        delivery.policy = updated.policy
        delivery.reconfigure(wire.request(endpoint: endpoint, headers: updated.headers), sender: sender, wire: newWire)
        logger.info("configuration updated", metadata: ["outbox.endpoint": "\(endpoint)",
                                                        "outbox.destination": "\(updated.destination)"])
        return (newWire, sender != nil)
    }

    /// The engine's lane on the loop's shared transport when the host gave one (SPEC F4), else a transport of its own.
    private func makeSender(_ configuration: Configuration) throws -> any HTTPSender {
        let options = Self.transportOptions(configuration)
        if let shared = configuration.sharedTransport {
            if loop.isHosted, shared.loop.raw == loop.raw, let lane = try shared.lane(options: options, logger: logger) {
                return lane
            }
            logger.warning("the shared transport belongs to another loop, is closed or has other settings; this engine uses its own")
        }
        return try Transport(loop: loop, options: options, logger: logger)
    }

    static func transportOptions(_ configuration: Configuration) -> TransportOptions {
        var options = TransportOptions()
        options.requestTimeout = configuration.requestTimeout
        options.caFile = configuration.caFile
        options.clientCertificate = configuration.clientCertificate
        options.clientKey = configuration.clientKey
        options.pinnedPublicKey = configuration.pinnedPublicKey
        options.userAgent = "outbox/\(OutboxVersion.string)"
        return options
    }
}
