import FoundationEssentials

/// The configuration's fields in one table, and the table drives them: each field's key path, its C key and how a C
/// JSON value becomes the field (`decode`, `encode`), its bounds (`validate()` loops over the bounded rows), and what
/// a change at run time touches (`applies`: `update` refuses a field that touches nothing, SPEC R8, and reconfigures
/// the union of what the changed fields touch). The command line's flag checks read the bounds too, so that they
/// cannot drift apart; a test checks that every stored property of `Configuration` has a row.
public struct ConfigurationField: Sendable {
    /// The Swift field's name.
    public let name: String
    /// The key of `outbox_open`'s JSON (durations carry an `Ms` suffix); nil: no C key (the loop, the logger, …).
    public let cKey: String?
    /// SPEC R8: what applying a change on a running engine touches; empty: fixed at start.
    public let applies: ConfigurationApplyTargets
    /// The numeric bounds `validate()` checks the field against, if it has any.
    public let bounds: BoundedField?
    let keyPath: PartialKeyPath<Configuration> & Sendable
    let differs: @Sendable (Configuration, Configuration) -> Bool
    /// Sets the field from its C JSON value (nil: no C key, or one decoded apart: `storePath` first of all).
    let decode: (@Sendable (JSONValue, inout Configuration) throws(ConfigurationValueError) -> Void)?
    /// The field as C JSON would give it; nil where the JSON names something the engine reads (`storeKeyFile`).
    let encode: (@Sendable (Configuration) -> JSONValue)?
    /// The values `validate()` checks against `bounds`, in its unit: none for an unset optional, one per interval of a list.
    let measure: (@Sendable (Configuration) -> [Int64])?

    /// Whether `OutboxEngine.update` / `outbox_update` may change it on a running engine.
    public var changeable: Bool { !applies.isEmpty }
}

/// SPEC R8: the parts of a running engine a changed field reaches.
public struct ConfigurationApplyTargets: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// The wire and its request (URL, credentials, headers), made again from the configuration.
    public static let wire = Self(rawValue: 1)
    /// The HTTP client: a new one (or lane of the shared one) with the new TLS and timeout settings.
    public static let transport = Self(rawValue: 2)
    /// The reachability watcher, told the new endpoint (a loopback one needs no network, SPEC N1).
    public static let reachability = Self(rawValue: 4)
    /// The store's key: stored rows are sealed again under the new one (SPEC K1).
    public static let storeKey = Self(rawValue: 8)
    /// SPEC D18: the list of destinations — each destination's wire and transport made again, and, when names were
    /// added or removed, delivery rebuilt for the new list.
    public static let destinations = Self(rawValue: 16)
    /// SPEC H1: the callers' before-store hook, swapped at once on the caller's thread (nothing on the loop).
    public static let beforeStore = Self(rawValue: 32)
    /// SPEC H2–H4: a destination's policy, given to its delivery (the wire and the transport stay).
    public static let policy = Self(rawValue: 64)
}

/// Why a C JSON value cannot be a field: `wrongType` when it is not of the field's JSON type (OUTBOX_EINVAL), else a
/// value the field does not take (OUTBOX_ECONFIG). The message names the key, never a secret's value.
package struct ConfigurationValueError: Error {
    package let wrongType: Bool
    package let message: String
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

    /// How a refusal names the field: a list's bound holds for each of its items.
    var messageName: String { self == .retryIntervals ? "each of retryIntervals" : rawValue }

    /// A bound that another field sets: the critical interval is at most the normal one (SPEC C2).
    func maximum(in configuration: Configuration) -> Int64? {
        self == .criticalTransmissionInterval ? max(configuration.transmissionInterval.milliseconds, 1) : nil
    }

    /// The accepted range, with or without testing's lower bounds.
    public func range(testing: Bool) -> ClosedRange<Int64> {
        let bounds = self.bounds
        return (testing ? bounds.testingMinimum : bounds.minimum)...bounds.maximum
    }
}

extension Configuration {
    /// Every stored property of `Configuration`, in declaration order. `clock`, `logger`, `runMode` and
    /// `sharedTransport` have no C key and no value to compare but their identity: their rows say only how they differ.
    public static let schema: [ConfigurationField] = [
        row(\.storePath, "storePath", "storePath", .string),
        row(\.maxStorageSize, "maxStorageSize", "maxStorageSize", .integer, bounds: .maxStorageSize),
        row(\.maxLogCount, "maxLogCount", "maxLogCount", .optional(.integer), bounds: .maxLogCount),
        row(\.maxLogAge, "maxLogAge", "maxLogAgeMs", .milliseconds, bounds: .maxLogAge),
        row(\.maxDistinctEventNames, "maxDistinctEventNames", "maxDistinctEventNames", .integer, bounds: .maxDistinctEventNames),
        row(\.groupCommitWindow, "groupCommitWindow", "groupCommitWindowMs", .milliseconds, bounds: .groupCommitWindow),
        row(\.intakeCapacity, "intakeCapacity", "intakeCapacity", .integer, bounds: .intakeCapacity),
        row(\.pageCacheSize, "pageCacheSize", nil, nil, bounds: .pageCacheSize),
        row(\.diskReserveSize, "diskReserveSize", nil, nil, bounds: .diskReserveSize),
        row(\.exclusiveStoreLock, "exclusiveStoreLock", nil, nil),
        explicit(\.sharedTransport, "sharedTransport") {
            $0.sharedTransport.map(ObjectIdentifier.init) != $1.sharedTransport.map(ObjectIdentifier.init)
        },
        row(\.storeKey, "storeKey", "storeKeyFile", .storeKeyFile, applies: .storeKey),
        explicit(\.clock, "clock") { ObjectIdentifier(type(of: $0.clock)) != ObjectIdentifier(type(of: $1.clock)) },
        explicit(\.logger, "logger") { $0.logger.label != $1.logger.label || $0.logger.logLevel != $1.logger.logLevel },
        explicit(\.runMode, "runMode") { $0.runMode.loopPointer != $1.runMode.loopPointer },
        row(\.endpoint, "endpoint", "endpoint", .optional(.string), applies: [.wire, .reachability]),
        row(\.appSecret, "appSecret", "appSecret", .string, applies: .wire),
        row(\.destination, "destination", "destination", .named(Destination.init(name:), name: \.name), applies: .wire),
        row(\.apiKey, "apiKey", "apiKey", .string, applies: .wire),
        row(\.writeKey, "writeKey", "writeKey", .string, applies: .wire),
        row(\.segmentProfile, "segmentProfile", "segmentProfile", .named(SegmentProfile.init(name:), name: \.rawValue), applies: .wire),
        row(\.otlpEncoding, "otlpEncoding", "otlpEncoding", .named(OTLPEncoding.init(name:), name: \.rawValue), applies: .wire),
        row(\.projectToken, "projectToken", "projectToken", .string, applies: .wire),
        row(\.serviceAccountUser, "serviceAccountUser", "serviceAccountUser", .string, applies: .wire),
        row(\.serviceAccountSecret, "serviceAccountSecret", "serviceAccountSecret", .string, applies: .wire),
        row(\.projectId, "projectId", "projectId", .optional(.integer), applies: .wire),
        row(\.measurementId, "measurementId", "measurementId", .string, applies: .wire),
        row(\.apiSecret, "apiSecret", "apiSecret", .string, applies: .wire),
        row(\.headers, "headers", "headers", .headers, applies: .wire),
        row(\.include, "include", "include", .optional(.names), applies: .policy),
        row(\.exclude, "exclude", "exclude", .names, applies: .policy),
        row(\.redact, "redact", "redact", .names, applies: .policy),
        row(\.sample, "sample", "sample", .rates, applies: .policy),
        row(\.destinations, "destinations", "destinations", .destinations, applies: .destinations),
        row(\.batchSize, "batchSize", "batchSize", .integer, bounds: .batchSize),
        row(\.transmissionInterval, "transmissionInterval", "transmissionIntervalMs", .milliseconds, bounds: .transmissionInterval),
        row(\.criticalTransmissionInterval, "criticalTransmissionInterval", "criticalTransmissionIntervalMs", .milliseconds,
            bounds: .criticalTransmissionInterval),
        row(\.retryIntervals, "retryIntervals", "retryIntervalsMs", .millisecondsList, bounds: .retryIntervals),
        row(\.maxRetryAfter, "maxRetryAfter", "maxRetryAfterMs", .milliseconds, bounds: .maxRetryAfter),
        row(\.probeInterval, "probeInterval", "probeIntervalMs", .optional(.milliseconds), bounds: .probeInterval),
        row(\.recoveryProbe, "recoveryProbe", "recoveryProbe", .recoveryProbe),
        row(\.dispatchInterval, "dispatchInterval", "dispatchIntervalMs", .optional(.milliseconds), bounds: .dispatchInterval),
        row(\.requestTimeout, "requestTimeout", "requestTimeoutMs", .milliseconds, applies: .transport, bounds: .requestTimeout),
        row(\.caFile, "caFile", "caFile", .optional(.string), applies: .transport),
        row(\.clientCertificate, "clientCertificate", "clientCertificate", .optional(.string), applies: .transport),
        row(\.clientKey, "clientKey", "clientKey", .optional(.string), applies: .transport),
        row(\.pinnedPublicKey, "pinnedPublicKey", "pinnedPublicKey", .optional(.string), applies: .transport),
        row(\.bodyCompression, "bodyCompression", "bodyCompression", .bodyCompression),
        row(\.clockSkewThreshold, "clockSkewThreshold", "clockSkewThresholdMs", .milliseconds, bounds: .clockSkewThreshold),
        row(\.watchesNetwork, "watchesNetwork", "watchesNetwork", .bool),
        row(\.appVersion, "appVersion", "appVersion", .string),
        row(\.appBuild, "appBuild", "appBuild", .string),
        row(\.appNamespace, "appNamespace", "appNamespace", .optional(.string)),
        row(\.sessionTimeout, "sessionTimeout", "sessionTimeoutMs", .milliseconds, bounds: .sessionTimeout),
        row(\.sessionTracking, "sessionTracking", "sessionTracking", .sessionTracking),
        row(\.tracksAppLifecycle, "tracksAppLifecycle", "tracksAppLifecycle", .bool),
        // SPEC H1: a closure, no C key (C sets its hook with outbox_set_before_store); hooks differ by their box.
        ConfigurationField(name: "beforeStore", cKey: nil, applies: .beforeStore, bounds: nil, keyPath: \.beforeStoreHook,
                           differs: { $0.beforeStoreHook !== $1.beforeStoreHook }, decode: nil, encode: nil, measure: nil),
        row(\.testingIDSeed, "testingIDSeed", nil, nil),
        row(\.testingAllowsValuesBelowBounds, "testingAllowsValuesBelowBounds", "testingAllowsValuesBelowBounds", .bool),
    ]

    /// A field of a comparable value, read from C JSON by `codec` (nil: no C key).
    private static func row<Value: Equatable>(
        _ keyPath: WritableKeyPath<Configuration, Value> & Sendable, _ name: String, _ cKey: String?, _ codec: FieldCodec<Value>?,
        applies: ConfigurationApplyTargets = []
    ) -> ConfigurationField {
        let differs: @Sendable (Configuration, Configuration) -> Bool = { $0[keyPath: keyPath] != $1[keyPath: keyPath] }
        var decode: (@Sendable (JSONValue, inout Configuration) throws(ConfigurationValueError) -> Void)?
        var encode: (@Sendable (Configuration) -> JSONValue)?
        if let codec {
            let key = cKey ?? name
            let decodeValue = codec.decode
            decode = { (value: JSONValue, configuration: inout Configuration) throws(ConfigurationValueError) -> Void in
                configuration[keyPath: keyPath] = try decodeValue(value, key)
            }
            if let encodeValue = codec.encode {
                encode = { (configuration: Configuration) -> JSONValue in encodeValue(configuration[keyPath: keyPath]) }
            }
        }
        return ConfigurationField(name: name, cKey: cKey, applies: applies, bounds: nil, keyPath: keyPath,
                                  differs: differs, decode: decode, encode: encode, measure: nil)
    }

    /// A numeric field checked against `bounds` by `validate()`.
    private static func row<Value: Equatable & BoundedValue>(
        _ keyPath: WritableKeyPath<Configuration, Value> & Sendable, _ name: String, _ cKey: String?, _ codec: FieldCodec<Value>?,
        applies: ConfigurationApplyTargets = [], bounds: BoundedField
    ) -> ConfigurationField {
        let plain = row(keyPath, name, cKey, codec, applies: applies)
        return ConfigurationField(name: name, cKey: cKey, applies: applies, bounds: bounds, keyPath: keyPath,
                                  differs: plain.differs, decode: plain.decode, encode: plain.encode,
                                  measure: { $0[keyPath: keyPath].measured(in: bounds.unit) })
    }

    /// A field fixed at start with no C key, compared by `differs`.
    private static func explicit<Value>(_ keyPath: KeyPath<Configuration, Value> & Sendable, _ name: String,
                                        _ differs: @escaping @Sendable (Configuration, Configuration) -> Bool) -> ConfigurationField {
        ConfigurationField(name: name, cKey: nil, applies: [], bounds: nil, keyPath: keyPath, differs: differs,
                           decode: nil, encode: nil, measure: nil)
    }

    /// SPEC R8: the fields `OutboxEngine.update` may change.
    public static var changeableFields: [String] { schema.filter(\.changeable).map(\.name) }

    /// The names of the fields fixed at start that differ from `other`.
    func fixedFieldsChanged(from other: Configuration) -> [String] {
        Self.schema.filter { !$0.changeable && $0.differs(self, other) }.map(\.name)
    }

    /// SPEC R8: what an update from `previous` to this configuration reaches: the union of its changed fields' targets.
    func applyTargets(changedFrom previous: Configuration) -> ConfigurationApplyTargets {
        Self.schema.filter { $0.differs(self, previous) }.reduce(into: []) { $0.formUnion($1.applies) }
    }

    /// Sets the field of C key `key` from its JSON value; nil when no row has that key.
    package mutating func decode(_ key: String, _ value: JSONValue) throws(ConfigurationValueError) -> Bool {
        guard let decode = Self.schema.first(where: { $0.cKey == key })?.decode else { return false }
        try decode(value, &self)
        return true
    }

    /// `validate()`'s check of every bounded row, in the table's order; the error names the field, its bounds and the value.
    func checkBounds() throws(OutboxError) {
        for field in Self.schema {
            guard let bounds = field.bounds, let measure = field.measure else { continue }
            for value in measure(self) {
                // SPEC C6: 0 or less is manual dispatch; only a period is bounded.
                if bounds == .dispatchInterval && value <= 0 { continue }
                try check(bounds, value, maximum: bounds.maximum(in: self), name: bounds.messageName)
            }
        }
    }
}

extension RunMode {
    /// The host's loop of `.hostLoop`, else nil.
    var loopPointer: UnsafeMutableRawPointer? {
        if case .hostLoop(let loop) = self { return loop }
        return nil
    }
}
