import FoundationEssentials

/// An engine's destinations (SPEC D15–D16): one `DeliveryDriver` each, over the one store, told every event the engine
/// has for delivery. Each keeps its own batches, R1–R10 state, stops and counters; one waits for no other. With one
/// destination the group holds its driver and adds nothing to its path.
///
/// C3's three requests stay the engine's total, shared: whenever a request of any destination starts or ends, each
/// destination's share is its requests on the wire plus what is free once every other destination with work and no
/// request has one kept for it — at least one each, so that none waits behind another. A destination in a fault
/// holds one request by R9 anyway.
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
        guard members.count > 1 else { return }
        for member in members {
            member.driver.requestsChanged = { [unowned self] in self.shareRequests() }
        }
        shareRequests()
    }

    var names: [String] { members.map(\.name) }

    func member(named name: String) -> Member? { members.first { $0.name == name } }

    /// SPEC D16: each destination's share of C3's requests, given again whenever a request starts or ends.
    private func shareRequests() {
        let inFlight = members.map(\.driver.requestsInFlight)
        let total = inFlight.reduce(0, +)
        let idleWithWork = members.map { $0.driver.requestsInFlight == 0 && $0.driver.hasWork }
        for (index, member) in members.enumerated() {
            let kept = idleWithWork.enumerated().filter { $0.offset != index && $0.element }.count
            let free = max(0, Self.totalRequests - total - kept)
            member.driver.setRequestLimit(max(1, inFlight[index] + free))
        }
    }

    // MARK: Events, to every destination

    func stored() { members.forEach { $0.driver.stored() } }
    func pause() { members.forEach { $0.driver.pause() } }
    func resume() { members.forEach { $0.driver.resume() } }
    func retryNow() { members.forEach { $0.driver.retryNow() } }
    func optOut() { members.forEach { $0.driver.optOut() } }
    func optIn() { members.forEach { $0.driver.optIn() } }
    func reachability(online: Bool) { members.forEach { $0.driver.reachability(online: online) } }
    func networkChanged() { members.forEach { $0.driver.networkChanged() } }
    func setDeviceContext(id: Int64, json: [UInt8]) { members.forEach { $0.driver.setDeviceContext(id: id, json: json) } }
    func close() { members.forEach { $0.driver.close() } }

    /// SPEC C7 for every destination: `completion` once each has answered — `.good` only when every one that had
    /// something to send delivered it, `.error` when any failed, `.noData` when none had anything.
    func dispatch(completion: ((DispatchResult) -> Void)?) {
        guard let completion else {
            members.forEach { $0.driver.dispatch(completion: nil) }
            return
        }
        guard members.count > 1 else {
            members.first?.driver.dispatch(completion: completion)
            return
        }
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
