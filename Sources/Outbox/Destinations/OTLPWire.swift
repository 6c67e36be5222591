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
    /// No credential of its own: a collector that wants one takes it in the user's `headers`.
    static let spec = DestinationSpec(
        destination: .otlp, fields: ["otlpEncoding"], credential: nil,
        headers: ["Content-Type", "Content-Encoding", "Install-ID"],
        makeWire: { configuration, installID in OTLPWire(encoding: configuration.otlpEncoding, installID: installID) })
    /// SPEC D6: our own cap, the default of the gRPC hops many collectors relay through.
    var maxRequestBytes: Int? { 4 * 1024 * 1024 }

    /// The semantic conventions the attributes follow.
    static let schemaURL = "https://opentelemetry.io/schemas/1.44.0"

    func request(endpoint: String, headers: [HeaderField]) -> DeliveryDriver.RequestSettings {
        DeliveryDriver.RequestSettings(url: Self.url(endpoint, "/v1/logs"),
                                       headers: [("Content-Type", encoding.contentType)] + commonHeaders(headers))
    }

    func encode(_ logs: [StoredLog], contexts: [Int64: [UInt8]], times: WireTimes) -> [UInt8] {
        // Resources in the order the batch first meets their context version, each with its logs (D2).
        // A batch has few versions (most one), so a list searched from its end beats hashing each log's.
        var groups: [(context: Int64, members: [Int])] = []
        for (index, log) in logs.enumerated() {
            if let at = groups.lastIndex(where: { $0.context == log.context }) {
                groups[at].members.append(index)
            } else {
                groups.append((log.context, [index]))
            }
        }
        let resources = groups.map { group in
            (OTLPRecords.resource(device: contexts[group.context] ?? contexts[0] ?? [], installID: installID), group.members)
        }
        let sizeHint = logs.reduce(512) { $0 + 2 * $1.payload.count + 160 }
        switch encoding {
        case .protobuf:
            var out = OTLPProtoRecords(capacity: sizeHint)
            OTLPRecords.protobuf(resources, logs: logs, times: times, schemaURL: Self.schemaURL, into: &out)
            return out.proto.bytes
        case .json:
            var out = OTLPJSONRecords(capacity: sizeHint)
            OTLPRecords.json(resources, logs: logs, times: times, schemaURL: Self.schemaURL, into: &out)
            return out.json.bytes
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

/// What a record is written through: protobuf (`OTLPProtoRecords`) or OTLP/JSON (`OTLPJSONRecords`). A record is
/// opened, given its attributes as the stored payload is read, and closed with its event name, known only then.
protocol OTLPRecordWriter: ~Copyable {
    mutating func beginRecord(timeNs: UInt64, observedNs: UInt64) -> ProtoWriter.Mark
    /// One attribute, its key `key` followed by `suffix` when there is one.
    mutating func attribute(_ key: JSONText, suffix: JSONText?, _ value: StoredPayload.Value)
    /// An attribute whose value is an array of strings: opened, given each string, closed.
    mutating func beginStrings(_ key: JSONText) -> ProtoWriter.Mark
    mutating func string(_ text: JSONText)
    mutating func endStrings(_ mark: ProtoWriter.Mark)
    /// Closes the record: its body and `event_name` are `eventName`.
    mutating func endRecord(_ mark: ProtoWriter.Mark, eventName: JSONText)
}

extension OTLPRecordWriter where Self: ~Copyable {
    mutating func attribute(_ key: StaticString, _ value: StoredPayload.Value) { attribute(JSONText(key), suffix: nil, value) }
}

/// A stored log as an OTLP record, and records written as protobuf or OTLP/JSON (SPEC D4).
enum OTLPRecords {
    struct Resource {
        var attributes: [(StaticString, String)]
        var scopeVersion: String
    }

    static func resource(device json: [UInt8], installID: UUID) -> Resource {
        let device = StoredPayload.deviceFields(json)
        func text(_ key: String) -> String? { device[key] }
        var attributes: [(StaticString, String)] = []
        func add(_ key: StaticString, _ value: String?) { if let value { attributes.append((key, value)) } }
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

    /// One log as a record (D4), written into `out` as its stored payload is read.
    static func record<W: OTLPRecordWriter & ~Copyable>(_ log: borrowing StoredLog, timeMs: Int64, into out: inout W) {
        let mark = out.beginRecord(timeNs: UInt64(max(0, timeMs)) &* 1_000_000,
                                   observedNs: UInt64(max(0, log.wallMs)) &* 1_000_000)
        var type = LogType.event, name: JSONText?, strings = ProtoWriter.Mark(at: 0, reserve: 0), identified = false
        log.payload.withUnsafeBufferPointer { payload in
            StoredPayload.scan(payload) { field in
                switch field {
                case .type(let value): type = value
                // The stored text of the log's id, which comes right after the type: the first attribute.
                case .id(let id):
                    out.attribute("log.record.uid", .text(id))
                    identified = true
                case .sid(let sid): out.attribute("session.id", .text(sid))
                case .userID(let user): out.attribute("user.id", .text(user))
                case .name(let text):
                    name = text
                    if type == .screen { out.attribute("app.screen.name", .text(text)) }
                case .path(let text):
                    if type == .screen { out.attribute("outbox.screen.path", .text(text)) }
                case .durationMs(let ms):
                    if type == .endSession { out.attribute("outbox.session.duration_ms", .double(ms)) }
                    if type == .screen { out.attribute("outbox.screen.duration_ms", .double(ms)) }
                case .latitude(let degrees): out.attribute("geo.location.lat", .double(degrees))
                case .longitude(let degrees): out.attribute("geo.location.lon", .double(degrees))
                case .accuracy(let metres): out.attribute("outbox.location.accuracy_m", .double(metres))
                case .property(let key, let value):
                    if type == .userProperties || type == .identify {
                        out.attribute(JSONText("outbox.user."), suffix: key, value)
                    } else {
                        out.attribute(key, suffix: nil, value)
                    }
                case .categoryStart: strings = out.beginStrings(JSONText("outbox.category"))
                case .categoryPart(let part): out.string(part)
                case .categoryEnd: out.endStrings(strings)
                }
            }
            let eventName: JSONText = switch type {
            case .startSession: JSONText("session.start")
            case .endSession: JSONText("session.end")
            case .screen: JSONText("outbox.screen_view")
            case .userProperties: JSONText("outbox.user_properties")
            case .location: JSONText("outbox.location")
            case .identify: JSONText("outbox.identify")
            case .event: name ?? JSONText("event")
            }
            // A payload without its id (none the engine writes) still gets its record's uid.
            if !identified { writeUID(log.id, into: &out) }
            out.endRecord(mark, eventName: eventName)
        }
    }

    private static func writeUID<W: OTLPRecordWriter & ~Copyable>(_ id: UUIDBytes, into out: inout W) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: UUIDBytes.textLength) { uid in
            guard let base = uid.baseAddress else { return }
            id.write(to: base)
            out.attribute("log.record.uid", .text(JSONText(raw: UnsafeBufferPointer(uid), escaped: false)))
        }
    }

    // MARK: - protobuf (opentelemetry-proto's logs service)

    static func protobuf(_ resources: [(Resource, [Int])], logs: [StoredLog], times: WireTimes, schemaURL: String,
                         into out: inout OTLPProtoRecords) {
        for (resource, members) in resources {
            let resourceLogs = out.proto.begin(1, reserve: 3)           // ExportLogsServiceRequest.resource_logs
            out.proto.message(1, reserve: 2) { r in                    // ResourceLogs.resource
                for (key, value) in resource.attributes {
                    r.message(1) { keyValue in                          // Resource.attributes
                        keyValue.string(1, JSONText(key))
                        keyValue.message(2) { $0.string(1, value) }
                    }
                }
            }
            let scopeLogs = out.proto.begin(2, reserve: 3)              // ResourceLogs.scope_logs
            out.proto.message(1) { scope in                            // ScopeLogs.scope
                scope.string(1, "outbox")
                scope.string(2, resource.scopeVersion)
            }
            // Through the buffer, each log is lent to `record`, not copied (a copy retains its payload).
            logs.withUnsafeBufferPointer { logs in
                for index in members { record(logs[index], timeMs: times.timestamp(logs[index]), into: &out) }
            }
            out.proto.end(scopeLogs)
            out.proto.string(3, schemaURL)                              // ResourceLogs.schema_url
            out.proto.end(resourceLogs)
        }
    }

    // MARK: - OTLP/JSON (lowerCamelCase keys, 64-bit integers as strings, enums as numbers)

    static func json(_ resources: [(Resource, [Int])], logs: [StoredLog], times: WireTimes, schemaURL: String,
                     into out: inout OTLPJSONRecords) {
        out.json.raw(#"{"resourceLogs":["#)
        for (index, (resource, members)) in resources.enumerated() {
            if index > 0 { out.json.raw(",") }
            out.json.raw(#"{"resource":{"attributes":["#)
            for (position, (key, value)) in resource.attributes.enumerated() {
                if position > 0 { out.json.raw(",") }
                out.json.raw(#"{"key":""#)
                out.json.raw(key)
                out.json.raw(#"","value":{"stringValue":"#)
                out.json.string(value)
                out.json.raw("}}")
            }
            out.json.raw(#"]},"scopeLogs":[{"scope":{"name":"outbox","version":"#)
            out.json.string(resource.scopeVersion)
            out.json.raw(#"},"logRecords":["#)
            logs.withUnsafeBufferPointer { logs in
                for (position, index) in members.enumerated() {
                    if position > 0 { out.json.raw(",") }
                    record(logs[index], timeMs: times.timestamp(logs[index]), into: &out)
                }
            }
            out.json.raw(#"]}],"schemaUrl":"#)
            out.json.string(schemaURL)
            out.json.raw("}")
        }
        out.json.raw("]}")
    }
}

/// OTLP/JSON records. A stored text is copied as it stands: it is already valid inside a JSON string.
struct OTLPJSONRecords: ~Copyable, OTLPRecordWriter {
    var json: JSONWriter
    /// Whether the next attribute, or string of an array, is the first of its list.
    private var first = true

    init(capacity: Int) { json = JSONWriter(capacity: capacity) }

    mutating func beginRecord(timeNs: UInt64, observedNs: UInt64) -> ProtoWriter.Mark {
        json.raw(#"{"timeUnixNano":""#); json.int(Int64(bitPattern: timeNs))
        json.raw(#"","observedTimeUnixNano":""#); json.int(Int64(bitPattern: observedNs))
        json.raw(#"","severityNumber":9,"severityText":"INFO","attributes":["#)
        first = true
        return ProtoWriter.Mark(at: 0, reserve: 0)
    }

    mutating func attribute(_ key: JSONText, suffix: JSONText?, _ value: StoredPayload.Value) {
        open(key, suffix: suffix)
        switch value {
        case .text(let text): json.raw(#"{"stringValue":"#); quoted(text); json.raw("}")
        case .int(let number): json.raw(#"{"intValue":""#); json.int(number); json.raw(#""}"#)
        case .double(let number):
            // JSON has no NaN or infinity (the engine refuses them on the way in; a stored one would be a fault).
            json.raw(#"{"doubleValue":"#)
            if number.isFinite { json.double(number) } else { json.raw("0") }
            json.raw("}")
        case .bool(let flag): json.raw(#"{"boolValue":"#); json.bool(flag); json.raw("}")
        }
        json.raw("}")
    }

    mutating func beginStrings(_ key: JSONText) -> ProtoWriter.Mark {
        open(key, suffix: nil)
        json.raw(#"{"arrayValue":{"values":["#)
        first = true
        return ProtoWriter.Mark(at: 0, reserve: 0)
    }

    mutating func string(_ text: JSONText) {
        if !first { json.raw(",") }
        first = false
        json.raw(#"{"stringValue":"#); quoted(text); json.raw("}")
    }

    mutating func endStrings(_ mark: ProtoWriter.Mark) {
        json.raw("]}}}")
        first = false
    }

    mutating func endRecord(_ mark: ProtoWriter.Mark, eventName: JSONText) {
        json.raw(#"],"body":{"stringValue":"#)
        quoted(eventName)
        json.raw(#"},"eventName":"#)
        quoted(eventName)
        json.raw("}")
    }

    /// `{"key":"…","value":` after a comma when it is not the first.
    private mutating func open(_ key: JSONText, suffix: JSONText?) {
        if !first { json.raw(",") }
        first = false
        json.raw(#"{"key":""#)
        json.raw(UnsafeRawBufferPointer(key.raw))
        if let suffix { json.raw(UnsafeRawBufferPointer(suffix.raw)) }
        json.raw(#"","value":"#)
    }

    private mutating func quoted(_ text: JSONText) {
        json.raw(UInt8(ascii: "\""))
        json.raw(UnsafeRawBufferPointer(text.raw))
        json.raw(UInt8(ascii: "\""))
    }
}

/// Protobuf records: `LogRecord` time 1, severity 2 and 3, body 5, attributes 6, observed time 11, event name 12;
/// `KeyValue { key = 1; value = 2 }`; `AnyValue`'s one-of string 1, bool 2, int 3, double 4, array 5.
struct OTLPProtoRecords: ~Copyable, OTLPRecordWriter {
    var proto: ProtoWriter
    /// The open `AnyValue` and `ArrayValue` of a strings attribute.
    private var arrayMarks = (ProtoWriter.Mark(at: 0, reserve: 0), ProtoWriter.Mark(at: 0, reserve: 0))

    init(capacity: Int) { proto = ProtoWriter(capacity: capacity) }

    mutating func beginRecord(timeNs: UInt64, observedNs: UInt64) -> ProtoWriter.Mark {
        let mark = proto.begin(2, reserve: 2)                          // ScopeLogs.log_records
        proto.fixed64(1, timeNs)
        proto.varint(2, 9)                                             // SEVERITY_NUMBER_INFO
        proto.string(3, JSONText("INFO"))
        proto.fixed64(11, observedNs)
        return mark
    }

    mutating func attribute(_ key: JSONText, suffix: JSONText?, _ value: StoredPayload.Value) {
        // Texts without escapes are their own bytes, so the lengths are known before writing and nothing is patched
        // afterwards: the common case, and most of a record.
        if !key.escaped, suffix?.escaped != true {
            let valueLength: Int?
            switch value {
            case .text(let text): valueLength = text.escaped ? nil : 1 + ProtoWriter.varintSize(UInt64(text.raw.count)) + text.raw.count
            case .bool: valueLength = 2
            case .int(let number): valueLength = 1 + ProtoWriter.varintSize(UInt64(bitPattern: number))
            case .double: valueLength = 9
            }
            if let valueLength {
                let keyLength = key.raw.count + (suffix?.raw.count ?? 0)
                proto.tag(6, 2)                                        // LogRecord.attributes
                proto.varint(UInt64(1 + ProtoWriter.varintSize(UInt64(keyLength)) + keyLength
                                    + 1 + ProtoWriter.varintSize(UInt64(valueLength)) + valueLength))
                proto.tag(1, 2)                                        // KeyValue.key
                proto.varint(UInt64(keyLength))
                proto.raw(key.raw)
                if let suffix { proto.raw(suffix.raw) }
                proto.tag(2, 2)                                        // KeyValue.value
                proto.varint(UInt64(valueLength))
                switch value {
                case .text(let text): proto.tag(1, 2); proto.varint(UInt64(text.raw.count)); proto.raw(text.raw)
                case .bool(let flag): proto.varint(2, flag ? 1 : 0)
                case .int(let number): proto.varint(3, UInt64(bitPattern: number))
                case .double(let number): proto.fixed64(4, number.bitPattern)
                }
                return
            }
        }
        proto.message(6) { keyValue in
            keyValue.string(1, key, suffix: suffix)
            keyValue.message(2) { any in
                switch value {
                case .text(let text): any.string(1, text)
                case .bool(let flag): any.varint(2, flag ? 1 : 0)
                case .int(let number): any.varint(3, UInt64(bitPattern: number))
                case .double(let number): any.fixed64(4, number.bitPattern)
                }
            }
        }
    }

    mutating func beginStrings(_ key: JSONText) -> ProtoWriter.Mark {
        let mark = proto.begin(6)
        proto.string(1, key)
        arrayMarks.0 = proto.begin(2)
        arrayMarks.1 = proto.begin(5)
        return mark
    }

    mutating func string(_ text: JSONText) {
        proto.message(1) { $0.string(1, text) }
    }

    mutating func endStrings(_ mark: ProtoWriter.Mark) {
        proto.end(arrayMarks.1)
        proto.end(arrayMarks.0)
        proto.end(mark)
    }

    mutating func endRecord(_ mark: ProtoWriter.Mark, eventName: JSONText) {
        proto.message(5) { $0.string(1, eventName) }
        proto.string(12, eventName)
        proto.end(mark)
    }
}

/// Protocol Buffers' wire format, written: varints, fixed 64-bit and length-delimited fields, nested messages.
struct ProtoWriter: ~Copyable {
    /// The bytes (a growing buffer, without `Array`'s checks on every byte).
    private var out: JSONWriter

    init(capacity: Int = 256) { out = JSONWriter(capacity: capacity) }

    var bytes: [UInt8] { out.bytes }

    /// Where an open message's length goes, and how many bytes were kept for it.
    struct Mark {
        var at: Int
        var reserve: Int
    }

    @inline(__always)
    mutating func varint(_ value: UInt64) {
        if value < 0x80 { out.raw(UInt8(truncatingIfNeeded: value)); return }
        var value = value
        while value >= 0x80 {
            out.raw(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        out.raw(UInt8(value))
    }

    /// How many bytes `value` takes as a varint.
    static func varintSize(_ value: UInt64) -> Int { value == 0 ? 1 : (64 - value.leadingZeroBitCount + 6) / 7 }

    mutating func tag(_ field: Int, _ wireType: UInt64) { varint(UInt64(field) << 3 | wireType) }

    mutating func raw(_ bytes: UnsafeBufferPointer<UInt8>) { out.raw(UnsafeRawBufferPointer(bytes)) }

    mutating func varint(_ field: Int, _ value: UInt64) { tag(field, 0); varint(value) }

    mutating func fixed64(_ field: Int, _ value: UInt64) {
        tag(field, 1)
        withUnsafeBytes(of: value.littleEndian) { out.raw($0) }
    }

    mutating func string(_ field: Int, _ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            tag(field, 2)
            varint(UInt64(utf8.count))
            out.raw(UnsafeRawBufferPointer(utf8))
        }
    }

    /// A stored text (its escapes decoded), followed by `suffix` when there is one.
    mutating func string(_ field: Int, _ text: JSONText, suffix: JSONText? = nil) {
        text.withUTF8 { head in
            tag(field, 2)
            guard let suffix else {
                varint(UInt64(head.count))
                out.raw(UnsafeRawBufferPointer(head))
                return
            }
            suffix.withUTF8 { tail in
                varint(UInt64(head.count + tail.count))
                out.raw(UnsafeRawBufferPointer(head))
                out.raw(UnsafeRawBufferPointer(tail))
            }
        }
    }

    /// Opens a nested message after its field's tag, keeping `reserve` bytes for its length: the message moves
    /// only when its length needs another number of bytes (records 2, a batch's outer messages 3: about 16 KiB
    /// and 2 MiB before they move).
    mutating func begin(_ field: Int, reserve: Int = 1) -> Mark {
        tag(field, 2)
        let mark = Mark(at: out.count, reserve: reserve)
        for _ in 0..<reserve { out.raw(0) }
        return mark
    }

    mutating func end(_ mark: Mark) {
        let length = out.count - mark.at - mark.reserve
        var size = 1
        while length >> (7 * size) > 0 { size += 1 }
        if size != mark.reserve { out.move(from: mark.at + mark.reserve, by: size - mark.reserve) }
        var value = length
        for offset in 0..<size {
            out.patch(UInt8(truncatingIfNeeded: value & 0x7F) | (offset < size - 1 ? 0x80 : 0), at: mark.at + offset)
            value >>= 7
        }
    }

    mutating func message(_ field: Int, reserve: Int = 1, _ body: (inout ProtoWriter) -> Void) {
        let mark = begin(field, reserve: reserve)
        body(&self)
        end(mark)
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
