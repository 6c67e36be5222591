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

    /// Keys that belong to destinations (SPEC D1), the C keys of the fields their specs own (`apiKey`: PostHog's and
    /// Amplitude's): given with another, they are refused by name.
    static let destinationKeys: [String: [Destination]] = Dictionary(Destination.allCases.flatMap { destination in
        destination.spec.fields.compactMap { field in Configuration.schema.first { $0.name == field }?.cKey }.map { ($0, [destination]) }
    }, uniquingKeysWith: +)

    /// Refuses a key of another destination than the one `members` choose (App Center when none is named); `place`
    /// is where `members` are (`destinations[1].`, SPEC D15), before each key named.
    static func checkDestinationKeys(_ members: [(key: String, value: JSONValue)], destination: Destination,
                                     place: String = "") throws(CFailure) {
        for member in members {
            if let owners = destinationKeys[member.key], !owners.contains(destination) {
                let named = owners.map { "the \($0) destination" }.joined(separator: " and ")
                throw CFailure(code: configError, message: "configuration key '\(place)\(member.key)' belongs to \(named), not to \(destination)")
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
        // SPEC D15: each destination of the list likewise, by its own wire.
        if let list = members.first(where: { $0.key == "destinations" }), case .array(let elements) = list.value {
            for (index, (element, named)) in zip(elements, configuration.destinations).enumerated() {
                guard case .object(let keys) = element else { continue }
                try checkDestinationKeys(keys, destination: named.destination, place: "destinations[\(index)].")
            }
        }
        return (configuration, level)
    }

    /// Sets one field by its row of `Configuration.schema`. Bounds are left to `Configuration.validate()`, which names
    /// the field and its range.
    static func apply(_ key: String, _ value: JSONValue, to c: inout Configuration) throws(CFailure) {
        let known: Bool
        do throws(ConfigurationValueError) {
            known = try c.decode(key, value)
        } catch {
            throw CFailure(code: error.wrongType ? invalid : configError, message: error.message)
        }
        guard known else { throw CFailure(code: configError, message: "unknown configuration key '\(key)'") }
    }

    // MARK: - Types

    private static let invalid: Int32 = -1
    private static let configError: Int32 = -2

    private static func string(_ value: JSONValue, _ key: String) throws(CFailure) -> String {
        guard case .string(let text) = value else {
            throw CFailure(code: invalid, message: "configuration key '\(key)' must be a string, got \(value.typeName)")
        }
        return text
    }
}
