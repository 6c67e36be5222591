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

    public static func read(path: String, clock: any OutboxClock = SystemClock()) throws -> StoreReport {
        let (counts, meta) = try StoreInspector.inspect(path: path)
        return StoreReport(counts: counts, enabled: meta[MetaKey.enabled] != "0",
                           disabledReason: meta[MetaKey.disabledReason], installID: meta[MetaKey.installID],
                           destination: meta[MetaKey.destination],
                           serverRejected: meta[MetaKey.serverRejected].flatMap { Int($0) } ?? 0, nowMs: clock.wallMs())
    }

    init(counts: StoreCounts, enabled: Bool, disabledReason: String?, installID: String?, destination: String?,
         serverRejected: Int, nowMs: Int64) {
        self.destination = destination
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
