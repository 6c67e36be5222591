import Glibc

/// A stored log's payload (App Center's shape, which is wire-neutral for us: SPEC D2) read in place for a wire
/// that writes another shape. One pass over the bytes hands each field to the wire as it is met, texts pointing
/// into the payload; nothing is built, so mapping a log costs about what copying it does (SPEC D10).
///
/// The log's type is handed on first (the engine writes `{"type":…` at the start of every payload), so that a wire
/// knows it before any field whose meaning depends on it.
enum StoredPayload {
    /// A typed property's value as its `type` says: `long` an integer, `double` a number, `boolean` a boolean,
    /// `string` and `dateTime` text (a date as its ISO 8601 text, SPEC D4).
    enum Value {
        case text(JSONText), int(Int64), double(Double), bool(Bool)
    }

    enum Field {
        /// Always the first field handed on.
        case type(LogType)
        /// The log's id as stored (its UUID text), the same as `StoredLog.id`: a wire copies it instead of writing it.
        case id(JSONText)
        /// In a session (a `null` sid is not handed on).
        case sid(JSONText)
        case userID(JSONText)
        case name(JSONText)
        case path(JSONText)
        case durationMs(Double)
        case latitude(Double)
        case longitude(Double)
        case accuracy(Double)
        /// One entry of `typedProperties` (events, screens) or `properties` (user properties, an identify's traits), in
        /// stored order.
        case property(JSONText, Value)
        /// The `category` array: its start, each of its strings, its end (always sent after a start).
        case categoryStart
        case categoryPart(JSONText)
        case categoryEnd
    }

    /// Hands each field of `payload` to `each`, in the payload's order. The engine wrote the payload, so it parses;
    /// if it ever did not, the fields before the fault are all a wire gets (the record keeps its id and time).
    static func scan(_ payload: UnsafeBufferPointer<UInt8>, _ each: (Field) -> Void) {
        each(.type(type(of: payload)))
        var scanner = JSONScanner(payload)
        try? scanner.members { (key: JSONText, s: inout JSONScanner) throws(JSONError) in
            guard let first = key.raw.first else { try s.skip(); return }
            switch (key.raw.count, first) {
            case (2, UInt8(ascii: "i")) where key.is("id"):
                each(.id(try s.text()))
            case (3, UInt8(ascii: "s")) where key.is("sid"):
                if let sid = try optionalText(&s) { each(.sid(sid)) }
            case (6, UInt8(ascii: "u")) where key.is("userId"):
                if let user = try optionalText(&s) { each(.userID(user)) }
            case (4, UInt8(ascii: "n")) where key.is("name"):
                if let name = try optionalText(&s) { each(.name(name)) }
            case (4, UInt8(ascii: "p")) where key.is("path"):
                if let path = try optionalText(&s) { each(.path(path)) }
            case (10, UInt8(ascii: "d")) where key.is("durationMs"):
                if let number = try number(&s) { each(.durationMs(number)) }
            case (8, UInt8(ascii: "l")) where key.is("latitude"):
                if let number = try number(&s) { each(.latitude(number)) }
            case (9, UInt8(ascii: "l")) where key.is("longitude"):
                if let number = try number(&s) { each(.longitude(number)) }
            case (8, UInt8(ascii: "a")) where key.is("accuracy"):
                if let number = try number(&s) { each(.accuracy(number)) }
            case (15, UInt8(ascii: "t")) where key.is("typedProperties"), (10, UInt8(ascii: "p")) where key.is("properties"):
                try properties(&s, each)
            case (8, UInt8(ascii: "c")) where key.is("category"):
                each(.categoryStart)
                defer { each(.categoryEnd) }
                try s.elements { (s: inout JSONScanner) throws(JSONError) in each(.categoryPart(try s.text())) }
            default:
                try s.skip()
            }
        }
    }

    /// The payload's `type`: read where the engine writes it, first; looked for when a payload (another writer's)
    /// has it elsewhere.
    private static func type(of payload: UnsafeBufferPointer<UInt8>) -> LogType {
        let lead: StaticString = #"{"type":"#
        var scanner = JSONScanner(payload)
        if payload.count > lead.utf8CodeUnitCount,
           memcmp(payload.baseAddress!, lead.utf8Start, lead.utf8CodeUnitCount) == 0 {
            scanner = JSONScanner(UnsafeBufferPointer(rebasing: payload[lead.utf8CodeUnitCount...]))
            return (try? scanner.text()).map(LogType.init(stored:)) ?? .event
        }
        var found = LogType.event
        try? scanner.members { (key: JSONText, s: inout JSONScanner) throws(JSONError) in
            if key.is("type"), s.peekKind() == .string { found = LogType(stored: try s.text()) } else { try s.skip() }
        }
        return found
    }

    /// `[{"type","name","value"}]`: the engine writes `type` first, so the value is read as its type says.
    private static func properties(_ s: inout JSONScanner, _ each: (Field) -> Void) throws(JSONError) {
        try s.elements { (s: inout JSONScanner) throws(JSONError) in
            let start = s.offset
            if let (name, value) = try? entry(&s) {
                each(.property(name, value))
                return
            }
            s.rewind(to: start)
            var isDouble = false, name: JSONText?, value: Value?
            try s.members { (key: JSONText, s: inout JSONScanner) throws(JSONError) in
                if key.is("type") {
                    isDouble = try s.text().is("double")
                } else if key.is("name") {
                    name = try s.text()
                } else if key.is("value") {
                    if s.peekKind() == .string {
                        value = .text(try s.text())
                    } else {
                        switch try s.scalar() {
                        // A whole `double` was written without a fraction; it stays a double.
                        case .integer(let number): value = isDouble ? .double(Double(number)) : .int(number)
                        case .double(let number): value = .double(number)
                        case .bool(let flag): value = .bool(flag)
                        default: value = nil
                        }
                    }
                } else {
                    try s.skip()
                }
            }
            if let name, let value { each(.property(name, value)) }
        }
    }

    /// One entry exactly as the engine writes it (`{"type":"long","name":"n","value":1}`), compared byte for byte;
    /// nil when it is written any other way (the caller then reads it member by member).
    @inline(__always)
    private static func entry(_ s: inout JSONScanner) throws(JSONError) -> (JSONText, Value)? {
        enum Kind { case text, long, double, boolean }
        guard s.consume(#"{"type":""#) else { return nil }
        let kind: Kind
        if s.consume(#"string","name":"#) { kind = .text }
        else if s.consume(#"long","name":"#) { kind = .long }
        else if s.consume(#"double","name":"#) { kind = .double }
        else if s.consume(#"boolean","name":"#) { kind = .boolean }
        else if s.consume(#"dateTime","name":"#) { kind = .text }
        else { return nil }
        let name = try s.text()
        guard s.consume(#","value":"#) else { return nil }
        let value: Value
        switch kind {
        case .text: value = .text(try s.text())
        case .long:
            guard case .integer(let number) = try s.scalar() else { return nil }
            value = .int(number)
        case .double:
            switch try s.scalar() {
            case .integer(let number): value = .double(Double(number))
            case .double(let number): value = .double(number)
            default: return nil
            }
        case .boolean:
            guard case .bool(let flag) = try s.scalar() else { return nil }
            value = .bool(flag)
        }
        return s.consume("}") ? (name, value) : nil
    }

    /// A stored device context's text fields by name (`appVersion`, `osName`, …): read once per context version
    /// of a batch by every wire that maps them. A context that does not parse has none.
    static func deviceFields(_ json: [UInt8]) -> [String: String] {
        let document: JSONValue? = json.withUnsafeBufferPointer { buffer in
            var scanner = JSONScanner(buffer)
            return try? scanner.document()
        }
        var fields: [String: String] = [:]
        if case .object(let members)? = document {
            for member in members { if case .string(let text) = member.value { fields[member.key] = text } }
        }
        return fields
    }

    private static func optionalText(_ s: inout JSONScanner) throws(JSONError) -> JSONText? {
        if s.peekKind() == .null { _ = try s.scalar(); return nil }
        return try s.text()
    }

    private static func number(_ s: inout JSONScanner) throws(JSONError) -> Double? {
        switch try s.scalar() {
        case .integer(let number): return Double(number)
        case .double(let number): return number
        default: return nil
        }
    }
}

extension LogType {
    /// The type a payload names, compared byte for byte (an unknown one reads as an event).
    init(stored text: JSONText) {
        if text.is("startSession") { self = .startSession }
        else if text.is("endSession") { self = .endSession }
        else if text.is("screen") { self = .screen }
        else if text.is("userProperties") { self = .userProperties }
        else if text.is("location") { self = .location }
        else if text.is("identify") { self = .identify }
        else { self = .event }
    }
}
