import FoundationEssentials

/// OpenTelemetry OTLP/HTTP logs (SPEC D1, D4, D5): `POST {endpoint}/v1/logs`, an `ExportLogsServiceRequest` in
/// protobuf (the default) or OTLP/JSON. A batch holds one `ResourceLogs` per device-context version it carries
/// (D2); each log is one `LogRecord` whose `event_name` and string body say what it is, with the attributes of the
/// OpenTelemetry semantic conventions where they have one and `outbox.*` where they have none.
///
/// The bytes are written here, field by field (`OTLPRecords`), not through swift-protobuf's messages: that library
/// imports Foundation, which would put Foundation proper and ICU into every process that loads libOutbox, and its
/// message building cost 4.5× App Center's loop CPU per event (BENCHMARKS.md). The mock decodes these requests
/// with swift-protobuf's generated code (`Sources/OTLPProto`), an independent reader, in every end-to-end test.
struct OTLPWire: DeliveryWire {
    var encoding: OTLPEncoding
    var installID: UUID

    var destination: Destination { .otlp }
    /// SPEC D6: our own cap, the default of the gRPC hops many collectors relay through.
    var maxRequestBytes: Int? { 4 * 1024 * 1024 }

    /// The semantic conventions the attributes follow.
    static let schemaURL = "https://opentelemetry.io/schemas/1.44.0"

    func request(endpoint: String, credentials: WireCredentials) -> DeliveryDriver.RequestSettings {
        let base = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        return DeliveryDriver.RequestSettings(url: base + "/v1/logs",
                                              headers: [("Content-Type", encoding.contentType)] + commonHeaders(credentials))
    }

    func encode(_ logs: [StoredLog], contexts: [Int64: [UInt8]], times: WireTimes) -> [UInt8] {
        // Resources in the order the batch first meets their context version, each with its records.
        var order: [Int64] = []
        var records: [Int64: [OTLPRecords.Record]] = [:]
        for log in logs {
            if records[log.context] == nil { order.append(log.context); records[log.context] = [] }
            records[log.context]?.append(OTLPRecords.record(log, timeMs: times.timestamp(log)))
        }
        let resources = order.map { context in
            (OTLPRecords.resource(device: contexts[context] ?? contexts[0] ?? [], installID: installID), records[context] ?? [])
        }
        switch encoding {
        case .protobuf: return OTLPRecords.protobuf(resources, schemaURL: Self.schemaURL)
        case .json: return OTLPRecords.json(resources, schemaURL: Self.schemaURL)
        }
    }

    /// SPEC D5: a 2xx's `partial_success` with rejected records counts them; 415 stops like 404 (the server does not
    /// take this encoding: a configuration matter).
    func outcome(of result: TransferResult, nowWallMs: Int64) -> DeliveryMachine.Outcome {
        guard case .response(let response) = result else { return DeliveryMachine.classify(result, nowWallMs: nowWallMs) }
        if response.status == 415 {
            return .stop(status: 415, reason: "the server does not take \(encoding.contentType) (HTTP 415)")
        }
        guard (200..<300).contains(response.status), !response.body.isEmpty,
              let partial = Self.partialSuccess(response), partial.rejected > 0 else {
            return DeliveryMachine.classify(result, nowWallMs: nowWallMs)
        }
        return .partiallyRejected(count: Int(clamping: partial.rejected), message: String(partial.message.prefix(1000)))
    }

    /// The answer's `partial_success` (rejected records and the server's message), read by its `Content-Type`; nil
    /// when there is none or the body does not parse (the status alone then decides: a 2xx delivered).
    static func partialSuccess(_ response: HTTPResponse) -> (rejected: Int64, message: String)? {
        let type = (response.headers["Content-Type"] ?? "").lowercased()
        if type.hasPrefix("application/json") {
            let document: JSONValue? = response.body.withUnsafeBufferPointer { buffer in
                var scanner = JSONScanner(buffer)
                return try? scanner.document()
            }
            guard case .object(let members)? = document,
                  case .object(let partial)? = members.first(where: { $0.key == "partialSuccess" })?.value else { return nil }
            var rejected: Int64 = 0, message = ""
            for member in partial {
                if member.key == "rejectedLogRecords" {
                    // proto3 JSON writes an int64 as a string; a number is accepted too.
                    if case .string(let text) = member.value { rejected = Int64(text) ?? 0 }
                    if case .integer(let number) = member.value { rejected = number }
                } else if member.key == "errorMessage", case .string(let text) = member.value {
                    message = text
                }
            }
            return (rejected, message)
        }
        if type.hasPrefix("application/x-protobuf") || type.hasPrefix("application/protobuf") {
            var reader = ProtoReader(response.body[...])
            guard let partial = reader.firstMessage(field: 1) else { return nil }
            var inner = ProtoReader(partial)
            var rejected: Int64 = 0, message = ""
            while let field = inner.next() {
                switch field {
                case .varint(1, let value): rejected = Int64(bitPattern: value)
                case .bytes(2, let bytes): message = String(decoding: bytes, as: UTF8.self)
                default: break
                }
            }
            return inner.failed ? nil : (rejected, message)
        }
        return nil
    }
}

/// A stored log as an OTLP record, and records written as protobuf or OTLP/JSON (SPEC D4).
enum OTLPRecords {
    enum Value {
        case string(String), int(Int64), double(Double), bool(Bool), strings([String])
    }

    struct Record {
        var timeNs: UInt64
        var observedNs: UInt64
        var eventName: String
        var attributes: [(String, Value)]
    }

    struct Resource {
        var attributes: [(String, Value)]
        var scopeVersion: String
    }

    static func resource(device json: [UInt8], installID: UUID) -> Resource {
        let device = object(json)
        func text(_ key: String) -> String? { if case .string(let value)? = device[key] { return value } else { return nil } }
        var attributes: [(String, Value)] = []
        func add(_ key: String, _ value: String?) { if let value { attributes.append((key, .string(value))) } }
        add("service.name", text("appNamespace") ?? "outbox")
        add("service.version", text("appVersion"))
        add("app.build_id", text("appBuild"))
        add("app.installation.id", installID.uuidString.lowercased())
        add("os.type", "linux")
        add("os.name", text("osName"))
        add("os.version", text("osVersion"))
        add("device.manufacturer", text("oemName"))
        add("device.model.identifier", text("model"))
        add("telemetry.sdk.name", "outbox")
        add("telemetry.sdk.language", "swift")
        add("telemetry.sdk.version", text("sdkVersion") ?? OutboxVersion.string)
        return Resource(attributes: attributes, scopeVersion: text("sdkVersion") ?? OutboxVersion.string)
    }

    /// One log as a record: its stored payload (App Center's shape, wire-neutral for us) read back and mapped.
    static func record(_ log: StoredLog, timeMs: Int64) -> Record {
        let payload = object(log.payload)
        func text(_ key: String) -> String? { if case .string(let value)? = payload[key] { return value } else { return nil } }
        var attributes: [(String, Value)] = [("log.record.uid", .string(log.id.string))]
        if let sid = text("sid") { attributes.append(("session.id", .string(sid))) }
        if let user = text("userId") { attributes.append(("user.id", .string(user))) }
        let name: String
        switch text("type") ?? "event" {
        case "startSession":
            name = "session.start"
        case "endSession":
            name = "session.end"
            if let duration = number(payload["durationMs"]) { attributes.append(("outbox.session.duration_ms", .double(duration))) }
        case "screen":
            name = "outbox.screen_view"
            if let screen = text("name") { attributes.append(("app.screen.name", .string(screen))) }
            if let path = text("path") { attributes.append(("outbox.screen.path", .string(path))) }
            if let duration = number(payload["durationMs"]) { attributes.append(("outbox.screen.duration_ms", .double(duration))) }
            typed(payload["typedProperties"], prefix: "", into: &attributes)
        case "userProperties":
            name = "outbox.user_properties"
            typed(payload["properties"], prefix: "outbox.user.", into: &attributes)
        case "location":
            name = "outbox.location"
            if let latitude = number(payload["latitude"]) { attributes.append(("geo.location.lat", .double(latitude))) }
            if let longitude = number(payload["longitude"]) { attributes.append(("geo.location.lon", .double(longitude))) }
            if let accuracy = number(payload["accuracy"]) { attributes.append(("outbox.location.accuracy_m", .double(accuracy))) }
        default:
            name = text("name") ?? "event"
            if case .array(let parts)? = payload["category"] {
                let category = parts.compactMap { part -> String? in if case .string(let s) = part { return s } else { return nil } }
                attributes.append(("outbox.category", .strings(category)))
            }
            typed(payload["typedProperties"], prefix: "", into: &attributes)
        }
        return Record(timeNs: UInt64(max(0, timeMs)) &* 1_000_000, observedNs: UInt64(max(0, log.wallMs)) &* 1_000_000,
                      eventName: name, attributes: attributes)
    }

    /// App Center's typed properties (`[{"type","name","value"}]`) as attributes, their types kept (a date as its
    /// ISO 8601 text).
    private static func typed(_ value: JSONValue?, prefix: String, into attributes: inout [(String, Value)]) {
        guard case .array(let entries)? = value else { return }
        for entry in entries {
            guard case .object(let members) = entry else { continue }
            var type = "", name = "", raw: JSONValue = .null
            for member in members {
                switch member.key {
                case "type": if case .string(let text) = member.value { type = text }
                case "name": if case .string(let text) = member.value { name = text }
                case "value": raw = member.value
                default: break
                }
            }
            if let mapped = Self.value(type: type, raw), !name.isEmpty { attributes.append((prefix + name, mapped)) }
        }
    }

    /// A typed property's value as its type says (`long`, `double`, `boolean`; `string` and `dateTime` as text).
    private static func value(type: String, _ raw: JSONValue) -> Value? {
        if type == "double" { return number(raw).map(Value.double) }
        switch raw {
        case .integer(let number): return type == "long" ? .int(number) : nil
        case .bool(let flag): return type == "boolean" ? .bool(flag) : nil
        case .string(let text): return .string(text)
        default: return nil
        }
    }

    private static func number(_ value: JSONValue?) -> Double? {
        switch value {
        case .integer(let number)?: return Double(number)
        case .double(let number)?: return number
        default: return nil
        }
    }

    /// A stored JSON object's members (the engine wrote it: it parses; if it ever did not, the record keeps its id
    /// and time and the server gets the name `event` rather than nothing). Looked up by a linear search: a log has a
    /// handful of keys, fewer than hashing them would pay for.
    private static func object(_ bytes: [UInt8]) -> Members {
        let document: JSONValue? = bytes.withUnsafeBufferPointer { buffer in
            var scanner = JSONScanner(buffer)
            return try? scanner.document()
        }
        guard case .object(let members)? = document else { return Members(members: []) }
        return Members(members: members)
    }

    struct Members {
        var members: [(key: String, value: JSONValue)]
        subscript(_ key: String) -> JSONValue? { members.first(where: { $0.key == key })?.value }
    }

    // MARK: - protobuf (opentelemetry-proto's logs service)

    static func protobuf(_ resources: [(Resource, [Record])], schemaURL: String) -> [UInt8] {
        var out = ProtoWriter()
        for (resource, records) in resources {
            out.message(1) { resourceLogs in                          // ExportLogsServiceRequest.resource_logs
                resourceLogs.message(1) { r in                       // ResourceLogs.resource
                    for (key, value) in resource.attributes { r.message(1) { $0.keyValue(key, value) } }
                }
                resourceLogs.message(2) { scopeLogs in               // ResourceLogs.scope_logs
                    scopeLogs.message(1) { scope in                  // ScopeLogs.scope
                        scope.string(1, "outbox")
                        scope.string(2, resource.scopeVersion)
                    }
                    for record in records {
                        scopeLogs.message(2) { r in                  // ScopeLogs.log_records
                            r.fixed64(1, record.timeNs)
                            r.varint(2, 9)                           // SEVERITY_NUMBER_INFO
                            r.string(3, "INFO")
                            r.message(5) { $0.anyValue(.string(record.eventName)) }
                            for (key, value) in record.attributes { r.message(6) { $0.keyValue(key, value) } }
                            r.fixed64(11, record.observedNs)
                            r.string(12, record.eventName)
                        }
                    }
                }
                resourceLogs.string(3, schemaURL)
            }
        }
        return out.bytes
    }

    // MARK: - OTLP/JSON (lowerCamelCase keys, 64-bit integers as strings, enums as numbers)

    static func json(_ resources: [(Resource, [Record])], schemaURL: String) -> [UInt8] {
        var w = JSONWriter(capacity: 1024)
        w.raw(#"{"resourceLogs":["#)
        for (index, (resource, records)) in resources.enumerated() {
            if index > 0 { w.raw(",") }
            w.raw(#"{"resource":{"attributes":"#)
            attributes(resource.attributes, into: &w)
            w.raw(#"},"scopeLogs":[{"scope":{"name":"outbox","version":"#)
            w.string(resource.scopeVersion)
            w.raw(#"},"logRecords":["#)
            for (position, record) in records.enumerated() {
                if position > 0 { w.raw(",") }
                w.raw(#"{"timeUnixNano":""#); w.raw(Array(String(record.timeNs).utf8))
                w.raw(#"","observedTimeUnixNano":""#); w.raw(Array(String(record.observedNs).utf8))
                w.raw(#"","severityNumber":9,"severityText":"INFO","body":"#)
                anyValue(.string(record.eventName), into: &w)
                w.raw(#","attributes":"#)
                attributes(record.attributes, into: &w)
                w.raw(#","eventName":"#)
                w.string(record.eventName)
                w.raw("}")
            }
            w.raw(#"]}],"schemaUrl":"#)
            w.string(schemaURL)
            w.raw("}")
        }
        w.raw("]}")
        return w.bytes
    }

    private static func attributes(_ list: [(String, Value)], into w: inout JSONWriter) {
        w.raw("[")
        for (index, (key, value)) in list.enumerated() {
            if index > 0 { w.raw(",") }
            w.raw(#"{"key":"#)
            w.string(key)
            w.raw(#","value":"#)
            anyValue(value, into: &w)
            w.raw("}")
        }
        w.raw("]")
    }

    private static func anyValue(_ value: Value, into w: inout JSONWriter) {
        switch value {
        case .string(let text): w.raw(#"{"stringValue":"#); w.string(text); w.raw("}")
        case .int(let number): w.raw(#"{"intValue":""#); w.int(number); w.raw(#""}"#)
        case .double(let number): w.raw(#"{"doubleValue":"#); w.double(number); w.raw("}")
        case .bool(let flag): w.raw(#"{"boolValue":"#); w.bool(flag); w.raw("}")
        case .strings(let texts):
            w.raw(#"{"arrayValue":{"values":["#)
            for (index, text) in texts.enumerated() {
                if index > 0 { w.raw(",") }
                w.raw(#"{"stringValue":"#); w.string(text); w.raw("}")
            }
            w.raw("]}}")
        }
    }
}

/// Protocol Buffers' wire format, written: varints, fixed 64-bit and length-delimited fields, nested messages.
struct ProtoWriter {
    private(set) var bytes: [UInt8] = []

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    mutating func tag(_ field: Int, _ wireType: UInt64) { varint(UInt64(field) << 3 | wireType) }

    mutating func varint(_ field: Int, _ value: UInt64) { tag(field, 0); varint(value) }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        tag(field, 1)
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    mutating func string(_ field: Int, _ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            tag(field, 2)
            varint(UInt64(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    /// A nested message, written in place after its field's tag: one byte is kept for its length, and the body moves
    /// up the rare time its length needs more (a message of 128 bytes or more), rather than a buffer per message.
    mutating func message(_ field: Int, _ body: (inout ProtoWriter) -> Void) {
        tag(field, 2)
        let lengthAt = bytes.count
        bytes.append(0)
        body(&self)
        let length = bytes.count - lengthAt - 1
        if length < 0x80 {
            bytes[lengthAt] = UInt8(length)
            return
        }
        var prefix: [UInt8] = []
        var value = UInt64(length)
        while value >= 0x80 {
            prefix.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        prefix.append(UInt8(value))
        bytes.replaceSubrange(lengthAt..<(lengthAt + 1), with: prefix)
    }

    /// `KeyValue { key = 1; value = 2 }`.
    mutating func keyValue(_ key: String, _ value: OTLPRecords.Value) {
        string(1, key)
        message(2) { $0.anyValue(value) }
    }

    /// `AnyValue`'s one-of: string 1, bool 2, int 3, double 4, array 5 (`ArrayValue { values = 1 }`).
    mutating func anyValue(_ value: OTLPRecords.Value) {
        switch value {
        case .string(let text): string(1, text)
        case .bool(let flag): varint(2, flag ? 1 : 0)
        case .int(let number): varint(3, UInt64(bitPattern: number))
        case .double(let number): fixed64(4, number.bitPattern)
        case .strings(let texts):
            message(5) { array in
                for text in texts { array.message(1) { $0.string(1, text) } }
            }
        }
    }
}

/// Reads Protocol Buffers' wire format, field by field, without a schema (an OTLP answer's `partial_success`).
struct ProtoReader {
    enum Field {
        case varint(Int, UInt64)
        case bytes(Int, ArraySlice<UInt8>)
        case other(Int)
    }

    private let data: ArraySlice<UInt8>
    private var index: Int
    private(set) var failed = false

    init(_ data: ArraySlice<UInt8>) {
        self.data = data
        index = data.startIndex
    }

    /// The next field; nil at the end or when the bytes break off (then `failed`).
    mutating func next() -> Field? {
        guard index < data.endIndex, let key = readVarint() else { return nil }
        let field = Int(truncatingIfNeeded: key >> 3)
        switch key & 7 {
        case 0:
            guard let value = readVarint() else { failed = true; return nil }
            return .varint(field, value)
        case 1, 5:
            let size = key & 7 == 1 ? 8 : 4
            guard data.endIndex - index >= size else { failed = true; return nil }
            index += size
            return .other(field)
        case 2:
            guard let length = readVarint(), length <= UInt64(data.endIndex - index) else { failed = true; return nil }
            let start = index
            index += Int(length)
            return .bytes(field, data[start..<index])
        default:
            failed = true
            return nil
        }
    }

    /// The first length-delimited field `field`, or nil.
    mutating func firstMessage(field wanted: Int) -> ArraySlice<UInt8>? {
        while let field = next() {
            if case .bytes(wanted, let bytes) = field { return bytes }
        }
        return nil
    }

    private mutating func readVarint() -> UInt64? {
        var value: UInt64 = 0, shift: UInt64 = 0
        while index < data.endIndex, shift < 64 {
            let byte = data[index]
            index += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        if index >= data.endIndex || shift >= 64 { failed = true }
        return nil
    }
}

/// How OTLP requests are written (SPEC D1): `application/x-protobuf` (the default) or OTLP/JSON.
public enum OTLPEncoding: String, Sendable, Equatable, CaseIterable {
    case protobuf
    case json

    var contentType: String { self == .protobuf ? "application/x-protobuf" : "application/json" }

    /// `protobuf` or `json`; anything else is refused naming both.
    public init(name: String) throws(OutboxError) {
        guard let encoding = OTLPEncoding(rawValue: name) else {
            throw .invalidConfiguration("otlpEncoding must be protobuf or json, got '\(name)'")
        }
        self = encoding
    }
}
