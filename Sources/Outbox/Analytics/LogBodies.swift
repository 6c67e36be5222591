/// Validates the non-event logs of SPEC W2 (screen, userProperties, location) and writes their own fields.
/// Pure: runs on the caller's thread, so that errors reach the caller before anything is queued.
enum LogBodies {
    static let maxTitleLength = 256
    static let maxPathLength = 1024
    static let maxUserIDLength = 256

    struct Result {
        var body: [UInt8]
        var adjustments = EventValidator.Adjustments()
    }

    /// SPEC A6: `"name":title[,"path":…][,"durationMs":…][,"typedProperties":[…]]`. A title over 256 characters and
    /// a path over 1024 are cut to size (reported as `nameTruncated` / `truncatedValues: ["path"]`).
    static func screen(title: String, path: String?, durationNs: Int64?, properties: [String: PropertyValue]) throws(OutboxError) -> Result {
        guard !title.isEmpty else { throw .emptyScreenTitle }
        var adjustments = EventValidator.Adjustments()
        var writer = JSONWriter(capacity: 96 + (path?.utf8.count ?? 0) + properties.count * 48)
        writer.raw("\"name\":")
        if EventValidator.exceeds(title, maxTitleLength) {
            writer.string(String(title.prefix(maxTitleLength)))
            adjustments.nameTruncated = true
        } else {
            writer.string(title)
        }
        if let path {
            writer.raw(",\"path\":")
            if EventValidator.exceeds(path, maxPathLength) {
                writer.string(String(path.prefix(maxPathLength)))
                adjustments.truncatedValues.append("path")
            } else {
                writer.string(path)
            }
        }
        if let durationNs {
            writer.raw(",\"durationMs\":")
            writer.double(TimerBook.milliseconds(max(0, durationNs)))
        }
        if !properties.isEmpty {
            try EventValidator.writeProperties(properties, key: ",\"typedProperties\":[", into: &writer, adjustments: &adjustments)
        }
        return Result(body: writer.bytes, adjustments: adjustments)
    }

    /// SPEC A8: `"properties":[…]`, 1–20 typed properties (the first 20 in key order are kept, as SPEC T3).
    static func userProperties(_ properties: [String: PropertyValue]) throws(OutboxError) -> Result {
        guard !properties.isEmpty else { throw .emptyUserProperties }
        return try propertyList(properties)
    }

    /// SPEC A8a: an identify's traits, `"properties":[…]`, 0–20 typed properties limited as user properties.
    static func identify(_ traits: [String: PropertyValue]) throws(OutboxError) -> Result {
        guard !traits.isEmpty else { return Result(body: Array(#""properties":[]"#.utf8)) }
        return try propertyList(traits)
    }

    /// `"properties":[…]` of 1–20 typed properties (the first 20 in key order are kept, as SPEC T3).
    private static func propertyList(_ properties: [String: PropertyValue]) throws(OutboxError) -> Result {
        var adjustments = EventValidator.Adjustments()
        var writer = JSONWriter(capacity: 32 + properties.count * 48)
        try EventValidator.writeProperties(properties, key: "\"properties\":[", into: &writer, adjustments: &adjustments)
        return Result(body: writer.bytes, adjustments: adjustments)
    }

    /// Curio's `sendLocation`: `"latitude":…,"longitude":…[,"accuracy":…]`.
    static func location(latitude: Double, longitude: Double, accuracy: Double?) throws(OutboxError) -> Result {
        guard latitude.isFinite, (-90...90).contains(latitude), longitude.isFinite, (-180...180).contains(longitude) else {
            throw .invalidLocation("latitude must be within -90…90 and longitude within -180…180, got \(latitude), \(longitude)")
        }
        if let accuracy, !(accuracy.isFinite && accuracy >= 0) {
            throw .invalidLocation("accuracy must be a finite number of metres ≥ 0, got \(accuracy)")
        }
        var writer = JSONWriter(capacity: 80)
        writer.raw("\"latitude\":"); writer.double(latitude)
        writer.raw(",\"longitude\":"); writer.double(longitude)
        if let accuracy { writer.raw(",\"accuracy\":"); writer.double(accuracy) }
        return Result(body: writer.bytes)
    }

    /// SPEC A8: nil signs the user out; otherwise 1–256 characters (an id is never cut: a cut id is someone else's).
    static func validateUserID(_ id: String?) throws(OutboxError) {
        guard let id else { return }
        guard !id.isEmpty else { throw .invalidUserID("it is empty; pass nil to sign the user out") }
        guard !EventValidator.exceeds(id, maxUserIDLength) else {
            throw .invalidUserID("it has \(id.count) characters; at most \(maxUserIDLength) are allowed")
        }
    }

    /// SPEC A10: an ISO 3166-1 alpha-2 code (`"TR"`, `"de"` → `"DE"`); nil removes the override.
    static func countryCode(_ code: String?) throws(OutboxError) -> String? {
        guard let code else { return nil }
        let upper = code.uppercased()
        guard upper.utf8.count == 2, upper.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else {
            throw .invalidCountryCode(code)
        }
        return upper
    }
}
