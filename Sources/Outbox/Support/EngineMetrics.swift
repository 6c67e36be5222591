import CoreMetrics

/// BEHAVIOUR O1–O2: one destination's metrics through swift-metrics, their dimensions resolved once when the
/// destination's driver is built, so that the loop's path does no string work. The engine never bootstraps a
/// backend: with none, every handle is swift-metrics' no-op handler and each call costs a virtual call.
struct DestinationMetrics {
    let delivered: Counter
    let deadLettered: Counter
    let skipped: Counter
    let expired: Counter
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
        expired = Counter(label: "outbox_logs_total", dimensions: [("outcome", "expired")])
        retries = Counter(label: "outbox_retries_total", dimensions: dim + [("kind", "retry")])
        probes = Counter(label: "outbox_retries_total", dimensions: dim + [("kind", "probe")])
        inFlight = Meter(label: "outbox_in_flight", dimensions: dim)
        disabled = Meter(label: "outbox_disabled", dimensions: dim)
        requestDuration = Timer(label: "outbox_request_duration_seconds", dimensions: dim, preferredDisplayUnit: .seconds)
        deliveryDelay = Timer(label: "outbox_delivery_delay_seconds", dimensions: dim, preferredDisplayUnit: .seconds)
        requestErrors = Counter(label: "outbox_requests_total", dimensions: dim + [("status", "error")])
        for status in [200, 202, 400, 401, 403, 413, 429, 500, 502, 503] { _ = requestCounter(status: status) }
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
    /// What a before-store hook drops, once the engine has one; nothing increments it yet.
    let droppedByPolicy = Counter(label: "outbox_logs_total", dimensions: [("outcome", "dropped_by_policy")])
    let evicted = Counter(label: "outbox_logs_total", dimensions: [("outcome", "evicted")])
    /// The store's eviction total as last reported.
    var reportedEvicted = 0
}
