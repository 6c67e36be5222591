import FoundationEssentials

/// An engine's destinations (SPEC D15–D16): one `DeliveryDriver` each, over the one store, told every event the engine
/// has for delivery. Each keeps its own batches, R1–R10 state, stops and counters; one waits for no other. With one
/// destination the group holds its driver and adds nothing to its path.
///
/// C3's three requests stay the engine's total, shared: whenever a request of any destination starts or ends, each
/// destination's share is its requests on the wire plus what is free once every other destination with work and no
/// request has one kept for it — at least one each, so that none waits behind another —, and never so many that
/// another destination would find none free (with two, two each). A destination in a fault holds one request by R9
/// anyway.
final class DeliveryGroup {
    struct Member {
        let name: String
        let driver: DeliveryDriver
        /// The destination's id in the store's list; nil for a store of one destination.
        let storeID: Int64?
    }

    private(set) var members: [Member]
    /// C3: requests in flight across every destination, at most.
    static let totalRequests = DeliveryMachine.Settings().maxBatchesInFlight

    init(_ members: [Member]) {
        self.members = members
        // BEHAVIOUR O1–O2: each destination's metrics, labelled with its name (`default` for a single one).
        for member in members { member.driver.metrics = DestinationMetrics(destination: member.name) }
        guard members.count > 1 else { return }
        for member in members {
            member.driver.requestsChanged = { [unowned self] in self.shareRequests() }
        }
        shareRequests()
    }

    var names: [String] { members.map(\.name) }

    func member(named name: String) -> Member? { members.first { $0.name == name } }

    /// Which destination the spare requests go to first, turn by turn.
    private var rotation = 0

    /// SPEC D16: each destination's share of C3's requests, given again whenever a request starts or ends and after
    /// every event: its requests on the wire, one more for each destination with work and none on the wire, then
    /// what is left in turn to those with work and no fault (a destination in a fault sends one probe at a time) —
    /// never more than three in all.
    private func shareRequests() {
        guard members.count > 1 else { return }
        // A share given while one is being given (a destination that sent under its new share) waits for it to end.
        if isSharing { shareAgain = true; return }
        isSharing = true
        repeat {
            shareAgain = false
            shareOnce()
        } while shareAgain
        isSharing = false
    }

    private var isSharing = false
    private var shareAgain = false

    private func shareOnce() {
        var limits = members.map(\.driver.requestsInFlight)
        var free = max(0, Self.totalRequests - limits.reduce(0, +))
        let working = members.indices.filter { members[$0].driver.hasWork }
        for index in working where limits[index] == 0 && free > 0 {
            limits[index] = 1
            free -= 1
        }
        // No destination takes the request another would need: a slow server (answers that take seconds, not
        // failures, so no fault) held all three, and the other destination's batches waited on it for 20 s.
        let most = max(1, Self.totalRequests - (members.count - 1))
        let healthy = working.filter { members[$0].driver.fault == nil }
        var spare = (healthy.isEmpty ? working : healthy).filter { limits[$0] < most }
        var turn = 0
        while free > 0 && !spare.isEmpty {
            let index = spare[(rotation + turn) % spare.count]
            limits[index] += 1
            free -= 1
            turn += 1
            if limits[index] >= most { spare.removeAll { $0 == index } }
        }
        rotation &+= 1
        for (index, member) in members.enumerated() { member.driver.setRequestLimit(limits[index]) }
    }

    // MARK: Events, to every destination

    func stored() { each { $0.stored() } }
    func pause() { each { $0.pause() } }
    func resume() { each { $0.resume() } }
    func retryNow() { each { $0.retryNow() } }
    func optOut() { each { $0.optOut() } }
    func optIn() { each { $0.optIn() } }
    func reachability(online: Bool) { each { $0.reachability(online: online) } }
    func networkChanged() { each { $0.networkChanged() } }

    /// `event` to every destination, then the requests shared again: a destination whose share is none has work now.
    private func each(_ event: (DeliveryDriver) -> Void) {
        members.forEach { event($0.driver) }
        shareRequests()
    }
    func setDeviceContext(id: Int64, json: [UInt8]) { members.forEach { $0.driver.setDeviceContext(id: id, json: json) } }
    func close() { members.forEach { $0.driver.close() } }

    /// SPEC C7 for every destination: `completion` once each has answered — `.good` only when every one that had
    /// something to send delivered it, `.error` when any failed, `.noData` when none had anything.
    func dispatch(completion: ((DispatchResult) -> Void)?) {
        guard let completion else {
            each { $0.dispatch(completion: nil) }
            return
        }
        guard members.count > 1 else {
            members.first?.driver.dispatch(completion: completion)
            return
        }
        defer { shareRequests() }
        var results: [DispatchResult] = []
        let count = members.count
        for member in members {
            member.driver.dispatch { result in
                results.append(result)
                guard results.count == count else { return }
                completion(results.contains(.error) ? .error : results.contains(.good) ? .good : .noData)
            }
        }
    }

    /// Calls `done` once every destination is idle (drained, or stopped with nothing in flight).
    func whenIdle(_ done: @escaping () -> Void) {
        var left = members.count
        guard left > 0 else { done(); return }
        for member in members {
            member.driver.whenIdle {
                left -= 1
                if left == 0 { done() }
            }
        }
    }

    // MARK: Figures, over every destination

    var counters: DeliveryCounters {
        members.reduce(into: DeliveryCounters()) { sum, member in
            let counters = member.driver.counters
            sum.requests += counters.requests
            sum.delivered += counters.delivered
            sum.serverRejected += counters.serverRejected
            sum.probes += counters.probes
        }
    }
    var retries: Int { members.reduce(0) { $0 + $1.driver.retries } }
    var skipped: Int { members.reduce(0) { $0 + $1.driver.skipped } }
    var inFlightBatches: Int { members.reduce(0) { $0 + $1.driver.inFlightBatches } }
    /// Why sending is disabled: with several destinations, only when every one is (each one's reason, by name).
    var disabledReason: String? {
        guard members.count > 1 else { return members.first?.driver.disabledReason }
        let reasons = members.compactMap { member in member.driver.disabledReason.map { "\(member.name): \($0)" } }
        return reasons.count == members.count ? reasons.joined(separator: "; ") : nil
    }
    /// The first destination's fault and drain (one destination: its own).
    var fault: DeliveryMachine.Fault? { members.lazy.compactMap(\.driver.fault).first }
    var drainWidth: Int? { members.first?.driver.drainWidth }
}
