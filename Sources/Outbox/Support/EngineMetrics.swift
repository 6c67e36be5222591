import CoreMetrics

/// BEHAVIOUR O1–O2: one destination's metrics through swift-metrics, their dimensions resolved once when the
/// destination's driver is built, so that the loop's path does no string work. The engine never bootstraps a
/// backend: with none, every handle is swift-metrics' no-op handler and each call costs a virtual call.
struct DestinationMetrics {
    let delivered: Counter
    let deadLettered: Counter
    /// Moved only through `recordSkipped(_:)`.
    private let skipped: Counter
    let retries: Counter
    let probes: Counter
    let inFlight: Meter
    let disabled: Meter
    let requestDuration: Timer
    let deliveryDelay: Timer
    private let destination: String
    /// `outbox_requests_total{destination, status}`: the usual statuses made once; others as they come.
    private var requestsByStatus: [Int: Counter] = [:]
    private let requestErrors: Counter

    init(destination: String) {
        self.destination = destination
        let dim = [("destination", destination)]
        func logs(_ outcome: String) -> Counter {
            Counter(label: "outbox_logs_total", dimensions: [("outcome", outcome), ("destination", destination)])
        }
        delivered = logs("delivered")
        deadLettered = logs("dead_lettered")
        skipped = logs("skipped")
        retries = Counter(label: "outbox_retries_total", dimensions: dim + [("kind", "retry")])
        probes = Counter(label: "outbox_retries_total", dimensions: dim + [("kind", "probe")])
        inFlight = Meter(label: "outbox_in_flight", dimensions: dim)
        disabled = Meter(label: "outbox_disabled", dimensions: dim)
        requestDuration = Timer(label: "outbox_request_duration_seconds", dimensions: dim, preferredDisplayUnit: .seconds)
        deliveryDelay = Timer(label: "outbox_delivery_delay_seconds", dimensions: dim, preferredDisplayUnit: .seconds)
        requestErrors = Counter(label: "outbox_requests_total", dimensions: dim + [("status", "error")])
        for status in [200, 202, 400, 401, 403, 413, 429, 500, 502, 503] { _ = requestCounter(status: status) }
    }

    /// BEHAVIOUR O1: `count` logs this destination's policy skipped (`outbox_logs_total{outcome="skipped"}`): the one
    /// call a per-destination policy makes for each log it decides this destination will not send.
    func recordSkipped(_ count: Int) {
        if count > 0 { skipped.increment(by: Int64(count)) }
    }

    /// The counter of requests answered with `status`, or failed in transport (nil).
    mutating func requestCounter(status: Int?) -> Counter {
        guard let status else { return requestErrors }
        if let counter = requestsByStatus[status] { return counter }
        let counter = Counter(label: "outbox_requests_total", dimensions: [("destination", destination), ("status", String(status))])
        requestsByStatus[status] = counter
        return counter
    }
}

/// BEHAVIOUR O1: the engine's counters that carry no destination, made once per engine.
struct EngineMetrics {
    let tracked = Counter(label: "outbox_logs_total", dimensions: [("outcome", "tracked")])
    let rejected = Counter(label: "outbox_logs_total", dimensions: [("outcome", "rejected")])
}

/// BEHAVIOUR O1–O2: the store's gauges and its engine-wide outcomes (evicted, expired), moved by what each committed
/// transaction changed (`LogStore.record`). The gauges are meters moved by this engine's differences, so that the
/// engines of one process (the fleet) add up; `leave()` takes this engine's share away when its store closes.
struct StoreMetrics {
    private let pendingNormal = Meter(label: "outbox_pending", dimensions: [("priority", "normal")])
    private let pendingCritical = Meter(label: "outbox_pending", dimensions: [("priority", "critical")])
    private let bytes = Meter(label: "outbox_store_bytes")
    private let evicted = Counter(label: "outbox_logs_total", dimensions: [("outcome", "evicted")])
    private let expired = Counter(label: "outbox_logs_total", dimensions: [("outcome", "expired")])
    /// With no backend bootstrapped, nothing is read from the file after a transaction (its size, pending counts the
    /// store no longer knows): nobody would see them.
    let isLive = !(MetricsSystem.factory is NOOPMetricsHandler)
    private var reported: (normal: Int, critical: Int, bytes: Int, evicted: Int, expired: Int)

    /// `evicted` and `expired`: the store's totals when the metrics start, which are not this engine's doing.
    init(evicted: Int, expired: Int) {
        reported = (0, 0, 0, evicted, expired)
    }

    /// Moves each figure by its difference from the last one reported; nil: not known now, left as it was.
    mutating func update(pending: Waiting?, bytes usedBytes: Int?, evictedTotal: Int, expiredTotal: Int) {
        if let pending {
            move(pendingNormal, &reported.normal, to: pending.normal)
            move(pendingCritical, &reported.critical, to: pending.critical)
        }
        if let usedBytes { move(bytes, &reported.bytes, to: usedBytes) }
        if evictedTotal > reported.evicted { evicted.increment(by: Int64(evictedTotal - reported.evicted)) }
        if expiredTotal > reported.expired { expired.increment(by: Int64(expiredTotal - reported.expired)) }
        reported.evicted = evictedTotal
        reported.expired = expiredTotal
    }

    /// This engine's share of the gauges leaves with its store.
    mutating func leave() {
        move(pendingNormal, &reported.normal, to: 0)
        move(pendingCritical, &reported.critical, to: 0)
        move(bytes, &reported.bytes, to: 0)
    }

    private func move(_ meter: Meter, _ last: inout Int, to value: Int) {
        guard value != last else { return }
        if value > last { meter.increment(by: Double(value - last)) } else { meter.decrement(by: Double(last - value)) }
        last = value
    }
}
