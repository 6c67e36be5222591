/// The configuration's fields in one table: each field's C key, whether `update` may change it (SPEC R8), and for
/// the numeric ones their unit and bounds. `validate()`, `update`'s refusals, the C decoder's keys and the command
/// line's flag checks read it, so that they cannot drift apart; a test checks that every stored property of
/// `Configuration` has a row.
public struct ConfigurationField: Sendable {
    /// The Swift field's name.
    public let name: String
    /// The key of `outbox_open`'s JSON (durations carry an `Ms` suffix); nil: no C key (the loop, the logger, …).
    public let cKey: String?
    /// Whether `OutboxEngine.update` / `outbox_update` may change it on a running engine.
    public let changeable: Bool
    let differs: @Sendable (Configuration, Configuration) -> Bool
}

/// The unit a bounded field is checked in, and how a message writes it.
public enum ConfigurationUnit: Sendable {
    case count, bytes, milliseconds, seconds

    public var suffix: String {
        switch self {
        case .count: ""
        case .bytes: " bytes"
        case .milliseconds: " ms"
        case .seconds: " s"
        }
    }
}

/// The numeric fields and their bounds, in the unit of the Swift field. `testingMinimum` is the lower bound with
/// `testingAllowsValuesBelowBounds` (the command line's `--testing`).
public enum BoundedField: String, CaseIterable, Sendable {
    case maxStorageSize, maxLogCount, pageCacheSize, diskReserveSize, maxLogAge, maxDistinctEventNames
    case groupCommitWindow, intakeCapacity, batchSize, transmissionInterval, criticalTransmissionInterval
    case retryIntervals, maxRetryAfter, probeInterval, dispatchInterval, requestTimeout, clockSkewThreshold
    case sessionTimeout

    public var unit: ConfigurationUnit {
        switch self {
        case .maxStorageSize, .pageCacheSize, .diskReserveSize: .bytes
        case .maxLogCount, .maxDistinctEventNames, .intakeCapacity, .batchSize: .count
        case .maxLogAge: .seconds
        default: .milliseconds
        }
    }

    /// The bounds for users, and the lower bound that testing lowers them to.
    public var bounds: (minimum: Int64, testingMinimum: Int64, maximum: Int64) {
        let day: Int64 = 86_400_000
        switch self {
        // The store itself needs 24 KiB: its schema alone takes 8 pages.
        case .maxStorageSize: return (24 * 1024, 24 * 1024, 1 << 40)
        case .maxLogCount: return (1, 1, 4000)
        case .pageCacheSize: return (64 * 1024, 64 * 1024, 64 << 20)
        case .diskReserveSize: return (32 * 1024, 32 * 1024, 64 << 20)
        case .maxLogAge: return (3600, 1, 365 * 24 * 3600)
        case .maxDistinctEventNames: return (1, 1, 10_000)
        case .groupCommitWindow: return (1, 1, 1000)
        case .intakeCapacity: return (1000, 1, 10_000_000)
        case .batchSize: return (1, 1, 500)
        case .transmissionInterval: return (6000, 1, day)
        // The upper bound is `transmissionInterval` (checked apart).
        case .criticalTransmissionInterval: return (1000, 1, day)
        case .retryIntervals: return (1000, 1, day)
        case .maxRetryAfter: return (1000, 1, day)
        case .probeInterval: return (60_000, 1, day)
        // Only a periodic interval (> 0) is bounded: 0 or less means manual dispatch (SPEC C6).
        case .dispatchInterval: return (1000, 1, day)
        case .requestTimeout: return (1000, 1, 600_000)
        case .clockSkewThreshold: return (0, 0, day)
        case .sessionTimeout: return (1000, 1, day)
        }
    }

    /// The accepted range, with or without testing's lower bounds.
    public func range(testing: Bool) -> ClosedRange<Int64> {
        let bounds = self.bounds
        return (testing ? bounds.testingMinimum : bounds.minimum)...bounds.maximum
    }
}

extension Configuration {
    /// Every stored property of `Configuration`, in declaration order.
    public static let schema: [ConfigurationField] = [
        field("storePath", "storePath") { $0.storePath != $1.storePath },
        field("maxStorageSize", "maxStorageSize") { $0.maxStorageSize != $1.maxStorageSize },
        field("maxLogCount", "maxLogCount") { $0.maxLogCount != $1.maxLogCount },
        field("maxLogAge", "maxLogAgeMs") { $0.maxLogAge != $1.maxLogAge },
        field("maxDistinctEventNames", "maxDistinctEventNames") { $0.maxDistinctEventNames != $1.maxDistinctEventNames },
        field("groupCommitWindow", "groupCommitWindowMs") { $0.groupCommitWindow != $1.groupCommitWindow },
        field("intakeCapacity", "intakeCapacity") { $0.intakeCapacity != $1.intakeCapacity },
        field("pageCacheSize", nil) { $0.pageCacheSize != $1.pageCacheSize },
        field("diskReserveSize", nil) { $0.diskReserveSize != $1.diskReserveSize },
        field("exclusiveStoreLock", nil) { $0.exclusiveStoreLock != $1.exclusiveStoreLock },
        field("sharedTransport", nil) { $0.sharedTransport.map(ObjectIdentifier.init) != $1.sharedTransport.map(ObjectIdentifier.init) },
        field("storeKey", "storeKeyFile", changeable: true) { $0.storeKey != $1.storeKey },
        field("clock", nil) { ObjectIdentifier(type(of: $0.clock)) != ObjectIdentifier(type(of: $1.clock)) },
        field("logger", nil) { $0.logger.label != $1.logger.label || $0.logger.logLevel != $1.logger.logLevel },
        field("runMode", nil) { $0.runMode.loopPointer != $1.runMode.loopPointer },
        field("endpoint", "endpoint", changeable: true) { $0.endpoint != $1.endpoint },
        field("appSecret", "appSecret", changeable: true) { $0.appSecret != $1.appSecret },
        field("destination", "destination", changeable: true) { $0.destination != $1.destination },
        field("apiKey", "apiKey", changeable: true) { $0.apiKey != $1.apiKey },
        field("writeKey", "writeKey", changeable: true) { $0.writeKey != $1.writeKey },
        field("segmentProfile", "segmentProfile", changeable: true) { $0.segmentProfile != $1.segmentProfile },
        field("otlpEncoding", "otlpEncoding", changeable: true) { $0.otlpEncoding != $1.otlpEncoding },
        field("headers", "headers", changeable: true) { $0.headers != $1.headers },
        field("batchSize", "batchSize") { $0.batchSize != $1.batchSize },
        field("transmissionInterval", "transmissionIntervalMs") { $0.transmissionInterval != $1.transmissionInterval },
        field("criticalTransmissionInterval", "criticalTransmissionIntervalMs") {
            $0.criticalTransmissionInterval != $1.criticalTransmissionInterval
        },
        field("retryIntervals", "retryIntervalsMs") { $0.retryIntervals != $1.retryIntervals },
        field("maxRetryAfter", "maxRetryAfterMs") { $0.maxRetryAfter != $1.maxRetryAfter },
        field("probeInterval", "probeIntervalMs") { $0.probeInterval != $1.probeInterval },
        field("recoveryProbe", "recoveryProbe") { $0.recoveryProbe != $1.recoveryProbe },
        field("dispatchInterval", "dispatchIntervalMs") { $0.dispatchInterval != $1.dispatchInterval },
        field("requestTimeout", "requestTimeoutMs", changeable: true) { $0.requestTimeout != $1.requestTimeout },
        field("caFile", "caFile", changeable: true) { $0.caFile != $1.caFile },
        field("clientCertificate", "clientCertificate", changeable: true) { $0.clientCertificate != $1.clientCertificate },
        field("clientKey", "clientKey", changeable: true) { $0.clientKey != $1.clientKey },
        field("pinnedPublicKey", "pinnedPublicKey", changeable: true) { $0.pinnedPublicKey != $1.pinnedPublicKey },
        field("bodyCompression", "bodyCompression") { $0.bodyCompression != $1.bodyCompression },
        field("clockSkewThreshold", "clockSkewThresholdMs") { $0.clockSkewThreshold != $1.clockSkewThreshold },
        field("watchesNetwork", "watchesNetwork") { $0.watchesNetwork != $1.watchesNetwork },
        field("appVersion", "appVersion") { $0.appVersion != $1.appVersion },
        field("appBuild", "appBuild") { $0.appBuild != $1.appBuild },
        field("appNamespace", "appNamespace") { $0.appNamespace != $1.appNamespace },
        field("sessionTimeout", "sessionTimeoutMs") { $0.sessionTimeout != $1.sessionTimeout },
        field("sessionTracking", "sessionTracking") { $0.sessionTracking != $1.sessionTracking },
        field("tracksAppLifecycle", "tracksAppLifecycle") { $0.tracksAppLifecycle != $1.tracksAppLifecycle },
        field("testingIDSeed", nil) { $0.testingIDSeed != $1.testingIDSeed },
        field("testingAllowsValuesBelowBounds", "testingAllowsValuesBelowBounds") {
            $0.testingAllowsValuesBelowBounds != $1.testingAllowsValuesBelowBounds
        },
    ]

    private static func field(_ name: String, _ cKey: String?, changeable: Bool = false,
                              _ differs: @escaping @Sendable (Configuration, Configuration) -> Bool) -> ConfigurationField {
        ConfigurationField(name: name, cKey: cKey, changeable: changeable, differs: differs)
    }

    /// SPEC R8: the fields `OutboxEngine.update` may change.
    public static var changeableFields: [String] { schema.filter(\.changeable).map(\.name) }

    /// The names of the fields fixed at start that differ from `other`.
    func fixedFieldsChanged(from other: Configuration) -> [String] {
        Self.schema.filter { !$0.changeable && $0.differs(self, other) }.map(\.name)
    }
}

extension RunMode {
    /// The host's loop of `.hostLoop`, else nil.
    var loopPointer: UnsafeMutableRawPointer? {
        if case .hostLoop(let loop) = self { return loop }
        return nil
    }
}
