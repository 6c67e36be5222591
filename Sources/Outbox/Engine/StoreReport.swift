import FoundationEssentials

/// What `outbox status` prints (SPEC X4), read from a store file without taking it over: works while an engine
/// runs on it (SQLite WAL readers do not block the writer).
public struct StoreReport: Sendable, Equatable, Codable {
    public var pendingNormal: Int
    public var pendingCritical: Int
    public var inFlight: Int
    public var bytes: Int
    public var oldestAgeSeconds: Double?
    public var deadLetters: Int
    public var enabled: Bool
    public var disabledReason: String?
    public var installID: String?
    /// SPEC D1: the destination the last request went to (`appcenter`, …); nil before the first.
    public var destination: String?
    /// SPEC D5: logs a server accepted the request of but refused inside it, since the store was created.
    public var serverRejected: Int
    /// SPEC K1, R8: stored rows are still being sealed again under the key `update` gave, and the previous key still
    /// opens some of them. Once false, the previous key opens nothing in the store and can be destroyed.
    public var rotatingStoreKey = false
    /// SPEC D18: each destination's figures by name, when the store serves a list; nil for one destination named
    /// `default` (the totals are its figures).
    public var destinations: [String: DestinationReport]? = nil

    /// SPEC R1, R8: sending stopped by the server's answer (401/403/404, a redirect not followed) or the TLS identity,
    /// until `update` or a restart — not retries exhausted, which a probe ends by itself (R5).
    public var sendingStopped: Bool { Self.isStop(disabledReason) }

    /// Whether a persisted disabled reason is a stop rather than retries exhausted: the reason is what the store kept,
    /// also from an engine that has stopped, and its words tell the two apart.
    static func isStop(_ disabledReason: String?) -> Bool {
        guard let disabledReason else { return false }
        return !disabledReason.hasPrefix(DeliveryMachine.Stop.retriesExhaustedWords)
    }

    /// A sealed store (SPEC K1) needs its `storeKey`: `storeKeyInvalid` without it, or with another.
    public static func read(path: String, clock: any OutboxClock = SystemClock(), storeKey: StoreKey? = nil) throws -> StoreReport {
        let (counts, meta, destinations) = try StoreInspector.inspect(path: path, key: storeKey)
        var report = StoreReport(counts: counts, enabled: meta[MetaKey.enabled] != "0",
                           disabledReason: meta[MetaKey.disabledReason], installID: meta[MetaKey.installID],
                           destination: meta[MetaKey.destination],
                           serverRejected: meta[MetaKey.serverRejected].flatMap { Int($0) } ?? 0,
                           rotatingStoreKey: meta[MetaKey.previousKey] != nil, nowMs: clock.wallMs())
        report.destinations = destinations
        // SPEC D18: the total over the destinations, each of which keeps its own.
        if let destinations { report.serverRejected = destinations.values.reduce(0) { $0 + $1.serverRejected } }
        return report
    }

    init(counts: StoreCounts, enabled: Bool, disabledReason: String?, installID: String?, destination: String?,
         serverRejected: Int, rotatingStoreKey: Bool = false, nowMs: Int64) {
        self.destination = destination
        self.rotatingStoreKey = rotatingStoreKey
        self.serverRejected = serverRejected
        pendingNormal = counts.pendingNormal
        pendingCritical = counts.pendingCritical
        inFlight = counts.inFlight
        bytes = counts.bytes
        oldestAgeSeconds = counts.oldestWallMs.map { Double(max(0, nowMs - $0)) / 1000 }
        deadLetters = counts.deadLetters
        self.enabled = enabled
        self.disabledReason = disabledReason
        self.installID = installID
    }
}

/// SPEC D18: one destination's figures in a store that serves several.
public struct DestinationReport: Sendable, Equatable, Codable {
    /// Logs it has still to send: stored, not settled by it, not in flight to it.
    public var pending: Int
    public var inFlight: Int
    public var deadLetters: Int
    public var serverRejected: Int
    public var disabledReason: String?
    /// The wire its last request spoke (`otlp`, `posthog`, …); nil before its first.
    public var wire: String?
    /// Delivered by the engine reporting, since it started (the engine's status and `emit`; nil read from a file).
    public var delivered: Int?
    /// BEHAVIOUR H2, D18: logs its policy settled without sending, since the engine started (nil read from a file).
    public var skipped: Int? = nil

    /// Stopped by its server's answer or its TLS identity until `update` or a restart (R1, R8), as
    /// `StoreReport.sendingStopped` says for a single destination.
    public var sendingStopped: Bool { StoreReport.isStop(disabledReason) }

    public init(pending: Int, inFlight: Int, deadLetters: Int, serverRejected: Int, disabledReason: String?, wire: String?,
                delivered: Int? = nil) {
        self.pending = pending
        self.inFlight = inFlight
        self.deadLetters = deadLetters
        self.serverRejected = serverRejected
        self.disabledReason = disabledReason
        self.wire = wire
        self.delivered = delivered
    }
}
