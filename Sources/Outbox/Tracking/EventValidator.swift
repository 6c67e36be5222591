import FoundationEssentials

/// Validates an event against SPEC T2–T3 and writes the event-specific part of its JSON
/// (`"name":…,"typedProperties":[…]`). Pure: runs on the caller's thread, so that errors reach the caller.
struct EventValidator {
    static let maxNameLength = 256
    static let maxProperties = 20
    static let maxPropertyLength = 125

    /// What validation changed, for the warnings SPEC T2–T3 asks for.
    struct Adjustments: Equatable {
        var nameTruncated = false
        var droppedKeys: [String] = []
        var truncatedKeys: [String] = []
        var truncatedValues: [String] = []
        var isEmpty: Bool { !nameTruncated && droppedKeys.isEmpty && truncatedKeys.isEmpty && truncatedValues.isEmpty }
    }

    struct Result {
        /// The stored name (truncated to 256 characters).
        var name: String
        /// `"name":"…"` and, when there are properties, `,"typedProperties":[…]`.
        var body: [UInt8]
        var adjustments: Adjustments
    }

    static func validate(name rawName: String, properties: [String: PropertyValue]) throws(OutboxError) -> Result {
        try validate(name: rawName, properties: properties) { name, body, adjustments in
            Result(name: name, body: Array(body), adjustments: adjustments)
        }
    }

    /// Validates the event and runs `then` with its stored name, its JSON (valid during the call only) and what
    /// validation changed. The JSON is written on the stack: the caller's thread allocates no buffer for the usual
    /// event (the intake copies the bytes into its own).
    // Inlined into `trackEvent`, whose closure then needs no context: a context would retain and release the
    // engine, an object all callers share, bouncing its reference count between their cores.
    @inline(__always)
    static func validate<R>(name rawName: String, properties: [String: PropertyValue],
                            _ then: (_ name: String, _ body: UnsafeRawBufferPointer, _ adjustments: Adjustments) throws(OutboxError) -> R)
        throws(OutboxError) -> R {
        var adjustments = Adjustments()
        let name = try checkedName(rawName, &adjustments)
        let category = categoryPath(name)
        if properties.isEmpty {
            return try write(name: name, category: category,
                             properties: UnsafeBufferPointer<(key: String, value: PropertyValue)>(start: nil, count: 0),
                             adjustments: &adjustments, then)
        }
        return try withSorted(properties) { sorted throws(OutboxError) in
            try write(name: name, category: category, properties: sorted, adjustments: &adjustments, then)
        }
    }

    /// SPEC T2: an empty name is refused; a longer one than 256 characters is cut, with a warning.
    @inline(__always)
    private static func checkedName(_ rawName: String, _ adjustments: inout Adjustments) throws(OutboxError) -> String {
        guard !rawName.isEmpty else { throw .emptyEventName }
        guard exceeds(rawName, maxNameLength) else { return rawName }
        adjustments.nameTruncated = true
        return String(rawName.prefix(maxNameLength))
    }

    /// `validate` for properties already sorted by key, each key once (the C interface parses them so): no
    /// dictionary to build, hash and sort again on the caller's thread.
    @inline(__always)
    static func validate<R>(name rawName: String, sortedProperties: UnsafeBufferPointer<(key: String, value: ScannedPropertyValue)>,
                            _ then: (_ name: String, _ body: UnsafeRawBufferPointer, _ adjustments: Adjustments) throws(OutboxError) -> R)
        throws(OutboxError) -> R {
        var adjustments = Adjustments()
        let name = try checkedName(rawName, &adjustments)
        return try write(name: name, category: categoryPath(name), properties: sortedProperties, adjustments: &adjustments, then)
    }

    /// Writes the body of an event into a buffer sized for it: no escapes, nothing truncated, it is written there
    /// whole (a longer one moves on to the heap).
    // Inlined, as `withSorted`: within one function the optimizer drops most retains and releases of what the
    // closures capture, which is most of what a call costs beyond the copy.
    @inline(__always)
    private static func write<R, Value: SortedPropertyValue>(name: String, category: [String]?,
                                                             properties sorted: UnsafeBufferPointer<(key: String, value: Value)>,
                                 adjustments: inout Adjustments,
                                 _ then: (String, UnsafeRawBufferPointer, Adjustments) throws(OutboxError) -> R) throws(OutboxError) -> R {
        // `"name":"…"`, and the category path: the name's bytes again, each part quoted and followed by a comma.
        var capacity = 9 + name.utf8.count
        if let category { capacity += 14 + name.utf8.count + 3 * category.count }
        if !sorted.isEmpty { capacity += typedPropertiesKey.utf8CodeUnitCount + Value.bodySize(of: sorted) }
        return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer throws(OutboxError) in
            var writer = JSONWriter(buffer: buffer)
            writer.raw("\"name\":")
            writer.string(name)
            if let category {
                writer.raw(",\"category\":[")
                for (index, part) in category.enumerated() {
                    if index > 0 { writer.raw(UInt8(ascii: ",")) }
                    writer.string(part)
                }
                writer.raw(UInt8(ascii: "]"))
            }
            if !sorted.isEmpty {
                try Value.writeSorted(sorted, key: typedPropertiesKey, into: &writer, adjustments: &adjustments)
            }
            return try writer.withBytes { body throws(OutboxError) in try then(name, body, adjustments) }
        }
    }

    private static let typedPropertiesKey: StaticString = ",\"typedProperties\":["

    /// Writes typed properties, keeping the first 20 in key order (deterministic), truncating long keys and
    /// string values, refusing non-finite numbers. Also used for user properties.
    static func writeProperties(_ properties: [String: PropertyValue], key: StaticString, into writer: inout JSONWriter,
                                adjustments: inout Adjustments) throws(OutboxError) {
        try withSorted(properties) { sorted throws(OutboxError) in
            writer.reserve(key.utf8CodeUnitCount + bodySize(of: sorted))
            try writeSorted(sorted, key: key, into: &writer, adjustments: &adjustments)
        }
    }

    /// Runs `body` with the properties sorted by key, in a temporary buffer (on the stack for the usual handful
    /// of properties): this runs on the caller's thread for every event, and each heap allocation there shows in
    /// the slowest calls.
    @inline(__always)
    private static func withSorted<R>(_ properties: [String: PropertyValue],
                                      _ body: (UnsafeBufferPointer<(key: String, value: PropertyValue)>) throws(OutboxError) -> R)
        throws(OutboxError) -> R {
        try withUnsafeTemporaryAllocation(of: (key: String, value: PropertyValue).self,
                                          capacity: properties.count) { buffer throws(OutboxError) in
            var count = 0
            for pair in properties {
                buffer.initializeElement(at: count, to: pair)
                count += 1
            }
            var sorted = UnsafeMutableBufferPointer(rebasing: buffer[0..<count])
            // One element at a time: the destroy of the concrete type, not the runtime's generic array destroy.
            defer { for index in sorted.indices { _ = sorted.moveElement(from: index) } }
            sorted.sort { $0.key < $1.key }
            return try body(UnsafeBufferPointer(sorted))
        }
    }

    /// The bytes `writeSorted` writes for the first 20 properties when nothing needs escaping and nothing is
    /// truncated (it writes fewer for truncated ones): enough for the usual event's buffer to be allocated once.
    fileprivate static func bodySize(of sorted: UnsafeBufferPointer<(key: String, value: PropertyValue)>) -> Int {
        // `{"type":"dateTime","name":"…","value":…},` at most, and the closing bracket.
        var size = 1
        for index in 0..<min(sorted.count, maxProperties) {
            size += 39 + sorted[index].key.utf8.count
            switch sorted[index].value {
            case .string(let text): size += 2 + text.utf8.count
            case .int: size += 20
            case .double: size += 24
            case .bool: size += 5
            case .date: size += 26
            }
        }
        return size
    }

    /// Seconds since 1970 of 0001-01-01T00:00:00.000Z through 9999-12-31T23:59:59.999Z: the dates a four-digit
    /// ISO 8601 `dateTime` can carry (App Center's). Outside it, or NaN, a date is refused like a NaN number.
    static let validDateRange = -62_135_596_800.0 ... 253_402_300_799.999

    fileprivate static func writeSorted(_ sorted: UnsafeBufferPointer<(key: String, value: PropertyValue)>, key: StaticString,
                                        into writer: inout JSONWriter, adjustments: inout Adjustments) throws(OutboxError) {
        // Reject before writing anything: a NaN anywhere refuses the whole event, even among dropped keys.
        for (key, value) in sorted {
            if case .double(let number) = value, !number.isFinite {
                throw .invalidPropertyValue(key: key, reason: number.isNaN ? "NaN is not a number JSON can carry" : "infinity is not allowed")
            }
            if case .date(let date) = value, !validDateRange.contains(date.timeIntervalSince1970) {
                throw .invalidPropertyValue(key: key, reason: "a date must lie in the years 0001–9999 (ISO 8601 dateTime)")
            }
        }
        if sorted.count > maxProperties { adjustments.droppedKeys = sorted[maxProperties...].map(\.key) }
        writer.raw(key)
        // Keys already written, kept only once a key had to be truncated (only truncated keys can collide).
        var seen: [String] = []
        var first = true
        for (key, value) in sorted.prefix(maxProperties) {
            var storedKey = key
            if exceeds(storedKey, maxPropertyLength) {
                storedKey = String(storedKey.prefix(maxPropertyLength))
                if adjustments.truncatedKeys.isEmpty {
                    // The first truncation: remember the keys written so far.
                    seen = sorted.prefix(maxProperties).prefix { $0.key != key }.map(\.key)
                }
                adjustments.truncatedKeys.append(key)
            }
            // Two keys equal after truncation: the first in key order wins.
            if !adjustments.truncatedKeys.isEmpty {
                guard !seen.contains(storedKey) else { adjustments.droppedKeys.append(key); continue }
                seen.append(storedKey)
            }
            if !first { writer.raw(UInt8(ascii: ",")) }
            first = false
            writer.raw("{\"type\":")
            switch value {
            case .string(let text):
                writer.raw("\"string\",\"name\":"); writer.string(storedKey)
                writer.raw(",\"value\":")
                if exceeds(text, maxPropertyLength) {
                    writer.string(String(text.prefix(maxPropertyLength)))
                    adjustments.truncatedValues.append(key)
                } else {
                    writer.string(text)
                }
            case .int(let number):
                writer.raw("\"long\",\"name\":"); writer.string(storedKey)
                writer.raw(",\"value\":"); writer.int(number)
            case .double(let number):
                writer.raw("\"double\",\"name\":"); writer.string(storedKey)
                writer.raw(",\"value\":"); writer.double(number)
            case .bool(let flag):
                writer.raw("\"boolean\",\"name\":"); writer.string(storedKey)
                writer.raw(",\"value\":"); writer.bool(flag)
            case .date(let date):
                writer.raw("\"dateTime\",\"name\":"); writer.string(storedKey)
                writer.raw(",\"value\":"); writer.timestamp(ms: Int64((date.timeIntervalSince1970 * 1000).rounded(.down)))
            }
            writer.raw(UInt8(ascii: "}"))
        }
        writer.raw(UInt8(ascii: "]"))
    }

    /// Whether `text` has more than `limit` characters. A UTF-8 length within the limit settles it without
    /// counting grapheme clusters (which dominated the caller's cost in profiles).
    @inline(__always) static func exceeds(_ text: String, _ limit: Int) -> Bool {
        let bytes = text.utf8.count
        if bytes <= limit { return false }
        return text.count > limit
    }

    /// SPEC A7 (Curio): `"A>B>C"` is also sent as the category path `["A","B","C"]`.
    static func categoryPath(_ name: String) -> [String]? {
        // A byte scan: String.contains(String) goes through Foundation's slow locale-aware search, and the UTF8View's
        // own `contains` iterates a byte at a time through the string's representation checks.
        let separator = UInt8(ascii: ">")
        guard name.utf8.withContiguousStorageIfAvailable({ $0.contains(separator) }) ?? name.utf8.contains(separator) else { return nil }
        let parts = name.split(separator: ">", omittingEmptySubsequences: false).map(String.init)
        guard parts.count <= 10, !parts.contains(where: \.isEmpty) else { return nil }
        return parts
    }
}

/// The property values `EventValidator` writes an event's properties from: the Swift API's `PropertyValue`, or the
/// C interface's `ScannedPropertyValue`. Each has its own `writeSorted` rather than one generic over both: the
/// generic one, specialized for `PropertyValue`, copied each value more often, and `trackEvent` measurably slowed.
protocol SortedPropertyValue {
    static func bodySize(of sorted: UnsafeBufferPointer<(key: String, value: Self)>) -> Int
    static func writeSorted(_ sorted: UnsafeBufferPointer<(key: String, value: Self)>, key: StaticString,
                            into writer: inout JSONWriter, adjustments: inout EventValidator.Adjustments) throws(OutboxError)
}

extension PropertyValue: SortedPropertyValue {
    @inline(__always)
    static func bodySize(of sorted: UnsafeBufferPointer<(key: String, value: PropertyValue)>) -> Int {
        EventValidator.bodySize(of: sorted)
    }

    @inline(__always)
    static func writeSorted(_ sorted: UnsafeBufferPointer<(key: String, value: PropertyValue)>, key: StaticString,
                            into writer: inout JSONWriter, adjustments: inout EventValidator.Adjustments) throws(OutboxError) {
        try EventValidator.writeSorted(sorted, key: key, into: &writer, adjustments: &adjustments)
    }
}

extension ScannedPropertyValue: SortedPropertyValue {
    static func bodySize(of sorted: UnsafeBufferPointer<(key: String, value: ScannedPropertyValue)>) -> Int {
        var size = 1
        for index in 0..<min(sorted.count, EventValidator.maxProperties) {
            size += 39 + sorted[index].key.utf8.count
            switch sorted[index].value {
            case .utf8(let text): size += 2 + text.count
            case .value(.string(let text)): size += 2 + text.utf8.count
            case .value(.int): size += 20
            case .value(.double): size += 24
            case .value(.bool): size += 5
            case .value(.date): size += 26
            }
        }
        return size
    }

    /// `EventValidator.writeSorted`'s rules, step for step (ScannedPropertyTests holds the two to the same bytes),
    /// for values read from a C caller's JSON: a string still in the caller's bytes is written from them when it is
    /// within T3's limit in bytes, hence in characters. A longer one may still be within it in characters, or must
    /// be cut at a character boundary: it becomes a String, and the String's rules decide.
    static func writeSorted(_ sorted: UnsafeBufferPointer<(key: String, value: ScannedPropertyValue)>, key: StaticString,
                            into writer: inout JSONWriter, adjustments: inout EventValidator.Adjustments) throws(OutboxError) {
        typealias Rules = EventValidator
        // Reject before writing anything: a NaN anywhere refuses the whole event, even among dropped keys.
        for (key, value) in sorted {
            if case .value(.double(let number)) = value, !number.isFinite {
                throw .invalidPropertyValue(key: key, reason: number.isNaN ? "NaN is not a number JSON can carry" : "infinity is not allowed")
            }
            if case .value(.date(let date)) = value, !Rules.validDateRange.contains(date.timeIntervalSince1970) {
                throw .invalidPropertyValue(key: key, reason: "a date must lie in the years 0001–9999 (ISO 8601 dateTime)")
            }
        }
        if sorted.count > Rules.maxProperties { adjustments.droppedKeys = sorted[Rules.maxProperties...].map(\.key) }
        writer.raw(key)
        // Keys already written, kept only once a key had to be truncated (only truncated keys can collide).
        var seen: [String] = []
        var first = true
        for (key, value) in sorted.prefix(Rules.maxProperties) {
            var storedKey = key
            if Rules.exceeds(storedKey, Rules.maxPropertyLength) {
                storedKey = String(storedKey.prefix(Rules.maxPropertyLength))
                if adjustments.truncatedKeys.isEmpty {
                    // The first truncation: remember the keys written so far.
                    seen = sorted.prefix(Rules.maxProperties).prefix { $0.key != key }.map(\.key)
                }
                adjustments.truncatedKeys.append(key)
            }
            // Two keys equal after truncation: the first in key order wins.
            if !adjustments.truncatedKeys.isEmpty {
                guard !seen.contains(storedKey) else { adjustments.droppedKeys.append(key); continue }
                seen.append(storedKey)
            }
            if !first { writer.raw(UInt8(ascii: ",")) }
            first = false
            writer.raw("{\"type\":")
            var text: String
            switch value {
            case .utf8(let bytes) where bytes.count <= Rules.maxPropertyLength:
                writer.raw("\"string\",\"name\":"); writer.string(storedKey)
                writer.raw(",\"value\":"); writer.string(utf8: bytes)
                writer.raw(UInt8(ascii: "}"))
                continue
            case .utf8(let bytes):
                text = String(decoding: bytes, as: UTF8.self)
            case .value(.string(let string)):
                text = string
            case .value(.int(let number)):
                writer.raw("\"long\",\"name\":"); writer.string(storedKey)
                writer.raw(",\"value\":"); writer.int(number)
                writer.raw(UInt8(ascii: "}"))
                continue
            case .value(.double(let number)):
                writer.raw("\"double\",\"name\":"); writer.string(storedKey)
                writer.raw(",\"value\":"); writer.double(number)
                writer.raw(UInt8(ascii: "}"))
                continue
            case .value(.bool(let flag)):
                writer.raw("\"boolean\",\"name\":"); writer.string(storedKey)
                writer.raw(",\"value\":"); writer.bool(flag)
                writer.raw(UInt8(ascii: "}"))
                continue
            case .value(.date(let date)):
                writer.raw("\"dateTime\",\"name\":"); writer.string(storedKey)
                writer.raw(",\"value\":"); writer.timestamp(ms: Int64((date.timeIntervalSince1970 * 1000).rounded(.down)))
                writer.raw(UInt8(ascii: "}"))
                continue
            }
            writer.raw("\"string\",\"name\":"); writer.string(storedKey)
            writer.raw(",\"value\":")
            if Rules.exceeds(text, Rules.maxPropertyLength) {
                writer.string(String(text.prefix(Rules.maxPropertyLength)))
                adjustments.truncatedValues.append(key)
            } else {
                writer.string(text)
            }
            writer.raw(UInt8(ascii: "}"))
        }
        writer.raw(UInt8(ascii: "]"))
    }
}
