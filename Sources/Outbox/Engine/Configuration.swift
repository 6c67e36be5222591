import FoundationEssentials
import Logging

/// Everything an engine needs, validated once when the engine starts; an error names the field, its bounds and the
/// value given. Defaults are docs/BEHAVIOUR.md's.
///
/// ```swift
/// var configuration = Configuration(storePath: "/var/lib/myapp/outbox.sqlite")
/// configuration.maxStorageSize = 4 * 1024 * 1024
/// let engine = try OutboxEngine(configuration: configuration)
/// ```
public struct Configuration: Sendable {
    /// The SQLite file of this engine (SPEC S1). Created with mode 0600; one engine per file.
    public var storePath: String
    /// SPEC S2: the database never grows beyond this many bytes. 24 KiB – 1 TiB; default 10 MiB.
    public var maxStorageSize: Int = 10 * 1024 * 1024
    /// SPEC S5: optional cap on the number of stored logs, 1–4000 when set. Default: none.
    public var maxLogCount: Int? = nil
    /// SPEC S4: logs older than this are deleted and never sent. 1 hour – 365 days; default 25 days.
    public var maxLogAge: Duration = .seconds(25 * 24 * 3600)
    /// SPEC T4: distinct event names per install, 1–10 000; default 200.
    public var maxDistinctEventNames: Int = 200
    /// SPEC T5: a normal log is committed at most this long after `trackEvent` returned. 1 ms – 1 s; default 50 ms.
    public var groupCommitWindow: Duration = .milliseconds(50)
    /// Logs handed over but not yet committed, at most. A caller that tracks faster than the disk commits waits
    /// (back-pressure) rather than growing memory without bound or dropping logs. 1 000 – 10 000 000; default 100 000.
    public var intakeCapacity: Int = 100_000
    /// SQLite's page cache of the store, at most, in bytes. nil (default): 1 MiB, more for caps above 256 MiB. A process
    /// that runs many engines (`outbox fleet`) sets it small: the cache holds pages the engine reads again, and a small
    /// store reads few. 64 KiB – 64 MiB when set.
    public var pageCacheSize: Int? = nil
    /// SPEC S7: the `<store>-reserve` file kept beside the store for a full disk, in bytes. nil (default): 256 KiB (or
    /// 64 pages if larger). Many small stores in one directory (`outbox fleet`) set it small; it never goes below
    /// 16 pages, twice the smallest WAL cycle the full-disk path checkpoints at. 32 KiB – 64 MiB when set.
    public var diskReserveSize: Int? = nil
    /// Two descriptors for the store instead of four, for a process that runs many engines (`outbox fleet`, SPEC F4):
    /// SQLite's exclusive locking mode keeps the WAL index in memory (no `-shm` file) and holds the database's own
    /// lock while the engine runs (no `.lock` descriptor beyond the open). The price: nothing else can read the
    /// store meanwhile (`outbox status`, `StoreReport.read`, `OutboxEngine.deadLetters(inStoreAt:)` get
    /// `storeLocked` until the engine shuts down). Default false.
    public var exclusiveStoreLock = false
    /// Engines in host-loop mode on one loop may share one HTTP client (`SharedTransport`): one curl multi handle and
    /// one bounded connection pool for them all instead of one each (SPEC F4). nil (default): the engine has its
    /// own. The shared transport must belong to the loop of `runMode`.
    public var sharedTransport: SharedTransport? = nil
    /// SPEC K1: seals what the store holds — logs, dead letters, device contexts, the user id — with AES-256-GCM under
    /// this key, and keeps event names as HMACs; nil (default): a plain store. A plain store given a key is sealed at
    /// open; a sealed store refuses to open without its key, or with another (`storeKeyInvalid`). `update` with a new
    /// key rotates (R8): stored rows are sealed again, a few at a time, while the engine runs. A key cannot be removed.
    public var storeKey: StoreKey? = nil
    /// Wall and monotonic clocks; tests inject a `ManualClock`.
    public var clock: any OutboxClock = SystemClock()
    /// The host's logger: the engine never bootstraps swift-log. Default: discards everything.
    public var logger: Logger = Logger(label: "outbox", factory: { _ in SwiftLogNoOpLogHandler() })
    /// Where the engine's libuv loop runs.
    public var runMode: RunMode = .dedicatedThread

    // MARK: Delivery (SPEC C, R, W). Without an endpoint the engine only stores.

    /// The ingestion server's base URL; the destination appends its path (App Center: `{endpoint}/logs?api-version=1.0.0`,
    /// SPEC W1, D1). An endpoint that already ends in that path (`http://collector:4318/v1/logs`) is used as it is.
    /// nil: store only.
    public var endpoint: String? = nil
    /// Sent as `App-Secret` (never logged).
    public var appSecret: String = ""
    /// SPEC D1: the wire the batches speak; App Center's by default. Changeable by `update` (R8).
    public var destination: Destination = .appCenter
    /// SPEC D1: PostHog's project API key, sent in each request's body (never logged); required for
    /// `destination = .posthog`, and (SPEC D13) Amplitude's for `destination = .amplitude`.
    public var apiKey: String = ""
    /// SPEC D1: the Segment-compatible server's write key, sent as HTTP Basic (never logged); required for
    /// `destination = .segment`.
    public var writeKey: String = ""
    /// SPEC D4: `.segment` (default) or `.rudderstack` (`originalTimestamp`, a numeric `context.sessionId`).
    public var segmentProfile: SegmentProfile = .segment
    /// SPEC D1: how OTLP requests are written, `.protobuf` (default) or `.json`; for `destination = .otlp` only.
    public var otlpEncoding: OTLPEncoding = .protobuf
    /// SPEC D14: Mixpanel's project token, sent as HTTP Basic's user name (never logged); or a service account:
    /// `serviceAccountUser` with `serviceAccountSecret` (never logged) and `projectId`, then required.
    public var projectToken: String = ""
    public var serviceAccountUser: String = ""
    public var serviceAccountSecret: String = ""
    public var projectId: Int? = nil
    /// SPEC D12: GA4's measurement id (`G-` and letters or digits), required for `destination = .ga4`.
    public var measurementId: String = ""
    /// SPEC D12: GA4's Measurement Protocol API secret, sent in the request's URL (never logged, masked as ***);
    /// required for `destination = .ga4`.
    public var apiSecret: String = ""
    /// Headers added to every request, on every destination (a proxy's token, a tenant; never logged). Names the
    /// destination's wire sets itself (`Content-Type`, `Content-Encoding`, `Install-ID`; App Center's `App-Secret`,
    /// Segment's `Authorization`: `Destination.wireHeaders`) are refused, in any case.
    public var headers: [HeaderField] = []
    /// SPEC H2 (BEHAVIOUR H2): the single destination sends only the logs these names match (nil: every name). Names
    /// match exactly or by `prefix*`; non-event logs by the engine's names (`$screen`, `$identify`, …).
    public var include: [String]? = nil
    /// SPEC H2: logs of these names are not sent to the single destination (settled for it as `skipped`).
    public var exclude: [String] = []
    /// SPEC H3: property names (or `prefix*`) removed before encoding for the single destination, from event and
    /// screen properties, user properties and identify traits alike. The store keeps them.
    public var redact: [String] = []
    /// SPEC H4: event name (or `prefix*`, `*`) → the share of those events sent, 0–1, decided by the log id (the
    /// same on every attempt and restart); 1 when no pattern matches.
    public var sample: [String: Double] = [:]
    /// SPEC D15: several destinations, each named, delivering the same logs from the one store with progress of
    /// their own (D16–D18). Empty (default): the single-destination fields above, a list of one named `default`.
    /// Given, those fields keep their defaults: every destination is in the list.
    public var destinations: [NamedDestination] = []
    /// SPEC C1: logs per request, 1–500; default 50.
    public var batchSize = 50
    /// SPEC C2: maximum delay of the oldest waiting normal log, 6 s – 86400 s; default 6 s.
    public var transmissionInterval: Duration = .seconds(6)
    /// SPEC C2: the same for critical logs, 1 s – `transmissionInterval`; default 3 s.
    public var criticalTransmissionInterval: Duration = .seconds(3)
    /// SPEC R3: back-off of one batch, each 1 s – 1 day, at most 10; default 10 s, 5 min, 20 min.
    public var retryIntervals: [Duration] = [.seconds(10), .seconds(300), .seconds(1200)]
    /// SPEC R4: the longest pause a `Retry-After` may impose, 1 s – 1 day; default 1 h.
    public var maxRetryAfter: Duration = .seconds(3600)
    /// SPEC R5: after exhausted retries one probe batch goes through this often; nil: until restart. Default 30 min.
    /// With `recoveryProbe` set, a disabled destination probes at R9's cap instead.
    public var probeInterval: Duration? = .seconds(1800)
    /// SPEC R9–R10: while a fault holds, one probe at a time on a schedule from 1 s to 10 s (60 s after 5 min);
    /// after it, a drain that widens from one request. nil: R3/R5 alone, App Center's behaviour exactly.
    public var recoveryProbe: RecoveryProbe? = RecoveryProbe()
    /// SPEC C6: nil = automatic (C2); > 0 = periodic dispatch; ≤ 0 = manual (`dispatch()` only).
    public var dispatchInterval: Duration? = nil
    /// A request that has not completed after this is a timeout (retryable), 1 s – 10 min; default 30 s.
    public var requestTimeout: Duration = .seconds(30)
    /// An extra CA bundle (PEM) for HTTPS endpoints, e.g. a test server's self-signed certificate. Verification
    /// always stays on.
    public var caFile: String? = nil
    /// SPEC K2: the client certificate (PEM) this host proves its identity with (mutual TLS), and its private key
    /// (PEM, unencrypted, readable by the engine's user only is wise); both or neither. Checked at configuration: the
    /// key must be the certificate's.
    public var clientCertificate: String? = nil
    public var clientKey: String? = nil
    /// SPEC K2: the server's public key must match one of these pins, in curl's form: `sha256//BASE64` (the SHA-256 of
    /// the DER-encoded SubjectPublicKeyInfo), several separated by `;`. A mismatch stops sending like a 401 (R1).
    public var pinnedPublicKey: String? = nil
    /// SPEC W1: how bodies of 1400 bytes and more are gzip-compressed. `.fast` (default): Outbox's own compressor,
    /// the least CPU on the loop for somewhat larger bodies; `.zlib(level:)` 1–9 for smaller bodies (BENCHMARKS.md).
    public var bodyCompression: BodyCompression = .fast
    /// SPEC A9: server clock offsets above this correct timestamps; default 1 s.
    public var clockSkewThreshold: Duration = .seconds(1)
    /// SPEC N1: watch rtnetlink for reachability (ignored for a loopback endpoint, which is always reachable).
    public var watchesNetwork = true
    /// SPEC A10: the app's identity in the device context.
    public var appVersion = "unknown"
    public var appBuild = "unknown"
    public var appNamespace: String? = nil

    // MARK: Analytics model (SPEC A1–A8)

    /// SPEC A1: a background stretch longer than this ends the session; the next foreground starts a new one.
    /// 1 s – 1 day; default 20 s (Curio's default is 30 min).
    public var sessionTimeout: Duration = .seconds(20)
    /// SPEC A1–A2: `.automatic` (default) or `.manual` (App Center's and Curio's `enableManualSessionTracker()`:
    /// sessions start only on `startSession()`). Fixed at start.
    public var sessionTracking: SessionTracking = .automatic
    /// SPEC A5 (Sensors' auto-track): `$AppStart` at engine start and on each `enterForeground()`, `$AppEnd` on each
    /// `enterBackground()` and at shutdown. Default: off.
    public var tracksAppLifecycle = false
    /// SPEC H1: the hook behind `beforeStore` (BeforeStore.swift), boxed so that an update can tell a new hook apart.
    var beforeStoreHook: BeforeStoreHook? = nil
    /// Seeds the log and session ids, so that a test gets the same JSON every run (golden payloads).
    var testingIDSeed: UInt64? = nil

    /// Lets tests use values below the user-facing bounds (tiny storage caps, short ages). Never set it in an app.
    public var testingAllowsValuesBelowBounds = false

    public init(storePath: String) {
        self.storePath = storePath
    }

    /// Checks every field; the error names the field, its bounds and the value given.
    public func validate() throws(OutboxError) {
        guard !storePath.isEmpty else { throw .invalidConfiguration("storePath is empty: give the path of the SQLite file") }
        guard retryIntervals.count <= 10 else {
            throw .invalidConfiguration("retryIntervals holds at most 10 intervals, got \(retryIntervals.count)")
        }
        // The numeric fields, each against its row's bounds (`Configuration.schema`).
        try checkBounds()
        if let endpoint, let problem = Self.endpointProblem(endpoint) {
            throw .invalidConfiguration("endpoint must be an absolute http:// or https:// URL with a host; \(problem), got '\(endpoint)'")
        }
        // SPEC D1: a destination whose server identifies the project by a key cannot send without it.
        try destinationsProblem()
        if let missingCredential { throw .invalidConfiguration(missingCredential) }
        if let destinationFieldProblem { throw .invalidConfiguration(destinationFieldProblem) }
        if let problem = DestinationPolicy.problem(include: include, exclude: exclude, redact: redact, sample: sample) {
            throw .invalidConfiguration(problem)
        }
        for header in headers {
            if let problem = header.refusal(for: destination) { throw .invalidConfiguration(problem) }
        }
        if let recoveryProbe { try recoveryProbe.validate(testing: testingAllowsValuesBelowBounds) }
        if case .zlib(let level) = bodyCompression, !(1...9).contains(level) {
            throw .invalidConfiguration("bodyCompression's zlib level must be between 1 and 9, got \(level)")
        }
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw .invalidConfiguration("caFile \(caFile) is not a readable file")
        }
        try TLSIdentity.validate(certificate: clientCertificate, key: clientKey, pins: pinnedPublicKey)
    }

    /// Why `endpoint` cannot be sent to, or nil (SPEC X3a): read by curl's own URL parser, as the transport will, so
    /// that an endpoint that passes here is one curl sends to, and one it cannot parse is refused now rather than
    /// retried for ever.
    public static func endpointProblem(_ endpoint: String) -> String? {
        let lowered = endpoint.lowercased()
        guard lowered.hasPrefix("http://") || lowered.hasPrefix("https://") else {
            return "it does not start with http:// or https://"
        }
        if endpoint.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 }) {
            return "it contains a space or a control character"
        }
        guard let origin = Origin(endpoint) else { return "it does not parse as a URL with a host" }
        guard origin.scheme == "http" || origin.scheme == "https" else { return "its scheme is \(origin.scheme)" }
        guard !origin.host.isEmpty else { return "it has no host" }
        return nil
    }

    var deliverySettings: DeliveryMachine.Settings {
        var settings = DeliveryMachine.Settings()
        settings.batchSize = batchSize
        settings.normalIntervalMs = transmissionInterval.milliseconds
        settings.criticalIntervalMs = criticalTransmissionInterval.milliseconds
        settings.dispatchIntervalMs = dispatchInterval?.milliseconds
        settings.probeIntervalMs = probeInterval?.milliseconds
        settings.recovery = recoveryProbe?.machineSettings
        settings.retry = RetryPolicy(intervalsMs: retryIntervals.map(\.milliseconds), maxRetryAfterMs: maxRetryAfter.milliseconds)
        settings.maxAgeMs = storeLimits.maxAgeMs
        return settings
    }

    /// `value` in `field`'s unit against its bounds (SPEC's, or testing's lower ones); the error names the field,
    /// the bounds and the value.
    func check(_ field: BoundedField, _ value: Int64, maximum: Int64? = nil, name: String? = nil) throws(OutboxError) {
        var range = field.range(testing: testingAllowsValuesBelowBounds)
        if let maximum { range = range.lowerBound...max(range.lowerBound, min(range.upperBound, maximum)) }
        guard range.contains(value) else {
            let unit = field.unit.suffix
            throw .invalidConfiguration("\(name ?? field.rawValue) must be between \(range.lowerBound)\(unit) and \(range.upperBound)\(unit), got \(value)\(unit)")
        }
    }

    var analyticsSettings: AnalyticsState.Settings {
        AnalyticsState.Settings(sessionTracking: sessionTracking, sessionTimeoutNs: sessionTimeout.milliseconds * 1_000_000,
                                tracksAppLifecycle: tracksAppLifecycle)
    }

    var storeLimits: StoreLimits {
        var limits = StoreLimits()
        limits.maxStorageSize = maxStorageSize
        limits.maxLogCount = maxLogCount
        limits.maxAgeMs = maxLogAge.milliseconds
        limits.pageCacheKiB = pageCacheSize.map { max(1, $0 / 1024) }
        limits.key = storeKey
        limits.diskReserveBytes = diskReserveSize
        limits.exclusiveLock = exclusiveStoreLock
        return limits
    }
}

extension Duration {
    /// Whole milliseconds, saturating at Int64's bounds (a `Duration` of more than 292 million years does not trap:
    /// `Configuration.validate()` names it as out of range).
    var milliseconds: Int64 { saturated(unitsPerSecond: 1000) }

    /// Whole units of `1 / unitsPerSecond` s, saturating at Int64's bounds instead of trapping on overflow.
    func saturated(unitsPerSecond: Int64) -> Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: unitsPerSecond)
        if overflow { return seconds < 0 ? Int64.min : Int64.max }
        let (sum, carry) = scaled.addingReportingOverflow(attoseconds / (1_000_000_000_000_000_000 / unitsPerSecond))
        return carry ? (seconds < 0 ? Int64.min : Int64.max) : sum
    }
}

/// SPEC R9–R10: how a destination finds out that a fault is over, and how it drains afterwards. Each probe interval is
/// drawn between half and all of its value, so that a fleet that lost the same server does not come back at once.
public struct RecoveryProbe: Sendable, Equatable {
    /// The first probe's interval after a fault begins; each next one doubles. Default 1 s.
    public var initialInterval: Duration = .seconds(1)
    /// The longest interval while the fault is young. Default 10 s.
    public var maxInterval: Duration = .seconds(10)
    /// The interval once the fault has lasted `longFaultAfter`. Defaults 60 s after 5 min.
    public var longFaultInterval: Duration = .seconds(60)
    public var longFaultAfter: Duration = .seconds(300)
    /// After a network change (R6), `retryNow()` or an update (R8), the first request waits a random time up to this.
    /// Default 1 s; zero sends at once.
    public var drainJitter: Duration = .seconds(1)

    public init(initialInterval: Duration = .seconds(1), maxInterval: Duration = .seconds(10),
                longFaultInterval: Duration = .seconds(60), longFaultAfter: Duration = .seconds(300),
                drainJitter: Duration = .seconds(1)) {
        self.initialInterval = initialInterval
        self.maxInterval = maxInterval
        self.longFaultInterval = longFaultInterval
        self.longFaultAfter = longFaultAfter
        self.drainJitter = drainJitter
    }

    /// Intervals of 1 ms – 1 day (100 ms with `testing` off for the probes: a faster one is a herd), each cap no
    /// shorter than what it caps; the error names the field.
    func validate(testing: Bool) throws(OutboxError) {
        let day: Int64 = 86_400_000, least: Int64 = testing ? 1 : 100
        let fields: [(String, Duration, Int64)] = [
            ("recoveryProbe.initialInterval", initialInterval, least), ("recoveryProbe.maxInterval", maxInterval, least),
            ("recoveryProbe.longFaultInterval", longFaultInterval, least), ("recoveryProbe.longFaultAfter", longFaultAfter, 0),
            ("recoveryProbe.drainJitter", drainJitter, 0)]
        for (name, value, minimum) in fields where !(minimum...day).contains(value.milliseconds) {
            throw .invalidConfiguration("\(name) must be between \(minimum) ms and \(day) ms, got \(value.milliseconds) ms")
        }
        guard maxInterval >= initialInterval, longFaultInterval >= maxInterval else {
            throw .invalidConfiguration("recoveryProbe's intervals must grow: initialInterval ≤ maxInterval ≤ longFaultInterval, got \(initialInterval.milliseconds) ms, \(maxInterval.milliseconds) ms, \(longFaultInterval.milliseconds) ms")
        }
    }

    var machineSettings: DeliveryMachine.Recovery {
        DeliveryMachine.Recovery(initialMs: initialInterval.milliseconds, capMs: maxInterval.milliseconds,
                                 longCapMs: longFaultInterval.milliseconds, longFaultAfterMs: longFaultAfter.milliseconds,
                                 drainJitterMs: drainJitter.milliseconds)
    }
}
