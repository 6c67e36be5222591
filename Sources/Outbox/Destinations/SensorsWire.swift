import FoundationEssentials
import Synchronization

/// Sensors Analytics' data-access wire (SPEC D11): `POST` the endpoint as the Sensors console gives it
/// (`https://host:8106/sa?project=P`), a form `crc=…&gzip=1&data_list=…` whose `data_list` is the base64 of the
/// gzipped JSON array of records, percent-encoded, and `crc` the Java `String.hashCode` of that base64 text (as
/// Sensors' own SDKs send it). Each log is one record: `_track_id` a 31-bit number derived from the log's id (Sensors
/// de-duplicates by it), `time` the capture time, `_flush_time` the device's clock at this attempt — the server
/// corrects `time` by it (D7a) —, `distinct_id` the user id or else the install id. Answers are read as R1 says.
struct SensorsWire: DeliveryWire {
    var installID: UUID
    /// The records' compressor, kept for every batch: setting one up cost as much as compressing a batch of 50 (D10).
    var gzip = KeptGzip()

    var destination: Destination { .sensors }
    static let spec = DestinationSpec(
        destination: .sensors, fields: [], credential: nil,
        headers: ["Content-Type", "Content-Encoding", "Install-ID"],
        makeWire: { _, installID in SensorsWire(installID: installID) },
        fieldProblem: { configuration in
            guard let endpoint = configuration.endpoint, projectProblem(endpoint) else { return nil }
            return ("endpoint", "must be the Sensors server URL with its project, as https://host:8106/sa?project=NAME;"
                        + " got '\(maskingCredentials(in: endpoint))'")
        },
        endpointAtBase: { base in (base.hasSuffix("/") ? String(base.dropLast()) : base) + "/sa?project=default" })

    /// Sensors' data-access guide: at most 50 records a request
    /// (https://manual.sensorsdata.cn/sa/2.5/en/api-1573850.html).
    var maxLogsPerRequest: Int? { 50 }
    /// The form carries its records gzipped already.
    var acceptsGzipBody: Bool { false }

    /// Whether the endpoint lacks a non-empty `project` query parameter.
    static func projectProblem(_ endpoint: String) -> Bool {
        let query = endpoint.split(separator: "#", maxSplits: 1).first?.split(separator: "?", maxSplits: 1).dropFirst().first ?? ""
        return !query.split(separator: "&").contains { $0.hasPrefix("project=") && $0.count > "project=".count }
    }

    func request(endpoint: String, headers: [HeaderField]) -> DeliveryDriver.RequestSettings {
        DeliveryDriver.RequestSettings(url: endpoint,
                                       headers: [("Content-Type", "application/x-www-form-urlencoded")] + commonHeaders(headers))
    }

    func encode(_ logs: [StoredLog], contexts: [Int64: [UInt8]], times: WireTimes) -> [UInt8] {
        Self.form(records(logs, contexts: contexts, flushTimeMs: times.deviceNowMs), gzip: gzip)
    }

    /// The JSON array of records (SPEC D11): what `data_list` carries, gzipped.
    func records(_ logs: [StoredLog], contexts: [Int64: [UInt8]], flushTimeMs: Int64) -> [UInt8] {
        var out = EventJSON(capacity: logs.reduce(512) { $0 + 2 * $1.payload.count + 700 })
        out.json.raw("[")
        var presets = DeviceProperties(contexts: contexts, installID: installID, style: .sensors)
        var lib = DeviceProperties(contexts: contexts, installID: installID, style: .sensorsLib)
        let install = Array(installID.uuidString.lowercased().utf8)
        out.logs(logs) { log, out in
            let device = (lib: lib.fragment(log.context), properties: presets.fragment(log.context))
            record(log, device: device, install: install, flushTimeMs: flushTimeMs, into: &out)
        }
        out.json.raw("]")
        return out.json.bytes
    }

    /// The form Sensors' SDKs post: `crc=<hash>&gzip=1&data_list=<percent-encoded base64>`. D10: the records are
    /// gzipped by the engine's own compressor (any inflater reads it; zlib's level 6 was 40 % of the wire's time), and
    /// the base64 text is hashed and percent-encoded as bytes in one pass (its characters are ASCII: a UTF-16 unit
    /// each, as Java hashes them).
    static func form(_ json: [UInt8], gzip: KeptGzip = KeptGzip()) -> [UInt8] {
        let gzipped = gzip.compress(json)
        // Read through its buffer: `Data`'s own iterator cost an eighth of the wire's time (D10).
        return Data(gzipped ?? json).base64EncodedData().withUnsafeBytes { (base64: UnsafeRawBufferPointer) -> [UInt8] in
            var crc: Int32 = 0
            for byte in base64 { crc = crc &* 31 &+ Int32(byte) }
            var body = Array("crc=\(crc)&gzip=\(gzipped == nil ? 0 : 1)&data_list=".utf8)
            body.reserveCapacity(body.count + base64.count + base64.count / 8 + 16)
            for byte in base64 {
                // The SDKs' set: URL query characters less `:#[]@!$&'()*+,;=`, so of base64's only `+` and `=` change.
                switch byte {
                case UInt8(ascii: "+"): body.append(UInt8(ascii: "%")); body.append(UInt8(ascii: "2")); body.append(UInt8(ascii: "B"))
                case UInt8(ascii: "="): body.append(UInt8(ascii: "%")); body.append(UInt8(ascii: "3")); body.append(UInt8(ascii: "D"))
                default: body.append(byte)
                }
            }
            return body
        }
    }

    /// Java's `String.hashCode` over UTF-16 code units, as an Int32 with wraparound (Sensors' `crc`).
    static func javaHashCode(_ text: String) -> Int32 {
        text.utf16.reduce(Int32(0)) { $0 &* 31 &+ Int32($1) }
    }

    /// SPEC D11: a stable 31-bit number of the log's id: the same on every attempt, so Sensors drops a resend.
    static func trackID(_ id: UUIDBytes) -> Int64 {
        Int64((id.high ^ id.low ^ (id.high >> 31) ^ (id.low >> 31)) & 0x7FFF_FFFF)
    }

    /// One log as a Sensors record (D4's table in docs/BEHAVIOUR.md, "D11"): its properties as the payload is read,
    /// then what the whole payload decides (`type`, `event`, the ids).
    private func record(_ log: borrowing StoredLog, device: (lib: [UInt8], properties: [UInt8]), install: [UInt8],
                        flushTimeMs: Int64, into out: inout EventJSON) {
        out.json.raw(#"{"_track_id":"#)
        out.json.int(Self.trackID(log.id))
        out.json.raw(#","time":"#)
        out.json.int(log.wallMs)
        out.json.raw(#","lib":{"#)
        out.json.raw(device.lib)
        out.json.raw(#"},"properties":{"#)
        var type = LogType.event, name: JSONText?, user: JSONText?
        log.payload.withUnsafeBufferPointer { payload in
            StoredPayload.scan(payload) { field in
                switch field {
                case .type(let value):
                    type = value
                    // A profile's properties are the person's alone; an event's start with the device's presets.
                    if type == .userProperties { out.first = true } else { out.json.raw(device.properties) }
                case .id: break
                case .sid(let sid): out.member("$event_session_id"); out.quoted(sid)
                case .userID(let id): user = id
                case .name(let text):
                    name = text
                    if type == .screen { out.member("$screen_name"); out.quoted(text) }
                case .path(let text): out.member("$url"); out.quoted(text)
                case .durationMs(let ms): out.member("event_duration"); out.number(ms / 1000)
                case .latitude(let degrees): out.member("$latitude"); out.number(degrees)
                case .longitude(let degrees): out.member("$longitude"); out.number(degrees)
                case .accuracy(let metres): out.member("accuracy"); out.number(metres)
                case .property(let key, let value):
                    if key.is("$event_duration"), case .double(let ms) = value {
                        // SPEC A4's timer: Sensors' `event_duration` is in seconds.
                        out.member("event_duration")
                        out.number(ms / 1000)
                        return
                    }
                    Self.key(key, into: &out)
                    out.value(value)
                case .categoryStart: out.member("category"); out.json.raw("["); out.first = true
                case .categoryPart(let part): out.element(); out.quoted(part)
                case .categoryEnd: out.json.raw("]"); out.first = false
                }
            }
        }
        out.json.raw("}")
        switch type {
        case .userProperties: out.json.raw(#","type":"profile_set""#)
        case .identify: out.json.raw(#","type":"track_signup","event":"$SignUp","original_id":"#); out.quoted(install)
        case .startSession: out.json.raw(#","type":"track","event":"$AppStart""#)
        case .endSession: out.json.raw(#","type":"track","event":"$AppEnd""#)
        case .screen: out.json.raw(#","type":"track","event":"$AppViewScreen""#)
        case .location: out.json.raw(#","type":"track","event":"$Location""#)
        case .event:
            out.json.raw(#","type":"track","event":"#)
            if let name, !name.escaped, WireName.isKept(name.raw, dollar: true, maxLength: 100) { out.quoted(name) }
            else if let name { out.json.string(WireName.rewritten(name.string, dollar: true, maxLength: 100)) }
            else { out.json.raw(#""event""#) }
        }
        out.json.raw(#","distinct_id":"#)
        if let user { out.quoted(user) } else { out.quoted(install) }
        out.json.raw(#","anonymous_id":"#)
        out.quoted(install)
        if let user { out.json.raw(#","login_id":"#); out.quoted(user) }
        out.json.raw(#","_flush_time":"#)
        out.json.int(flushTimeMs)
        out.json.raw("}")
    }

    /// A property key as Sensors takes it (`[A-Za-z_$][A-Za-z0-9_$]*`, at most 100, not one of its reserved names):
    /// copied when it is one already.
    private static func key(_ key: JSONText, into out: inout EventJSON) {
        // D10: a key that is a Sensors name already is copied without making a String of it (no reserved name is
        // longer than 11 characters).
        if !key.escaped, WireName.isKept(key.raw, dollar: true, maxLength: 100), !isReserved(key.raw) {
            out.member(key)
            return
        }
        let text = key.string
        let rewritten = WireName.rewritten(text, dollar: true, maxLength: 100)
        if rewritten == text, !reservedKeys.contains(text.lowercased()) {
            out.member(key)
        } else {
            out.element()
            out.json.string(reservedKeys.contains(rewritten.lowercased()) ? "_" + rewritten : rewritten)
            out.json.raw(":")
        }
    }

    /// Whether `raw` is a reserved name in any case, compared as bytes (D10: no String a property).
    private static func isReserved(_ raw: UnsafeBufferPointer<UInt8>) -> Bool {
        guard raw.count <= 11 else { return false }
        return reservedBytes.contains { name in
            name.count == raw.count && zip(name, raw).allSatisfy { $0 == ($1 | (($1 >= 0x41 && $1 <= 0x5A) ? 0x20 : 0)) }
        }
    }

    private static let reservedBytes: [[UInt8]] = reservedKeys.map { Array($0.utf8) }

    /// Sensors' reserved property names (its data format's guide, "reserved fields").
    static let reservedKeys: Set<String> = ["date", "datetime", "distinct_id", "event", "events", "event_id", "first_id",
                                            "id", "original_id", "device_id", "properties", "second_id", "time",
                                            "user_id", "users"]
}

/// A name as a vendor's identifiers allow it: letters, digits and `_` (and `$` for Sensors), a letter first (or `_`,
/// `$` where allowed), cut to `maxLength`; every other character becomes `_`.
enum WireName {
    static func rewritten(_ name: String, dollar: Bool, maxLength: Int) -> String {
        var out = ""
        for scalar in name.unicodeScalars {
            let ascii = scalar.isASCII ? UInt8(scalar.value) : 0
            let letter = (ascii | 0x20) >= UInt8(ascii: "a") && (ascii | 0x20) <= UInt8(ascii: "z")
            let digit = ascii >= UInt8(ascii: "0") && ascii <= UInt8(ascii: "9")
            let allowed = letter || digit || ascii == UInt8(ascii: "_") || (dollar && ascii == UInt8(ascii: "$"))
            if out.isEmpty, !letter, !(dollar && allowed && !digit) { out += dollar ? "_" : "e_" }
            out.unicodeScalars.append(allowed ? scalar : "_")
        }
        if out.isEmpty { out = dollar ? "_" : "e_" }
        return String(out.prefix(maxLength))
    }

    /// Whether the name's UTF-8 bytes are one `rewritten` gives back unchanged (D10's fast path: no String made).
    static func isKept(_ name: UnsafeBufferPointer<UInt8>, dollar: Bool, maxLength: Int) -> Bool {
        guard let first = name.first, name.count <= maxLength else { return false }
        func letter(_ byte: UInt8) -> Bool { (byte | 0x20) >= UInt8(ascii: "a") && (byte | 0x20) <= UInt8(ascii: "z") }
        guard letter(first) || (dollar && (first == UInt8(ascii: "_") || first == UInt8(ascii: "$"))) else { return false }
        return name.allSatisfy { byte in
            letter(byte) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
                || (dollar && byte == UInt8(ascii: "$"))
        }
    }
}

/// A fast compressor kept for many bodies and shared safely: an engine encodes on its loop, so the lock is not
/// contended; nil inside when its tables could not be allocated (bodies then go uncompressed, `gzip=0`).
final class KeptGzip: Sendable {
    private let state = Mutex<FastGzip?>(FastGzip())

    func compress(_ bytes: [UInt8]) -> [UInt8]? {
        state.withLock { $0?.compress(bytes) }
    }
}
