import FoundationEssentials

/// PostHog's capture API (SPEC D1, D4, D6, D7a): `POST {endpoint}/batch/` with
/// `{"api_key","batch":[…],"sent_at","historical_migration":false}`. Each log is one event: `uuid` its id (PostHog
/// collapses a resend by it), `distinct_id` the user id or else the install id, `$session_id` its session, and the
/// device's properties as PostHog's own SDKs name them. PostHog corrects `timestamp` by `sent_at` on arrival, so
/// both are the device's clock (D7a): `sent_at` now, and each `timestamp` now minus the log's age on the boot clock.
struct PostHogWire: DeliveryWire {
    var apiKey: String
    var installID: UUID

    var destination: Destination { .posthog }
    static let spec = DestinationSpec(
        destination: .posthog, fields: ["apiKey"],
        credential: DestinationCredential(field: "apiKey", keyPath: \.apiKey,
                                          missing: "destination posthog needs apiKey, the project API key (phc_…)"),
        headers: ["Content-Type", "Content-Encoding", "Install-ID"],
        makeWire: { configuration, installID in PostHogWire(apiKey: configuration.apiKey, installID: installID) })
    /// SPEC D6: PostHog's capture takes 20 MB a request and about 1 MB an event (Kafka's message cap).
    var maxRequestBytes: Int? { 20_000_000 }
    var maxLogBytes: Int? { 1_000_000 }

    func request(endpoint: String, headers: [HeaderField]) -> DeliveryDriver.RequestSettings {
        DeliveryDriver.RequestSettings(url: Self.url(endpoint, "/batch/"),
                                       headers: [("Content-Type", "application/json")] + commonHeaders(headers))
    }

    func encode(_ logs: [StoredLog], contexts: [Int64: [UInt8]], times: WireTimes) -> [UInt8] {
        var out = EventJSON(capacity: logs.reduce(512) { $0 + 2 * $1.payload.count + 700 })
        out.json.raw(#"{"api_key":"#)
        out.json.string(apiKey)
        out.json.raw(#","historical_migration":false,"sent_at":"#)
        out.json.timestamp(ms: times.deviceNowMs)
        out.json.raw(#","batch":["#)
        var device = DeviceProperties(contexts: contexts, installID: installID, style: .posthog)
        // The install id's text once a batch: made per event it cost more than the rest of the event.
        let install = Array(installID.uuidString.lowercased().utf8)
        out.logs(logs) { log, out in
            event(log, timeMs: times.deviceTimestamp(log), device: device.fragment(log.context), install: install, into: &out)
        }
        out.json.raw("]}")
        return out.json.bytes
    }

    /// One log as a PostHog event (D4), written as its payload is read: its properties first, then what the whole
    /// payload decides (`event`, `distinct_id`).
    private func event(_ log: borrowing StoredLog, timeMs: Int64, device: [UInt8], install: [UInt8], into out: inout EventJSON) {
        out.json.raw(#"{"uuid":""#)
        out.json.id(log.id)
        out.json.raw(#"","timestamp":"#)
        out.json.timestamp(ms: timeMs)
        out.json.raw(#","properties":{"#)
        out.json.raw(device)
        var type = LogType.event, name: JSONText?, user: JSONText?, setOpen = false
        log.payload.withUnsafeBufferPointer { payload in
            StoredPayload.scan(payload) { field in
                switch field {
                case .type(let value):
                    type = value
                    if type == .identify { out.member("$anon_distinct_id"); out.quoted(install) }
                case .id: break     // written from `log.id` ahead of the fields
                case .sid(let sid): out.member("$session_id"); out.quoted(sid)
                case .userID(let id): user = id
                case .name(let text):
                    name = text
                    if type == .screen { out.member("$screen_name"); out.quoted(text) }
                case .path(let text): out.member("path"); out.quoted(text)
                case .durationMs(let ms): out.member("duration_ms"); out.number(ms)
                case .latitude(let degrees): out.member("latitude"); out.number(degrees)
                case .longitude(let degrees): out.member("longitude"); out.number(degrees)
                case .accuracy(let metres): out.member("accuracy"); out.number(metres)
                case .property(let key, let value):
                    // User properties and an identify's traits are the person's (`$set`); the others the event's.
                    if (type == .userProperties || type == .identify) && !setOpen {
                        out.member("$set")
                        out.json.raw("{")
                        out.first = true
                        setOpen = true
                    }
                    out.member(key)
                    out.value(value)
                case .categoryStart: out.member("category"); out.json.raw("["); out.first = true
                case .categoryPart(let part): out.element(); out.quoted(part)
                case .categoryEnd: out.json.raw("]"); out.first = false
                }
            }
            if setOpen { out.json.raw("}") }
            out.json.raw(#"},"event":"#)
            switch type {
            case .startSession: out.json.raw(#""session_start""#)
            case .endSession: out.json.raw(#""session_end""#)
            case .screen: out.json.raw(#""$screen""#)
            case .userProperties: out.json.raw(#""$set""#)
            case .location: out.json.raw(#""location""#)
            case .identify: out.json.raw(#""$identify""#)
            case .event: if let name { out.quoted(name) } else { out.json.raw(#""event""#) }
            }
            out.json.raw(#","distinct_id":"#)
            if let user { out.quoted(user) } else { out.quoted(install) }
            out.json.raw("}")
        }
    }
}

/// A JSON event being written from a stored payload: members of the open object, texts copied as they stand (they
/// are valid inside a JSON string already).
struct EventJSON: ~Copyable {
    var json: JSONWriter
    /// Whether the next member (or element) is the first of its object (or array).
    var first = false

    init(capacity: Int) {
        json = JSONWriter(capacity: capacity)
    }

    /// The batch's logs as a comma-separated run of objects, each written by `write` with its log lent through the
    /// array's buffer, not copied (a copy retains its payload).
    mutating func logs(_ logs: [StoredLog], _ write: (borrowing StoredLog, inout EventJSON) -> Void) {
        logs.withUnsafeBufferPointer { logs in
            for index in logs.indices {
                if index > 0 { json.raw(",") }
                write(logs[index], &self)
            }
        }
    }

    mutating func member(_ key: StaticString) {
        if !first { json.raw(",") }
        first = false
        json.raw(UInt8(ascii: "\""))
        json.raw(key)
        json.raw(#"":"#)
    }

    mutating func member(_ key: JSONText) {
        if !first { json.raw(",") }
        first = false
        quoted(key)
        json.raw(":")
    }

    mutating func element() {
        if !first { json.raw(",") }
        first = false
    }

    mutating func quoted(_ bytes: [UInt8]) {
        json.raw(UInt8(ascii: "\""))
        json.raw(bytes)
        json.raw(UInt8(ascii: "\""))
    }

    mutating func quoted(_ text: JSONText) {
        json.raw(UInt8(ascii: "\""))
        json.raw(UnsafeRawBufferPointer(text.raw))
        json.raw(UInt8(ascii: "\""))
    }

    /// A number; JSON has none for NaN or infinity (the engine refuses them on the way in), so such a stored
    /// value, a fault, goes as 0.
    mutating func number(_ value: Double) {
        if value.isFinite { json.double(value) } else { json.raw("0") }
    }

    mutating func value(_ value: StoredPayload.Value) {
        switch value {
        case .text(let text): quoted(text)
        case .int(let number): json.int(number)
        case .double(let number): self.number(number)
        case .bool(let flag): json.bool(flag)
        }
    }
}

/// The device context's fields as an event wire's properties, written once per context version of a batch
/// (SPEC D4): PostHog's `$os`, `$app_version`…, or Segment's `context` objects.
struct DeviceProperties {
    enum Style { case posthog, segment, amplitude, mixpanel, sensors, sensorsLib }

    let contexts: [Int64: [UInt8]]
    let installID: UUID
    let style: Style
    private var cache: [Int64: [UInt8]] = [:]

    init(contexts: [Int64: [UInt8]], installID: UUID, style: Style) {
        self.contexts = contexts
        self.installID = installID
        self.style = style
    }

    mutating func fragment(_ context: Int64) -> [UInt8] {
        if let known = cache[context] { return known }
        let made = Self.make(contexts[context] ?? contexts[0] ?? [], installID: installID, style: style)
        cache[context] = made
        return made
    }

    private static func make(_ json: [UInt8], installID: UUID, style: Style) -> [UInt8] {
        let device = StoredPayload.deviceFields(json)
        let install = installID.uuidString.lowercased()
        let version = device["sdkVersion"] ?? OutboxVersion.string
        var w = JSONWriter(capacity: 512)
        func pair(_ key: StaticString, _ value: String?, comma: Bool = true) {
            guard let value else { return }
            if comma { w.raw(",") }
            w.raw(UInt8(ascii: "\""))
            w.raw(key)
            w.raw(#"":"#)
            w.string(value)
        }
        switch style {
        case .posthog:
            pair("$device_id", install, comma: false)
            pair("$lib", "outbox")
            pair("$lib_version", version)
            pair("$os", device["osName"])
            pair("$os_version", device["osVersion"])
            pair("$app_version", device["appVersion"])
            pair("$app_build", device["appBuild"])
            pair("$app_namespace", device["appNamespace"])
            pair("$device_manufacturer", device["oemName"])
            pair("$device_model", device["model"])
            pair("$device_type", "Desktop")
            pair("$locale", device["locale"])
        case .segment:
            w.raw(#""app":{"#)
            pair("name", device["appNamespace"] ?? "outbox", comma: false)
            pair("version", device["appVersion"])
            pair("build", device["appBuild"])
            pair("namespace", device["appNamespace"])
            w.raw(#"},"device":{"#)
            pair("id", install, comma: false)
            pair("manufacturer", device["oemName"])
            pair("model", device["model"])
            pair("type", "linux")
            w.raw(#"},"os":{"#)
            pair("name", device["osName"] ?? "Linux", comma: false)
            pair("version", device["osVersion"])
            w.raw(#"},"library":{"#)
            pair("name", "outbox", comma: false)
            pair("version", version)
            w.raw("}")
            pair("locale", device["locale"])
        case .amplitude:
            pair("device_id", install, comma: false)
            pair("platform", "Linux")
            pair("os_name", device["osName"] ?? "Linux")
            pair("os_version", device["osVersion"])
            pair("app_version", device["appVersion"])
            pair("device_manufacturer", device["oemName"])
            pair("device_model", device["model"])
            pair("language", device["locale"])
            pair("library", "outbox/" + version)
        case .mixpanel:
            pair("$device_id", install, comma: false)
            pair("mp_lib", "outbox")
            pair("$lib_version", version)
            pair("$os", device["osName"] ?? "Linux")
            pair("$os_version", device["osVersion"])
            pair("$app_version_string", device["appVersion"])
            pair("$app_build_number", device["appBuild"])
            pair("$manufacturer", device["oemName"])
            pair("$model", device["model"])
            pair("locale", device["locale"])
        case .sensors:
            // SPEC D11: Sensors' `$`-presets.
            pair("$lib", "outbox", comma: false)
            pair("$lib_version", version)
            pair("$device_id", install)
            pair("$os", device["osName"])
            pair("$os_version", device["osVersion"])
            pair("$app_version", device["appVersion"])
            pair("$app_id", device["appNamespace"])
            pair("$manufacturer", device["oemName"])
            pair("$model", device["model"])
        case .sensorsLib:
            pair("$lib", "outbox", comma: false)
            pair("$lib_version", version)
            pair("$lib_method", "code")
            pair("$app_version", device["appVersion"])
        }
        return w.bytes
    }
}
