import Foundation

/// What `GET /_mock/stats` answers (SPEC X1), with exactly its keys:
/// `requests`, `status_counts`, `logs_received`, `logs_unique`, `logs_duplicate`, `faults`, `installs`,
/// `late_logs`, `delay_ms`, `max_in_flight`.
///
/// Counts cover ingestion requests only (everything outside `/_mock/`), since the start or the last reset.
public struct MockStats: Codable, Sendable, Equatable {
    /// Ingestion requests whose body was read (each got an answer or a fault).
    public var requests: Int
    /// Answers by HTTP status (`"200"`, `"503"` …), scenario responses included.
    public var statusCounts: [String: Int]
    /// Logs in accepted batches, duplicates included.
    public var logsReceived: Int
    /// Distinct log ids accepted.
    public var logsUnique: Int
    /// `logsReceived - logsUnique`: re-sent logs the server absorbed.
    public var logsDuplicate: Int
    /// Scenario (or replayed) outcomes by kind: `respond`, `refuse`, `reset`, `drop_after_body`, `hang`, `malformed`.
    public var faults: [String: Int]
    /// Per `Install-ID`.
    public var installs: [String: InstallStats]
    /// Unique logs that arrived after 04:00 of the day after their timestamp, in the report time zone (SPEC M7).
    public var lateLogs: Int
    /// Delivery delay of unique logs: arrival (server clock) minus `timestamp`, in ms.
    public var delayMs: DelayPercentiles
    /// The most ingestion requests in progress at once (head read, answer not yet written).
    public var maxInFlight: Int
    /// Per vendor, every vendor present (zeros without traffic) (SPEC V4). `appcenter`'s events are the
    /// `logs_*` counts; the others' delays and late events are in `delay_ms` and `late_logs` too.
    public var vendors: [String: VendorStats]

    /// One vendor's counts: ingestion requests to its paths, and its events — received in accepted
    /// requests (duplicates included: `events_unique + events_duplicate`), and refused by validation.
    public struct VendorStats: Codable, Sendable, Equatable {
        public var requests: Int
        public var eventsReceived: Int
        public var eventsUnique: Int
        public var eventsDuplicate: Int
        public var eventsRefused: Int
        /// GA4 (SPEC D12): received events GA4 would drop for breaking its rules; nil for the other vendors and
        /// before GA4's first request.
        public var eventsInvalid: Int?

        public init(requests: Int, eventsReceived: Int, eventsUnique: Int, eventsDuplicate: Int, eventsRefused: Int,
                    eventsInvalid: Int? = nil) {
            self.requests = requests
            self.eventsReceived = eventsReceived
            self.eventsUnique = eventsUnique
            self.eventsDuplicate = eventsDuplicate
            self.eventsRefused = eventsRefused
            self.eventsInvalid = eventsInvalid
        }

        static let zero = VendorStats(requests: 0, eventsReceived: 0, eventsUnique: 0, eventsDuplicate: 0,
                                      eventsRefused: 0)

        enum CodingKeys: String, CodingKey {
            case requests, eventsReceived = "events_received", eventsUnique = "events_unique",
                 eventsDuplicate = "events_duplicate", eventsRefused = "events_refused",
                 eventsInvalid = "events_invalid"
        }
    }

    public struct InstallStats: Codable, Sendable, Equatable {
        public var logsReceived: Int
        public var logsUnique: Int

        enum CodingKeys: String, CodingKey {
            case logsReceived = "logs_received", logsUnique = "logs_unique"
        }
    }

    /// Nearest-rank percentiles; all 0 before the first log.
    public struct DelayPercentiles: Codable, Sendable, Equatable {
        public var p50: Int64
        public var p90: Int64
        public var p99: Int64
        public var max: Int64

        static let zero = DelayPercentiles(p50: 0, p90: 0, p99: 0, max: 0)

        /// `values` sorted ascending.
        static func of(sorted values: [Int64]) -> DelayPercentiles {
            guard let last = values.last else { return .zero }
            func rank(_ p: Double) -> Int64 {
                let r = Int((p / 100 * Double(values.count)).rounded(.up))
                return values[Swift.max(0, Swift.min(values.count - 1, r - 1))]
            }
            return DelayPercentiles(p50: rank(50), p90: rank(90), p99: rank(99), max: last)
        }
    }

    enum CodingKeys: String, CodingKey {
        case requests, statusCounts = "status_counts", logsReceived = "logs_received", logsUnique = "logs_unique",
             logsDuplicate = "logs_duplicate", faults, installs, lateLogs = "late_logs", delayMs = "delay_ms",
             maxInFlight = "max_in_flight", vendors
    }

    public init(requests: Int, statusCounts: [String: Int], logsReceived: Int, logsUnique: Int, logsDuplicate: Int,
                faults: [String: Int], installs: [String: InstallStats], lateLogs: Int, delayMs: DelayPercentiles,
                maxInFlight: Int, vendors: [String: VendorStats]) {
        self.requests = requests
        self.statusCounts = statusCounts
        self.logsReceived = logsReceived
        self.logsUnique = logsUnique
        self.logsDuplicate = logsDuplicate
        self.faults = faults
        self.installs = installs
        self.lateLogs = lateLogs
        self.delayMs = delayMs
        self.maxInFlight = maxInFlight
        self.vendors = vendors
    }

    /// Reads stats of a server from before `vendors` existed as having none.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        requests = try c.decode(Int.self, forKey: .requests)
        statusCounts = try c.decode([String: Int].self, forKey: .statusCounts)
        logsReceived = try c.decode(Int.self, forKey: .logsReceived)
        logsUnique = try c.decode(Int.self, forKey: .logsUnique)
        logsDuplicate = try c.decode(Int.self, forKey: .logsDuplicate)
        faults = try c.decode([String: Int].self, forKey: .faults)
        installs = try c.decode([String: InstallStats].self, forKey: .installs)
        lateLogs = try c.decode(Int.self, forKey: .lateLogs)
        delayMs = try c.decode(DelayPercentiles.self, forKey: .delayMs)
        maxInFlight = try c.decode(Int.self, forKey: .maxInFlight)
        vendors = try c.decodeIfPresent([String: VendorStats].self, forKey: .vendors) ?? [:]
    }

    /// One vendor's counts (zeros when it had no traffic).
    public func vendor(_ vendor: Vendor) -> VendorStats { vendors[vendor.rawValue] ?? .zero }
}

/// A unique event of any vendor, as `GET /_mock/logs` lists it.
public struct MockVendorEvent: Sendable, Equatable {
    public var vendor: Vendor
    /// What `log_name` matches (SPEC V4b).
    public var name: String?
    /// Arrival on the server's (possibly skewed) clock, epoch ms.
    public var receivedAtMs: Int64
    /// The event as received, on one line.
    public var json: String
}

/// A unique log as the server accepted it.
public struct MockLog: Sendable, Equatable {
    /// The log's `id`, lower-case.
    public var id: String
    /// The `Install-ID` of the request that delivered it first.
    public var install: String
    public var type: LogType
    /// `name` of events and screens.
    public var name: String?
    /// Arrival on the server's (possibly skewed) clock, epoch ms.
    public var receivedAtMs: Int64
    /// The log object as received, on one line.
    public var json: String

    public var receivedAt: Date { Date(timeIntervalSince1970: Double(receivedAtMs) / 1000) }
}

/// One line of `GET /_mock/requests`.
public struct MockRequest: Codable, Sendable, Equatable {
    /// When the request head arrived, ms since start or reset.
    public var at: Int64
    public var install: String?
    /// Logs in the body (0 when it could not be parsed).
    public var logs: Int
    /// The HTTP status answered, or nil when a fault `action` answered nothing usable.
    public var status: Int?
    /// `refuse`, `reset`, `drop_after_body`, `hang`, `malformed` (nil when a status was answered).
    public var action: String?
    /// From the request head to the answer (or to the fault), ms.
    public var durationMs: Double

    enum CodingKeys: String, CodingKey {
        case at, install, logs, status, action, durationMs = "duration_ms"
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(at, forKey: .at)
        try c.encode(install, forKey: .install)
        try c.encode(logs, forKey: .logs)
        if let action { try c.encode(action, forKey: .action) } else { try c.encode(status, forKey: .status) }
        try c.encode(durationMs, forKey: .durationMs)
    }
}

/// The live page's delivery-delay histogram (`GET /_mock/histogram`).
public struct DelayHistogram: Codable, Sendable, Equatable {
    public struct Bucket: Codable, Sendable, Equatable {
        public var label: String
        /// Exclusive upper bound in ms; nil for the last bucket.
        public var belowMs: Int64?
        public var count: Int

        enum CodingKeys: String, CodingKey {
            case label, belowMs = "below_ms", count
        }
    }

    public var buckets: [Bucket]

    static let bounds: [(String, Int64?)] = [
        ("< 0 (future)", 0), ("< 100 ms", 100), ("< 1 s", 1000), ("< 10 s", 10_000), ("< 1 min", 60_000),
        ("< 10 min", 600_000), ("< 1 h", 3_600_000), ("< 1 day", 86_400_000), ("≥ 1 day", nil),
    ]

    /// The bounds' limits alone: `bucket(of:)` runs for every recorded log, and walking `bounds` itself
    /// copied (retained and released) each label on the way (SPEC M10).
    private static let limits: [Int64] = bounds.map { $0.1 ?? .max }

    static func bucket(of delay: Int64) -> Int {
        limits.withUnsafeBufferPointer { limits in
            for i in limits.indices where delay < limits[i] { return i }
            return limits.count - 1
        }
    }
}
