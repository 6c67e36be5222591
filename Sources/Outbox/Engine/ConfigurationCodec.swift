import FoundationEssentials

/// How one field's value is read from the C configuration's JSON and written back (SPEC E3): durations as integer
/// milliseconds, enums by name, optionals as null. The refusals are `ConfigDecoder`'s messages, word for word.
struct FieldCodec<Value>: Sendable {
    let decode: @Sendable (JSONValue, String) throws(ConfigurationValueError) -> Value
    /// nil: the JSON names something the engine reads rather than the value (a key file).
    let encode: (@Sendable (Value) -> JSONValue)?

    static func wrongType(_ key: String, _ expected: String, _ value: JSONValue) -> ConfigurationValueError {
        ConfigurationValueError(wrongType: true, message: "configuration key '\(key)' must be \(expected), got \(value.typeName)")
    }

    /// null, or the value `inner` reads.
    static func optional<Wrapped>(_ inner: FieldCodec<Wrapped>) -> FieldCodec<Wrapped?> where Value == Wrapped? {
        let innerDecode = inner.decode
        let decode: @Sendable (JSONValue, String) throws(ConfigurationValueError) -> Wrapped? = { value, key throws(ConfigurationValueError) in
            if case .null = value { return nil }
            return try innerDecode(value, key)
        }
        guard let innerEncode = inner.encode else { return FieldCodec<Wrapped?>(decode: decode, encode: nil) }
        let encode: @Sendable (Wrapped?) -> JSONValue = { wrapped in
            guard let wrapped else { return .null }
            return innerEncode(wrapped)
        }
        return FieldCodec<Wrapped?>(decode: decode, encode: encode)
    }

    /// A name that `parse` reads; its refusal (an `OutboxError` that lists the names) is the message.
    static func named(_ parse: @escaping @Sendable (String) throws(OutboxError) -> Value,
                      name: @escaping @Sendable (Value) -> String) -> FieldCodec<Value> {
        FieldCodec(
            decode: { value, key throws(ConfigurationValueError) in
                let text = try FieldCodec<String>.string.decode(value, key)
                do throws(OutboxError) {
                    return try parse(text)
                } catch {
                    throw ConfigurationValueError(wrongType: false, message: "\(error)")
                }
            },
            encode: { .string(name($0)) })
    }
}

extension FieldCodec where Value == String {
    static var string: Self {
        Self(decode: { value, key throws(ConfigurationValueError) in
            guard case .string(let text) = value else { throw wrongType(key, "a string", value) }
            return text
        }, encode: { .string($0) })
    }
}

extension FieldCodec where Value == Int {
    static var integer: Self {
        Self(decode: { value, key throws(ConfigurationValueError) in
            guard case .integer(let number) = value else { throw wrongType(key, "an integer", value) }
            return Int(number)
        }, encode: { .integer(Int64($0)) })
    }
}

extension FieldCodec where Value == Bool {
    static var bool: Self {
        Self(decode: { value, key throws(ConfigurationValueError) in
            guard case .bool(let flag) = value else { throw wrongType(key, "true or false", value) }
            return flag
        }, encode: { .bool($0) })
    }
}

extension FieldCodec where Value == Duration {
    /// An integer of milliseconds (the key's `Ms` suffix says so).
    static var milliseconds: Self {
        Self(decode: { value, key throws(ConfigurationValueError) in
            guard case .integer(let ms) = value else { throw wrongType(key, "an integer of milliseconds", value) }
            return .milliseconds(ms)
        }, encode: { .integer($0.milliseconds) })
    }
}

extension FieldCodec where Value == [Duration] {
    static var millisecondsList: Self {
        Self(decode: { value, key throws(ConfigurationValueError) in
            guard case .array(let items) = value else { throw wrongType(key, "an array of integers (ms)", value) }
            var intervals: [Duration] = []
            for item in items { intervals.append(try FieldCodec<Duration>.milliseconds.decode(item, key)) }
            return intervals
        }, encode: { .array($0.map { .integer($0.milliseconds) }) })
    }
}

extension FieldCodec where Value == [HeaderField] {
    /// An object of strings, header name to value; the names are checked by `validate()`.
    static var headers: Self {
        Self(decode: { value, key throws(ConfigurationValueError) in
            guard case .object(let members) = value else { throw wrongType(key, "an object of strings (header name: value)", value) }
            var headers: [HeaderField] = []
            for member in members {
                guard case .string(let text) = member.value else {
                    throw ConfigurationValueError(wrongType: true, message: "configuration key '\(key)': the value of header '\(member.key)' must be a string, got \(member.value.typeName)")
                }
                headers.append(HeaderField(member.key, text))
            }
            return headers
        }, encode: { .object($0.map { (key: $0.name, value: .string($0.value)) }) })
    }
}

extension FieldCodec where Value == [String] {
    /// SPEC H2–H3: an array of names (`include`, `exclude`, `redact`); the names are checked by `validate()`.
    static var names: Self {
        Self(decode: { value, key throws(ConfigurationValueError) in
            guard case .array(let items) = value else { throw wrongType(key, "an array of names", value) }
            var names: [String] = []
            for item in items {
                guard case .string(let name) = item else {
                    throw ConfigurationValueError(wrongType: true, message: "configuration key '\(key)' must hold names (strings), got \(item.typeName)")
                }
                names.append(name)
            }
            return names
        }, encode: { .array($0.map { .string($0) }) })
    }
}

extension FieldCodec where Value == [String: Double] {
    /// SPEC H4: an object, name → rate (a number; 0 and 1 may be written as integers); the rates are checked by
    /// `validate()`.
    static var rates: Self {
        Self(decode: { value, key throws(ConfigurationValueError) in
            guard case .object(let members) = value else { throw wrongType(key, "an object of rates (name: 0 to 1)", value) }
            var rates: [String: Double] = [:]
            for member in members {
                switch member.value {
                case .integer(let number): rates[member.key] = Double(number)
                case .double(let number): rates[member.key] = number
                default:
                    throw ConfigurationValueError(wrongType: true, message: "configuration key '\(key)': the rate of '\(member.key)' must be a number from 0 to 1, got \(member.value.typeName)")
                }
            }
            return rates
        }, encode: { rates in .object(rates.sorted { $0.key < $1.key }.map { (key: $0.key, value: .double($0.value)) }) })
    }
}

extension FieldCodec where Value == RecoveryProbe? {
    /// null: R3/R5 alone (App Center's behaviour); an object: R9–R10 with its intervals, each optional.
    static var recoveryProbe: Self {
        let members: [(key: String, path: WritableKeyPath<RecoveryProbe, Duration> & Sendable)] = [
            ("initialIntervalMs", \.initialInterval), ("maxIntervalMs", \.maxInterval),
            ("longFaultIntervalMs", \.longFaultInterval), ("longFaultAfterMs", \.longFaultAfter), ("drainJitterMs", \.drainJitter)]
        return .optional(FieldCodec<RecoveryProbe>(decode: { value, key throws(ConfigurationValueError) in
            guard case .object(let given) = value else { throw wrongType(key, "null or an object of intervals in ms", value) }
            var probe = RecoveryProbe()
            for member in given {
                guard let known = members.first(where: { $0.key == member.key }) else {
                    throw ConfigurationValueError(wrongType: true, message: "configuration key '\(key)': unknown member '\(member.key)' (\(members.map(\.key).joined(separator: ", ")))")
                }
                probe[keyPath: known.path] = try FieldCodec<Duration>.milliseconds.decode(member.value, "\(key).\(member.key)")
            }
            return probe
        }, encode: { probe in .object(members.map { (key: $0.key, value: .integer(probe[keyPath: $0.path].milliseconds)) }) }))
    }
}

extension FieldCodec where Value == StoreKey? {
    /// The path of a key file (SPEC K1), read when the configuration is: the JSON never holds the key itself.
    static var storeKeyFile: Self {
        .optional(FieldCodec<StoreKey>(decode: { value, key throws(ConfigurationValueError) in
            let path = try FieldCodec<String>.string.decode(value, key)
            do throws(OutboxError) {
                return try StoreKey(contentsOfFile: path)
            } catch {
                throw ConfigurationValueError(wrongType: false, message: error.description)
            }
        }, encode: nil))
    }
}

extension FieldCodec where Value == BodyCompression {
    static var bodyCompression: Self {
        Self(decode: { value, key throws(ConfigurationValueError) in
            let text = try FieldCodec<String>.string.decode(value, key)
            guard let compression = BodyCompression(argument: text) else {
                throw ConfigurationValueError(wrongType: false, message: "bodyCompression must be \"fast\" or \"zlib:1\" … \"zlib:9\", got '\(text)'")
            }
            return compression
        }, encode: { compression in
            switch compression {
            case .fast: .string("fast")
            case .zlib(let level): .string("zlib:\(level)")
            }
        })
    }
}

extension FieldCodec where Value == SessionTracking {
    static var sessionTracking: Self {
        Self(decode: { value, key throws(ConfigurationValueError) in
            switch try FieldCodec<String>.string.decode(value, key) {
            case "automatic": return .automatic
            case "manual": return .manual
            case let other:
                throw ConfigurationValueError(wrongType: false, message: "sessionTracking must be \"automatic\" or \"manual\", got '\(other)'")
            }
        }, encode: { .string($0 == .automatic ? "automatic" : "manual") })
    }
}

/// A value `validate()` checks against a `BoundedField`, in the field's unit: none for an unset optional, each
/// item of a list.
protocol BoundedValue {
    func measured(in unit: ConfigurationUnit) -> [Int64]
}

extension Int: BoundedValue {
    func measured(in unit: ConfigurationUnit) -> [Int64] { [Int64(self)] }
}

extension Duration: BoundedValue {
    func measured(in unit: ConfigurationUnit) -> [Int64] { [unit == .seconds ? components.seconds : milliseconds] }
}

extension Optional: BoundedValue where Wrapped: BoundedValue {
    func measured(in unit: ConfigurationUnit) -> [Int64] { self?.measured(in: unit) ?? [] }
}

extension Array: BoundedValue where Element: BoundedValue {
    func measured(in unit: ConfigurationUnit) -> [Int64] { flatMap { $0.measured(in: unit) } }
}

extension FieldCodec where Value == [NamedDestination] {
    /// SPEC D15: an array of objects, each `name` and that destination's keys — the single destination's own C keys
    /// (`destination`, `endpoint`, credentials, `headers`, TLS), read by their rows.
    static var destinations: Self {
        Self(decode: { value, key throws(ConfigurationValueError) in
            guard case .array(let elements) = value else { throw wrongType(key, "an array of destination objects", value) }
            var list: [NamedDestination] = []
            for (index, element) in elements.enumerated() {
                let place = "\(key)[\(index)]"
                guard case .object(let members) = element else { throw wrongType(place, "an object", element) }
                var scratch = Configuration(storePath: "-")
                var name: String?
                for member in members {
                    if member.key == "name" {
                        name = try FieldCodec<String>.string.decode(member.value, "\(place).name")
                        continue
                    }
                    guard let row = Configuration.schema.first(where: { $0.cKey == member.key }),
                          Configuration.destinationFieldNames.contains(row.name), let decode = row.decode else {
                        throw ConfigurationValueError(wrongType: false, message: "configuration key '\(place).\(member.key)' is not a destination's key (\(Configuration.destinationCKeys.joined(separator: ", ")))")
                    }
                    do throws(ConfigurationValueError) {
                        try decode(member.value, &scratch)
                    } catch {
                        throw ConfigurationValueError(wrongType: error.wrongType,
                                                      message: error.message.replacing("'\(member.key)'", with: "'\(place).\(member.key)'"))
                    }
                }
                list.append(NamedDestination(name: name, from: scratch))
            }
            return list
        }, encode: { list in
            .array(list.map { named in
                var scratch = Configuration(storePath: "-")
                named.apply(to: &scratch)
                var members: [(key: String, value: JSONValue)] = named.name.map { [("name", .string($0))] } ?? []
                for row in Configuration.schema where Configuration.destinationFieldNames.contains(row.name) {
                    if let key = row.cKey, let encode = row.encode { members.append((key, encode(scratch))) }
                }
                return .object(members)
            })
        })
    }
}

extension Configuration {
    /// The fields a destination of `destinations` has of its own (SPEC D15): the single destination's wire,
    /// endpoint, credentials, headers, TLS identity and policy (H2–H4). Everything else is the engine's.
    static let destinationFieldNames: Set<String> = [
        "endpoint", "appSecret", "destination", "apiKey", "writeKey", "segmentProfile", "otlpEncoding", "projectToken",
        "serviceAccountUser", "serviceAccountSecret", "projectId", "measurementId", "apiSecret", "headers", "caFile",
        "clientCertificate", "clientKey", "pinnedPublicKey", "include", "exclude", "redact", "sample",
    ]

    static var destinationCKeys: [String] {
        ["name"] + schema.filter { destinationFieldNames.contains($0.name) }.compactMap(\.cKey)
    }
}
