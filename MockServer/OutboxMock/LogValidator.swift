// Strict validation of a W1 request body against the W2 log types and the T2–T3 limits
// (the contract is the "Wire format" section of the README). The first bad log decides the 400.

import Foundation

/// The six W2 log types.
public enum LogType: String, Sendable, Codable, CaseIterable {
    case event, startSession, endSession, screen, userProperties, location
}

/// Why a body was refused: `index` is the position in `logs` of the first bad log (nil for container
/// errors), `field` the path inside it (`name`, `device.timeZoneOffset`, `typedProperties[2].value`).
public struct ValidationFailure: Error, Equatable, Sendable {
    public var index: Int?
    public var field: String
    public var message: String

    public init(index: Int?, field: String, message: String) {
        self.index = index
        self.field = field
        self.message = message
    }

    /// `logs[3].name: longer than 256 characters`
    public var reason: String {
        guard let index else { return "\(field): \(message)" }
        return field.isEmpty ? "logs[\(index)]: \(message)" : "logs[\(index)].\(field): \(message)"
    }
}

/// A log that passed validation, with what the server records about it.
struct ValidatedLog: Sendable {
    var id: UUIDKey
    var timestampMs: Int64
    var type: LogType
    /// `name` of events and screens.
    var name: String?
    /// Where the log object is in the request's (decompressed) body: the server keeps the body, not a copy
    /// of each log (`StoredBody`).
    var span: Range<Int>
}

enum LogValidator {
    static let timestampHint = "must be a timestamp like 2026-11-22T07:33:46.123Z"

    /// The outcome of validating a body: the accepted logs, or the first failure; `logCount` is the
    /// length of `logs` whenever the body parsed (scenario rules such as `min_logs` read it).
    struct BatchCheck {
        var logs: [ValidatedLog]
        var failure: ValidationFailure?
        var logCount: Int
        /// Whether the body has whitespace between tokens (its logs are minified when read back).
        var hasInnerWhitespace = false
    }

    /// Validates a whole decompressed body.
    static func validate(body: UnsafeBufferPointer<UInt8>) -> Result<[ValidatedLog], ValidationFailure> {
        let check = check(body: body)
        if let failure = check.failure { return .failure(failure) }
        return .success(check.logs)
    }

    static func validate(body: [UInt8]) -> Result<[ValidatedLog], ValidationFailure> {
        body.withUnsafeBufferPointer { validate(body: $0) }
    }

    static func check(body: UnsafeBufferPointer<UInt8>) -> BatchCheck {
        check(body: body, storage: JSONTokenStorage())
    }

    /// As `check(body:)`, parsing into `storage` (kept between requests of a connection). `elidingDevices` is
    /// off only in tests, which show that the verdict does not depend on it.
    static func check(body: UnsafeBufferPointer<UInt8>, storage: JSONTokenStorage,
                      elidingDevices: Bool = true) -> BatchCheck {
        let tape: JSONTape
        do throws(JSONParseError) {
            tape = try JSONTape.parse(body, storage: storage, elidingRepeatedDevices: elidingDevices)
        } catch {
            let message = "not valid JSON: \(error.message) at byte \(error.offset)"
            let failure = error.logIndex.map { ValidationFailure(index: $0, field: "", message: message) }
                ?? ValidationFailure(index: nil, field: "body", message: message)
            return BatchCheck(logs: [], failure: failure, logCount: 0)
        }
        return validate(JSONView(bytes: body, tape: tape))
    }

    private static func validate(_ doc: JSONView) -> BatchCheck {
        var logCount = 0
        do throws(ValidationFailure) {
            let logs = try validateContainer(doc, logCount: &logCount)
            return BatchCheck(logs: logs, failure: nil, logCount: logCount, hasInnerWhitespace: doc.tape.hasInnerWhitespace)
        } catch {
            return BatchCheck(logs: [], failure: error, logCount: logCount)
        }
    }

    private static func validateContainer(_ doc: JSONView, logCount: inout Int) throws(ValidationFailure) -> [ValidatedLog] {
        guard doc[0].kind == .object else {
            throw ValidationFailure(index: nil, field: "body", message: "must be a JSON object")
        }
        var logsIndex = -1
        var sentAtIndex = -1
        var unknown = -1
        doc.forEachMember(of: 0) { key, value in
            if doc.equals(key, "logs") {
                if logsIndex < 0 { logsIndex = value }
            } else if doc.equals(key, "sentAt") {
                if sentAtIndex < 0 { sentAtIndex = value }
            } else if unknown < 0 {
                unknown = key
            }
        }
        if sentAtIndex >= 0 {
            try checkTimestamp(doc, sentAtIndex) { ValidationFailure(index: nil, field: "sentAt", message: $0) }
        }
        guard logsIndex >= 0 else { throw ValidationFailure(index: nil, field: "logs", message: "missing") }
        guard doc[logsIndex].kind == .array else {
            throw ValidationFailure(index: nil, field: "logs", message: "must be an array")
        }
        logCount = Int(doc[logsIndex].count)
        guard logCount > 0 else {
            throw ValidationFailure(index: nil, field: "logs", message: "must not be empty")
        }
        // SPEC M8: the container holds `logs` and `sentAt`, nothing else.
        if unknown >= 0 {
            throw ValidationFailure(index: nil, field: doc.string(unknown), message: "unknown key (W defines logs, sentAt)")
        }
        var logs: [ValidatedLog] = []
        logs.reserveCapacity(logCount)
        var failure: ValidationFailure?
        var validDevice: Range<Int>?
        doc.forEachElement(of: logsIndex) { position, element in
            guard failure == nil else { return }
            do throws(ValidationFailure) {
                var log = try validateLog(doc, element, position: position, validDevice: &validDevice)
                log.span = Int(doc[element].start)..<Int(doc[element].end)
                logs.append(log)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return logs
    }

    // MARK: - One log

    private enum LogKey: Int, CaseIterable {
        case type, id, timestamp, sid, userId, device, name, typedProperties, category, durationMs, path,
             properties, latitude, longitude, accuracy

        var literal: StaticString {
            switch self {
            case .type: "type"
            case .id: "id"
            case .timestamp: "timestamp"
            case .sid: "sid"
            case .userId: "userId"
            case .device: "device"
            case .name: "name"
            case .typedProperties: "typedProperties"
            case .category: "category"
            case .durationMs: "durationMs"
            case .path: "path"
            case .properties: "properties"
            case .latitude: "latitude"
            case .longitude: "longitude"
            case .accuracy: "accuracy"
            }
        }
    }

    private enum DeviceKey: Int, CaseIterable {
        // Required strings first: `requiredStrings` relies on this order.
        case sdkName, sdkVersion, osName, osVersion, locale, appVersion, appBuild
        case timeZoneOffset
        case model, oemName, osBuild, osKernel, appNamespace, carrierCountry, countryCode, networkType

        var literal: StaticString {
            switch self {
            case .sdkName: "sdkName"
            case .sdkVersion: "sdkVersion"
            case .osName: "osName"
            case .osVersion: "osVersion"
            case .locale: "locale"
            case .appVersion: "appVersion"
            case .appBuild: "appBuild"
            case .timeZoneOffset: "timeZoneOffset"
            case .model: "model"
            case .oemName: "oemName"
            case .osBuild: "osBuild"
            case .osKernel: "osKernel"
            case .appNamespace: "appNamespace"
            case .carrierCountry: "carrierCountry"
            case .countryCode: "countryCode"
            case .networkType: "networkType"
            }
        }

        var name: String { "\(literal)" }
    }

    private static let deviceKeys = DeviceKey.allCases.map { ($0.rawValue, $0.literal) }

    /// The keys W defines for each log type (SPEC M8), as a bit set over `LogKey`: the common ones plus the
    /// type's own. `properties` on `event` and `screen` is App Center's legacy string map.
    private static func bits(_ keys: [LogKey]) -> UInt32 { keys.reduce(0) { $0 | 1 << UInt32($1.rawValue) } }
    private static let commonKeys = bits([.type, .id, .timestamp, .sid, .userId, .device])
    private static let eventKeys = commonKeys | bits([.name, .typedProperties, .category, .properties])
    private static let endSessionKeys = commonKeys | bits([.durationMs])
    private static let screenKeys = commonKeys | bits([.name, .path, .durationMs, .typedProperties, .properties])
    private static let userPropertiesKeys = commonKeys | bits([.properties])
    private static let locationKeys = commonKeys | bits([.latitude, .longitude, .accuracy])

    @inline(__always)
    private static func allowedKeys(_ type: LogType) -> UInt32 {
        switch type {
        case .event: eventKeys
        case .startSession: commonKeys
        case .endSession: endSessionKeys
        case .screen: screenKeys
        case .userProperties: userPropertiesKeys
        case .location: locationKeys
        }
    }

    /// Maps each member of an object to a slot (first occurrence wins); -1 = absent. `unknown` receives the
    /// tape index of the first key that is in none of the slots (-1 when every key is known). The slots live
    /// inline, sized for the larger key set (the device's 16), so that a log allocates none.
    @inline(__always)
    private static func slots(_ doc: JSONView, _ object: Int, _ keys: [(Int, StaticString)],
                              unknown: inout Int, present: inout UInt32) -> InlineArray<16, Int> {
        slots(doc, object, unknown: &unknown, present: &present) { bytes in
            for (slot, literal) in keys where literal.utf8CodeUnitCount == bytes.count
                && JSONView.bytesEqual(bytes, literal) {
                return slot
            }
            return -1
        }
    }

    /// A log's key as its `LogKey` slot, -1 for any other: by length and first byte, then compared once
    /// (SPEC M10: every key of every log comes through here).
    @inline(__always)
    private static func logKeySlot(_ b: UnsafeBufferPointer<UInt8>) -> Int {
        let key: LogKey?
        switch b.count {
        case 2: key = .id
        case 3: key = .sid
        case 4: key = b[0] == UInt8(ascii: "t") ? .type : b[0] == UInt8(ascii: "n") ? .name : .path
        case 6: key = b[0] == UInt8(ascii: "u") ? .userId : .device
        case 8: key = b[0] == UInt8(ascii: "c") ? .category : b[0] == UInt8(ascii: "l") ? .latitude : .accuracy
        case 9: key = b[0] == UInt8(ascii: "t") ? .timestamp : .longitude
        case 10: key = b[0] == UInt8(ascii: "d") ? .durationMs : .properties
        case 15: key = .typedProperties
        default: key = nil
        }
        guard let key, JSONView.bytesEqual(b, key.literal) else { return -1 }
        return key.rawValue
    }

    @inline(__always)
    private static func slots(_ doc: JSONView, _ object: Int, unknown: inout Int, present: inout UInt32,
                              slotOf: (UnsafeBufferPointer<UInt8>) -> Int) -> InlineArray<16, Int> {
        var slots = InlineArray<16, Int>(repeating: -1)
        var firstUnknown = -1
        var mask: UInt32 = 0
        doc.forEachMember(of: object) { key, value in
            let slot = doc.withDecodedBytes(key, slotOf)
            if slot < 0 {
                if firstUnknown < 0 { firstUnknown = key }
            } else if slots[slot] < 0 {
                slots[slot] = value
                mask |= 1 << UInt32(slot)
            }
        }
        unknown = firstUnknown
        present = mask
        return slots
    }

    /// `validDevice` is the byte range of a device object already found valid in this body: the logs of
    /// a batch nearly always carry the same device bytes, and equal bytes need no second validation.
    private static func validateLog(_ doc: JSONView, _ index: Int, position: Int, validDevice: inout Range<Int>?)
        throws(ValidationFailure) -> ValidatedLog {
        func fail(_ field: String, _ message: String) -> ValidationFailure {
            ValidationFailure(index: position, field: field, message: message)
        }
        guard doc[index].kind == .object else { throw fail("", "must be an object") }
        var unknownKey = -1
        var presentKeys: UInt32 = 0
        let f = slots(doc, index, unknown: &unknownKey, present: &presentKeys, slotOf: logKeySlot)
        func slot(_ key: LogKey) -> Int? {
            let i = f[key.rawValue]
            return i >= 0 && doc[i].kind != .null ? i : nil
        }
        func present(_ key: LogKey) -> Bool { f[key.rawValue] >= 0 }

        // type
        guard present(.type) else { throw fail("type", "missing") }
        guard let typeIndex = slot(.type), doc[typeIndex].kind == .string else {
            throw fail("type", "must be a string")
        }
        guard let type = logType(doc, typeIndex) else {
            throw fail("type", "unknown log type \"\(doc.string(typeIndex))\"")
        }
        // id
        guard present(.id) else { throw fail("id", "missing") }
        guard let idIndex = slot(.id), doc[idIndex].kind == .string,
              let id = doc.withDecodedBytes(idIndex, { UUIDKey($0) })
        else { throw fail("id", "must be a UUID string") }
        // timestamp
        guard present(.timestamp) else { throw fail("timestamp", "missing") }
        guard let tsIndex = slot(.timestamp) else { throw fail("timestamp", timestampHint) }
        let timestampMs = try checkTimestamp(doc, tsIndex) { fail("timestamp", $0) }
        // sid: absent or null means "no session yet", except for session logs.
        if let sid = slot(.sid) {
            guard doc[sid].kind == .string, doc.withDecodedBytes(sid, { UUIDKey($0) }) != nil else {
                throw fail("sid", "must be a UUID string or null")
            }
        } else if type == .startSession || type == .endSession {
            throw fail("sid", "required (not null) for \(type.rawValue)")
        }
        // userId
        if let user = slot(.userId) {
            try checkString(doc, user, min: 1, max: 256) { fail("userId", $0) }
        }
        // device
        guard present(.device) else { throw fail("device", "missing") }
        guard let device = slot(.device), doc[device].kind == .object else {
            throw fail("device", "must be an object")
        }
        // A repeated device's members are those of the earlier object with the same bytes (its twin).
        let members = doc[device].flags & JSONToken.repeated != 0 ? Int(doc[device].count) : device
        let deviceRange = Int(doc[members].start)..<Int(doc[members].end)
        if let known = validDevice, known == deviceRange {
            // The twin itself was validated.
        } else if let known = validDevice, known.count == deviceRange.count, let base = doc.bytes.baseAddress,
                  memcmp(base + known.lowerBound, base + deviceRange.lowerBound, known.count) == 0 {
            // Same bytes as a device already validated.
        } else {
            try validateDevice(doc, members) { fail("device." + $0, $1) }
            validDevice = deviceRange
        }

        var name: String?
        switch type {
        case .event:
            let n = try requiredName(doc, f[LogKey.name.rawValue], fail)
            name = doc.string(n)
            if let props = slot(.typedProperties) {
                try validateTypedProperties(doc, props, min: 0) { fail("typedProperties" + $0, $1) }
            }
            if let category = slot(.category) {
                try validateCategory(doc, category) { fail("category" + $0, $1) }
            }
            if let legacy = slot(.properties) {
                try validateLegacyProperties(doc, legacy) { fail("properties" + $0, $1) }
            }
        case .startSession:
            break
        case .endSession:
            guard present(.durationMs) else { throw fail("durationMs", "missing") }
            try checkNonNegative(doc, f[LogKey.durationMs.rawValue]) { fail("durationMs", $0) }
        case .screen:
            let n = try requiredName(doc, f[LogKey.name.rawValue], fail)
            name = doc.string(n)
            if let path = slot(.path) {
                try checkString(doc, path, min: 0, max: 1024) { fail("path", $0) }
            }
            if let duration = slot(.durationMs) {
                try checkNonNegative(doc, duration) { fail("durationMs", $0) }
            }
            if let props = slot(.typedProperties) {
                try validateTypedProperties(doc, props, min: 0) { fail("typedProperties" + $0, $1) }
            }
            if let legacy = slot(.properties) {
                try validateLegacyProperties(doc, legacy) { fail("properties" + $0, $1) }
            }
        case .userProperties:
            guard let props = slot(.properties) else { throw fail("properties", "missing") }
            try validateTypedProperties(doc, props, min: 1) { fail("properties" + $0, $1) }
        case .location:
            try checkRange(doc, f[LogKey.latitude.rawValue], -90, 90) { fail("latitude", $0) }
            try checkRange(doc, f[LogKey.longitude.rawValue], -180, 180) { fail("longitude", $0) }
            if let accuracy = slot(.accuracy) {
                try checkNonNegative(doc, accuracy) { fail("accuracy", $0) }
            }
        }

        // SPEC M8: a key W does not define for this type is refused with its path — checked last, so that a
        // log with a bad known field still names that field first.
        if unknownKey >= 0 { throw fail(doc.string(unknownKey), "unknown key (not defined for \(type.rawValue) logs)") }
        let extra = presentKeys & ~allowedKeys(type)
        if extra != 0, let key = LogKey(rawValue: extra.trailingZeroBitCount) {
            throw fail("\(key.literal)", "unknown key (not defined for \(type.rawValue) logs)")
        }

        return ValidatedLog(id: id, timestampMs: timestampMs, type: type, name: name, span: 0..<0)
    }

    private static func logType(_ doc: JSONView, _ index: Int) -> LogType? {
        doc.withDecodedBytes(index) { bytes -> LogType? in
            if JSONView.bytesEqual(bytes, "event") { return .event }
            if JSONView.bytesEqual(bytes, "startSession") { return .startSession }
            if JSONView.bytesEqual(bytes, "endSession") { return .endSession }
            if JSONView.bytesEqual(bytes, "screen") { return .screen }
            if JSONView.bytesEqual(bytes, "userProperties") { return .userProperties }
            if JSONView.bytesEqual(bytes, "location") { return .location }
            return nil
        }
    }

    /// `name` of events and screens: 1–256 characters (SPEC T2).
    private static func requiredName(
        _ doc: JSONView, _ index: Int, _ fail: (String, String) -> ValidationFailure
    ) throws(ValidationFailure) -> Int {
        guard index >= 0 else { throw fail("name", "missing") }
        try checkString(doc, index, min: 1, max: 256) { fail("name", $0) }
        return index
    }

    // MARK: - Device

    private static func validateDevice(
        _ doc: JSONView, _ index: Int, _ fail: (String, String) -> ValidationFailure
    ) throws(ValidationFailure) {
        var unknown = -1
        var present: UInt32 = 0
        let d = slots(doc, index, deviceKeys, unknown: &unknown, present: &present)
        for key in DeviceKey.allCases {
            let i = d[key.rawValue]
            switch key {
            case .sdkName, .sdkVersion, .osName, .osVersion, .locale, .appVersion, .appBuild:
                guard i >= 0 else { throw fail(key.name, "missing") }
                guard doc[i].kind == .string else { throw fail(key.name, "must be a string") }
            case .timeZoneOffset:
                guard i >= 0 else { throw fail(key.name, "missing") }
                guard doc[i].kind == .number, let minutes = doc.int64(i) else {
                    throw fail(key.name, "must be an integer (minutes east of UTC)")
                }
                guard (-840...840).contains(minutes) else { throw fail(key.name, "must be between -840 and 840") }
            case .networkType:
                guard i >= 0, doc[i].kind != .null else { continue }
                let known = doc[i].kind == .string && (doc.equals(i, "wired") || doc.equals(i, "wifi")
                    || doc.equals(i, "none") || doc.equals(i, "unknown"))
                guard known else { throw fail(key.name, "must be one of wired, wifi, none, unknown") }
            default:
                guard i >= 0, doc[i].kind != .null else { continue }
                guard doc[i].kind == .string else { throw fail(key.name, "must be a string") }
            }
        }
        if unknown >= 0 { throw fail(doc.string(unknown), "unknown key (not defined for device)") }
    }

    // MARK: - Typed properties (SPEC T3)

    private static let maxProperties = 20
    private static let maxPropertyLength = 125

    private static func validateTypedProperties(
        _ doc: JSONView, _ index: Int, min: Int, _ fail: (String, String) -> ValidationFailure
    ) throws(ValidationFailure) {
        guard doc[index].kind == .array else { throw fail("", "must be an array") }
        let count = Int(doc[index].count)
        if count < min { throw fail("", "must hold at least \(min) property") }
        if count > maxProperties { throw fail("", "more than \(maxProperties) properties") }
        // Inline, as `count` ≤ `maxProperties`: no allocation per log.
        var names = InlineArray<20, Int>(repeating: 0)
        var named = 0
        var failure: ValidationFailure?
        doc.forEachElement(of: index) { k, element in
            guard failure == nil else { return }
            do throws(ValidationFailure) {
                let name = try validateTypedProperty(doc, element) { fail("[\(k)]" + $0, $1) }
                for j in 0..<named where sameString(doc, names[j], name) {
                    throw fail("[\(k)].name", "duplicate name \"\(doc.string(name))\"")
                }
                names[named] = name
                named += 1
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    private static func sameString(_ doc: JSONView, _ a: Int, _ b: Int) -> Bool {
        let (ta, tb) = (doc[a], doc[b])
        if (ta.flags | tb.flags) & JSONToken.escapes == 0 {
            let (ra, rb) = (doc.rawBytes(a), doc.rawBytes(b))
            return ra.count == rb.count && ra.elementsEqual(rb)
        }
        return doc.string(a) == doc.string(b)
    }

    /// Returns the tape index of the property's name.
    private static func validateTypedProperty(
        _ doc: JSONView, _ index: Int, _ fail: (String, String) -> ValidationFailure
    ) throws(ValidationFailure) -> Int {
        guard doc[index].kind == .object else { throw fail("", "must be an object") }
        var type = -1, name = -1, value = -1, unknown = -1
        doc.forEachMember(of: index) { key, v in
            if type < 0, doc.equals(key, "type") { type = v }
            else if name < 0, doc.equals(key, "name") { name = v }
            else if value < 0, doc.equals(key, "value") { value = v }
            // Rare: a repeated key (the first counts) or an unknown one.
            else if unknown < 0, !(doc.equals(key, "type") || doc.equals(key, "name") || doc.equals(key, "value")) {
                unknown = key
            }
        }
        guard type >= 0 else { throw fail(".type", "missing") }
        guard name >= 0 else { throw fail(".name", "missing") }
        try checkString(doc, name, min: 1, max: maxPropertyLength) { fail(".name", $0) }
        guard value >= 0 else { throw fail(".value", "missing") }
        let types = "must be one of string, long, double, boolean, dateTime"
        guard doc[type].kind == .string else { throw fail(".type", types) }
        let v = doc[value]
        if doc.equals(type, "string") {
            try checkString(doc, value, min: 0, max: maxPropertyLength) { fail(".value", $0) }
        } else if doc.equals(type, "long") {
            guard v.kind == .number, doc.int64(value) != nil else {
                throw fail(".value", "must be an integer that fits in 64 bits")
            }
        } else if doc.equals(type, "double") {
            guard v.kind == .number, doc.isFiniteNumber(value) else { throw fail(".value", "must be a finite number") }
        } else if doc.equals(type, "boolean") {
            guard v.kind == .trueValue || v.kind == .falseValue else { throw fail(".value", "must be true or false") }
        } else if doc.equals(type, "dateTime") {
            try checkTimestamp(doc, value) { fail(".value", $0) }
        } else {
            throw fail(".type", types)
        }
        if unknown >= 0 { throw fail("." + doc.string(unknown), "unknown key (a typed property has type, name, value)") }
        return name
    }

    /// App Center's legacy `properties` on events and screens (SPEC M8): an object of string values, held to
    /// T3's limits — at most 20 entries, keys of 1–125 characters, values of at most 125, keys unique.
    private static func validateLegacyProperties(
        _ doc: JSONView, _ index: Int, _ fail: (String, String) -> ValidationFailure
    ) throws(ValidationFailure) {
        guard doc[index].kind == .object else { throw fail("", "must be an object of strings") }
        if doc[index].count > maxProperties { throw fail("", "more than \(maxProperties) properties") }
        var keys: [Int] = []
        var failure: ValidationFailure?
        doc.forEachMember(of: index) { key, value in
            guard failure == nil else { return }
            do throws(ValidationFailure) {
                let path = "." + doc.string(key)
                try checkString(doc, key, min: 1, max: maxPropertyLength) { fail(path, "key " + $0) }
                try checkString(doc, value, min: 0, max: maxPropertyLength) { fail(path, $0) }
                for other in keys where sameString(doc, other, key) { throw fail(path, "duplicate key") }
                keys.append(key)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    private static func validateCategory(
        _ doc: JSONView, _ index: Int, _ fail: (String, String) -> ValidationFailure
    ) throws(ValidationFailure) {
        guard doc[index].kind == .array else { throw fail("", "must be an array") }
        guard (1...10).contains(doc[index].count) else { throw fail("", "must hold 1 to 10 strings") }
        var failure: ValidationFailure?
        doc.forEachElement(of: index) { k, element in
            guard failure == nil else { return }
            if doc[element].kind != .string || doc[element].end == doc[element].start {
                failure = fail("[\(k)]", "must be a non-empty string")
            }
        }
        if let failure { throw failure }
    }

    // MARK: - Scalars

    private static func checkString(
        _ doc: JSONView, _ index: Int, min: Int, max: Int, _ fail: (String) -> ValidationFailure
    ) throws(ValidationFailure) {
        guard doc[index].kind == .string else { throw fail("must be a string") }
        let n = doc.characterCount(index)
        if n < min { throw fail(min == 1 ? "must not be empty" : "shorter than \(min) characters") }
        if n > max { throw fail("longer than \(max) characters") }
    }

    @discardableResult
    private static func checkTimestamp(
        _ doc: JSONView, _ index: Int, _ fail: (String) -> ValidationFailure
    ) throws(ValidationFailure) -> Int64 {
        guard doc[index].kind == .string else { throw fail(timestampHint) }
        switch doc.withDecodedBytes(index, { ISOTimestamp.parse($0) }) {
        case .valid(let ms): return ms
        case .badFormat: throw fail(timestampHint)
        case .notARealDate: throw fail("not a real date")
        }
    }

    private static func checkNonNegative(
        _ doc: JSONView, _ index: Int, _ fail: (String) -> ValidationFailure
    ) throws(ValidationFailure) {
        guard doc[index].kind == .number else { throw fail("must be a number") }
        guard let v = doc.double(index) else { throw fail("must be a finite number") }
        if v < 0 { throw fail("must not be negative") }
    }

    private static func checkRange(
        _ doc: JSONView, _ index: Int, _ low: Double, _ high: Double, _ fail: (String) -> ValidationFailure
    ) throws(ValidationFailure) {
        guard index >= 0 else { throw fail("missing") }
        guard doc[index].kind == .number, let v = doc.double(index) else { throw fail("must be a number") }
        guard v >= low, v <= high else { throw fail("must be between \(Int(low)) and \(Int(high))") }
    }
}
