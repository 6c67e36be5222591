import Glibc
import Logging
import Outbox

// A refused configuration is a `CFailure` whose code is OUTBOX_EINVAL (not JSON, a wrong type) or OUTBOX_ECONFIG
// (a key unknown, missing, fixed at start or out of bounds).

/// SPEC E3: the configuration JSON of `outbox_open` and `outbox_update`. Keys are the Swift `Configuration`'s
/// field names, durations in milliseconds with an `Ms` suffix, sizes in bytes, enums as strings; `logLevel` picks
/// the swift-log level of the engine's log handler. `runMode`, `logger` and `clock` have no key: the C caller
/// chooses the loop through `outbox_open`'s argument and the log handler through `outbox_set_log_handler`.
enum ConfigDecoder {
    /// Every key `outbox_open` accepts: the schema's C keys, and `logLevel` for the log handler.
    static let keys: [String] = Configuration.schema.compactMap(\.cKey) + ["logLevel"]
    /// SPEC R8: the keys `outbox_update` accepts.
    static let updateKeys: Set<String> = Set(Configuration.schema.filter(\.changeable).compactMap(\.cKey))

    /// The members of a configuration object, or why the text is not one.
    static func members(_ text: UnsafePointer<CChar>?) throws(CFailure) -> [(key: String, value: JSONValue)] {
        guard let text else { throw CFailure(code: invalid, message: "the configuration JSON is NULL") }
        let length = strlen(text)
        let document: JSONValue
        do {
            var scanner = JSONScanner(UnsafeBufferPointer(start: UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), count: length))
            document = try scanner.document()
        } catch {
            throw CFailure(code: invalid, message: "configuration: \(error.message)")
        }
        guard case .object(let members) = document else {
            throw CFailure(code: invalid, message: "the configuration must be a JSON object, got \(document.typeName)")
        }
        for member in members where !keys.contains(member.key) {
            throw CFailure(code: configError, message: "unknown configuration key '\(member.key)'")
        }
        return members
    }

    /// Keys that belong to one destination (SPEC D1), the C keys of the fields its spec owns: given with another,
    /// they are refused by name.
    static let destinationKeys: [String: Destination] = Dictionary(uniqueKeysWithValues: Destination.allCases.flatMap { destination in
        destination.spec.fields.compactMap { field in Configuration.schema.first { $0.name == field }?.cKey }.map { ($0, destination) }
    })

    /// Refuses a key of another destination than the one `members` choose (App Center when none is named).
    static func checkDestinationKeys(_ members: [(key: String, value: JSONValue)], destination: Destination) throws(CFailure) {
        for member in members {
            if let owner = destinationKeys[member.key], owner != destination {
                throw CFailure(code: configError, message: "configuration key '\(member.key)' belongs to the \(owner) destination, not to \(destination)")
            }
        }
    }

    /// `outbox_open`'s configuration, and the log level its logger gets. `storePath` is required.
    static func configuration(_ members: [(key: String, value: JSONValue)]) throws(CFailure) -> (Configuration, Logger.Level) {
        guard let storePath = members.first(where: { $0.key == "storePath" }) else {
            throw CFailure(code: configError, message: "missing configuration key 'storePath' (the SQLite file of the engine)")
        }
        var configuration = Configuration(storePath: try string(storePath.value, storePath.key))
        var level = Logger.Level.warning
        for (key, value) in members where key != "storePath" {
            if key == "logLevel" {
                let name = try string(value, key)
                guard let parsed = Logger.Level(rawValue: name) else {
                    throw CFailure(code: configError, message: "logLevel must be one of trace, debug, info, notice, warning, error, critical; got '\(name)'")
                }
                level = parsed
            } else {
                try apply(key, value, to: &configuration)
            }
        }
        try checkDestinationKeys(members, destination: configuration.destination)
        return (configuration, level)
    }

    /// Sets one field. Bounds are left to `Configuration.validate()`, which names the field and its range.
    static func apply(_ key: String, _ value: JSONValue, to c: inout Configuration) throws(CFailure) {
        switch key {
        case "storePath": c.storePath = try string(value, key)
        case "maxStorageSize": c.maxStorageSize = try int(value, key)
        case "maxLogCount": c.maxLogCount = try optional(value) { v throws(CFailure) in try int(v, key) }
        case "maxLogAgeMs": c.maxLogAge = try duration(value, key)
        case "maxDistinctEventNames": c.maxDistinctEventNames = try int(value, key)
        case "groupCommitWindowMs": c.groupCommitWindow = try duration(value, key)
        case "intakeCapacity": c.intakeCapacity = try int(value, key)
        case "endpoint": c.endpoint = try optional(value) { v throws(CFailure) in try string(v, key) }
        case "appSecret": c.appSecret = try string(value, key)
        case "apiKey": c.apiKey = try string(value, key)
        case "writeKey": c.writeKey = try string(value, key)
        case "segmentProfile":
            let name = try string(value, key)
            do throws(OutboxError) {
                c.segmentProfile = try SegmentProfile(name: name)
            } catch {
                throw CFailure(code: configError, message: "\(error)")
            }
        case "destination":
            let name = try string(value, key)
            do throws(OutboxError) {
                c.destination = try Destination(name: name)
            } catch {
                throw CFailure(code: configError, message: "\(error)")
            }
        case "otlpEncoding":
            let name = try string(value, key)
            do throws(OutboxError) {
                c.otlpEncoding = try OTLPEncoding(name: name)
            } catch {
                throw CFailure(code: configError, message: "\(error)")
            }
        case "headers":
            guard case .object(let members) = value else { throw wrongType(key, "an object of strings (header name: value)", value) }
            var headers: [HeaderField] = []
            for member in members {
                guard case .string(let text) = member.value else {
                    throw CFailure(code: invalid, message: "configuration key 'headers': the value of header '\(member.key)' must be a string, got \(member.value.typeName)")
                }
                headers.append(HeaderField(member.key, text))
            }
            c.headers = headers
        case "batchSize": c.batchSize = try int(value, key)
        case "transmissionIntervalMs": c.transmissionInterval = try duration(value, key)
        case "criticalTransmissionIntervalMs": c.criticalTransmissionInterval = try duration(value, key)
        case "retryIntervalsMs":
            guard case .array(let items) = value else { throw wrongType(key, "an array of integers (ms)", value) }
            var intervals: [Duration] = []
            for item in items { intervals.append(try duration(item, key)) }
            c.retryIntervals = intervals
        case "maxRetryAfterMs": c.maxRetryAfter = try duration(value, key)
        case "probeIntervalMs": c.probeInterval = try optional(value) { v throws(CFailure) in try duration(v, key) }
        case "recoveryProbe":
            // null: R3/R5 alone (App Center's behaviour); an object: R9–R10 with its intervals, each optional.
            c.recoveryProbe = try optional(value) { v throws(CFailure) in
                guard case .object(let members) = v else { throw wrongType(key, "null or an object of intervals in ms", v) }
                var probe = RecoveryProbe()
                for member in members {
                    let name = "\(key).\(member.key)"
                    switch member.key {
                    case "initialIntervalMs": probe.initialInterval = try duration(member.value, name)
                    case "maxIntervalMs": probe.maxInterval = try duration(member.value, name)
                    case "longFaultIntervalMs": probe.longFaultInterval = try duration(member.value, name)
                    case "longFaultAfterMs": probe.longFaultAfter = try duration(member.value, name)
                    case "drainJitterMs": probe.drainJitter = try duration(member.value, name)
                    default:
                        throw CFailure(code: invalid, message: "configuration key '\(key)': unknown member '\(member.key)' (initialIntervalMs, maxIntervalMs, longFaultIntervalMs, longFaultAfterMs, drainJitterMs)")
                    }
                }
                return probe
            }
        case "dispatchIntervalMs": c.dispatchInterval = try optional(value) { v throws(CFailure) in try duration(v, key) }
        case "requestTimeoutMs": c.requestTimeout = try duration(value, key)
        case "caFile": c.caFile = try optional(value) { v throws(CFailure) in try string(v, key) }
        case "storeKeyFile":
            c.storeKey = try optional(value) { v throws(CFailure) in
                let path = try string(v, key)
                do throws(OutboxError) {
                    return try StoreKey(contentsOfFile: path)
                } catch {
                    throw CFailure(code: configError, message: error.description)
                }
            }
        case "clientCertificate": c.clientCertificate = try optional(value) { v throws(CFailure) in try string(v, key) }
        case "clientKey": c.clientKey = try optional(value) { v throws(CFailure) in try string(v, key) }
        case "pinnedPublicKey": c.pinnedPublicKey = try optional(value) { v throws(CFailure) in try string(v, key) }
        case "bodyCompression":
            let text = try string(value, key)
            guard let compression = BodyCompression(argument: text) else {
                throw CFailure(code: configError, message: "bodyCompression must be \"fast\" or \"zlib:1\" … \"zlib:9\", got '\(text)'")
            }
            c.bodyCompression = compression
        case "clockSkewThresholdMs": c.clockSkewThreshold = try duration(value, key)
        case "watchesNetwork": c.watchesNetwork = try bool(value, key)
        case "appVersion": c.appVersion = try string(value, key)
        case "appBuild": c.appBuild = try string(value, key)
        case "appNamespace": c.appNamespace = try optional(value) { v throws(CFailure) in try string(v, key) }
        case "sessionTimeoutMs": c.sessionTimeout = try duration(value, key)
        case "sessionTracking":
            switch try string(value, key) {
            case "automatic": c.sessionTracking = .automatic
            case "manual": c.sessionTracking = .manual
            case let other: throw CFailure(code: configError, message: "sessionTracking must be \"automatic\" or \"manual\", got '\(other)'")
            }
        case "tracksAppLifecycle": c.tracksAppLifecycle = try bool(value, key)
        case "testingAllowsValuesBelowBounds": c.testingAllowsValuesBelowBounds = try bool(value, key)
        default: throw CFailure(code: configError, message: "unknown configuration key '\(key)'")
        }
    }

    // MARK: - Types

    private static let invalid: Int32 = -1
    private static let configError: Int32 = -2

    private static func wrongType(_ key: String, _ expected: String, _ value: JSONValue) -> CFailure {
        CFailure(code: invalid, message: "configuration key '\(key)' must be \(expected), got \(value.typeName)")
    }

    private static func string(_ value: JSONValue, _ key: String) throws(CFailure) -> String {
        guard case .string(let text) = value else { throw wrongType(key, "a string", value) }
        return text
    }

    private static func int(_ value: JSONValue, _ key: String) throws(CFailure) -> Int {
        guard case .integer(let number) = value else { throw wrongType(key, "an integer", value) }
        return Int(number)
    }

    private static func bool(_ value: JSONValue, _ key: String) throws(CFailure) -> Bool {
        guard case .bool(let flag) = value else { throw wrongType(key, "true or false", value) }
        return flag
    }

    private static func duration(_ value: JSONValue, _ key: String) throws(CFailure) -> Duration {
        guard case .integer(let ms) = value else { throw wrongType(key, "an integer of milliseconds", value) }
        return .milliseconds(ms)
    }

    private static func optional<T>(_ value: JSONValue, _ body: (JSONValue) throws(CFailure) -> T) throws(CFailure) -> T? {
        if case .null = value { return nil }
        return try body(value)
    }
}
