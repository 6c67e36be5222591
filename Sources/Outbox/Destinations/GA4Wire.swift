import FoundationEssentials
import Logging
import Synchronization

/// Google Analytics 4's Measurement Protocol (SPEC D12): `POST {endpoint}/mp/collect?measurement_id=…&api_secret=…`,
/// `{"client_id","user_id"?,"user_properties","events":[{"name","params","timestamp_micros"}]}`. `client_id` is the
/// install id; each event's `timestamp_micros` its capture time, the same on every attempt. GA4 answers 2xx even to
/// events it then drops, so the wire keeps within its rules itself
/// (https://developers.google.com/analytics/devguides/collection/protocol/ga4/sending-events,
/// https://support.google.com/analytics/answer/9267744): 25 events a request, 25 parameters an event, names of 40
/// characters, values of 100, user properties of 24 and 36; an event name GA4 refuses or reserves is rewritten, the
/// original kept in `original_name`; a log older than 72 hours is dead-lettered before any request. GA4 has no
/// de-duplication: a batch sent again after a lost answer is counted twice there.
struct GA4Wire: DeliveryWire {
    var measurementId: String
    var apiSecret: String
    var installID: UUID
    /// Where the rewrites and cuts are warned about, once per name.
    var warnings: GA4Warnings

    var destination: Destination { .ga4 }
    static let spec = DestinationSpec(
        destination: .ga4, fields: ["measurementId", "apiSecret"],
        credential: DestinationCredential(field: "apiSecret", keyPath: \.apiSecret,
                                          missing: "destination ga4 needs apiSecret, the Measurement Protocol API secret"),
        headers: ["Content-Type", "Content-Encoding", "Install-ID"],
        makeWire: { configuration, installID in
            GA4Wire(measurementId: configuration.measurementId, apiSecret: configuration.apiSecret, installID: installID,
                    warnings: GA4Warnings(logger: configuration.logger))
        },
        fieldProblem: { configuration in
            let id = configuration.measurementId
            if id.isEmpty {
                return configuration.endpoint == nil ? nil : ("measurementId", "is required for destination ga4 (G-XXXXXXXXXX)")
            }
            return measurementIdProblem(id).map { ("measurementId", $0) }
        })

    /// The limits GA4 documents (the URLs above).
    static let maxEvents = 25
    static let maxParameters = 25
    static let maxNameLength = 40
    static let maxValueLength = 100
    static let maxUserProperties = 25
    static let maxUserPropertyNameLength = 24
    static let maxUserPropertyValueLength = 36
    /// GA4 takes events up to 72 hours old (`timestamp_micros`).
    static let maxAgeMs: Int64 = 72 * 3600 * 1000

    var maxLogsPerRequest: Int? { Self.maxEvents }
    /// GA4's request limit is 130 kB.
    var maxRequestBytes: Int? { 130_000 }
    /// The Measurement Protocol documents plain JSON bodies only: a gzipped one it could drop behind a 2xx.
    var acceptsGzipBody: Bool { false }

    /// Why `id` is not a GA4 measurement id (`G-` then letters and digits), or nil.
    static func measurementIdProblem(_ id: String) -> String? {
        let rest = id.utf8.dropFirst(2)
        guard id.hasPrefix("G-"), !rest.isEmpty, rest.count <= 20,
              rest.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 90) }) else {
            return "must be a GA4 measurement id, G- then capital letters and digits (G-XXXXXXXXXX), got '\(id.prefix(40))'"
        }
        return nil
    }

    func request(endpoint: String, headers: [HeaderField]) -> DeliveryDriver.RequestSettings {
        let query = "measurement_id=\(Self.percentEncoded(measurementId))&api_secret=\(Self.percentEncoded(apiSecret))"
        return DeliveryDriver.RequestSettings(url: Self.url(endpoint, "/mp/collect", query: query),
                                              headers: [("Content-Type", "application/json")] + commonHeaders(headers))
    }

    /// A query value: everything but unreserved characters percent-encoded.
    static func percentEncoded(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    /// SPEC D12: a log GA4 would drop for its age is never sent.
    func refusal(of log: StoredLog, times: WireTimes) -> String? {
        let age = max(times.deviceNowMs - log.wallMs, times.deviceNowMs - times.deviceTimestamp(log))
        guard age > Self.maxAgeMs else { return nil }
        return "older than 72 hours (\(age / 3_600_000) h): GA4 takes events up to 72 hours old"
    }

    func encode(_ logs: [StoredLog], contexts: [Int64: [UInt8]], times: WireTimes) -> [UInt8] {
        var w = JSONWriter(capacity: logs.reduce(512) { $0 + 2 * $1.payload.count + 300 })
        var userID: String?
        var userProperties: [(String, StoredValue)] = []
        var events: [[UInt8]] = []
        for log in logs {
            let event = self.event(log)
            if let user = event.user { userID = user }
            for (key, value) in event.userProperties {
                userProperties.removeAll { $0.0 == key }
                userProperties.append((key, value))
            }
            events.append(event.json)
        }
        w.raw(#"{"client_id":"#)
        w.string(installID.uuidString.lowercased())
        if let userID {
            w.raw(#","user_id":"#)
            w.string(String(userID.prefix(256)))
        }
        w.raw(#","user_properties":{"#)
        if userProperties.count > Self.maxUserProperties {
            warnings.once("user properties", "GA4 takes 25 user properties a request: the others were dropped")
        }
        for (index, (key, value)) in userProperties.prefix(Self.maxUserProperties).enumerated() {
            if index > 0 { w.raw(",") }
            w.string(key)
            w.raw(#":{"value":"#)
            value.write(into: &w, maxLength: Self.maxUserPropertyValueLength) {
                warnings.once("user property value \(key)", "user property \(key): value cut to 36 characters, GA4's limit")
            }
            w.raw("}")
        }
        w.raw(#"},"events":["#)
        for (index, event) in events.enumerated() {
            if index > 0 { w.raw(",") }
            w.raw(event)
        }
        w.raw("]}")
        return w.bytes
    }

    /// A typed value read from a payload, kept past the scan.
    enum StoredValue {
        case text(String), int(Int64), double(Double), bool(Bool)

        init(_ value: StoredPayload.Value) {
            switch value {
            case .text(let text): self = .text(text.string)
            case .int(let number): self = .int(number)
            case .double(let number): self = .double(number)
            case .bool(let flag): self = .bool(flag)
            }
        }

        func write(into w: inout JSONWriter, maxLength: Int, cut: () -> Void) {
            switch self {
            case .text(let text):
                if text.count > maxLength { cut() }
                w.string(String(text.prefix(maxLength)))
            case .int(let number): w.int(number)
            case .double(let number): if number.isFinite { w.double(number) } else { w.raw("0") }
            // GA4's parameters are strings and numbers.
            case .bool(let flag): w.int(flag ? 1 : 0)
            }
        }
    }

    /// One log as a GA4 event (docs/BEHAVIOUR.md, "D12"), with the user id and user properties it gives the request.
    private func event(_ log: StoredLog) -> (json: [UInt8], user: String?, userProperties: [(String, StoredValue)]) {
        var type = LogType.event, name: String?, sid: String?, user: String?, path: String?
        var durationMs: Double?, latitude: Double?, longitude: Double?, accuracy: Double?
        var properties: [(String, StoredValue)] = [], category: [String]?
        log.payload.withUnsafeBufferPointer { payload in
            StoredPayload.scan(payload) { field in
                switch field {
                case .type(let value): type = value
                case .id: break
                case .sid(let text): sid = text.string
                case .userID(let text): user = text.string
                case .name(let text): name = text.string
                case .path(let text): path = text.string
                case .durationMs(let ms): durationMs = ms
                case .latitude(let degrees): latitude = degrees
                case .longitude(let degrees): longitude = degrees
                case .accuracy(let metres): accuracy = metres
                case .property(let key, let value):
                    if key.is("$event_duration"), case .double(let ms) = value { durationMs = ms } else {
                        properties.append((key.string, StoredValue(value)))
                    }
                case .categoryStart: category = []
                case .categoryPart(let part): category?.append(part.string)
                case .categoryEnd: break
                }
            }
        }
        var params: [(String, StoredValue)] = []
        if let sid { params.append(("session_id", .text(sid))) }
        params.append(("engagement_time_msec", .int(max(1, Int64((durationMs ?? 1).rounded())))))
        var userProperties: [(String, StoredValue)] = []
        let eventName: String
        switch type {
        case .event:
            eventName = eventNameFor(name ?? "event", params: &params)
            if let category { params.append(("category", .text(category.joined(separator: ">")))) }
            params += properties
        case .startSession: eventName = "outbox_session_start"
        case .endSession: eventName = "outbox_session_end"
        case .screen:
            eventName = "screen_view"
            params.append(("screen_name", .text(name ?? "")))
            if let path { params.append(("screen_path", .text(path))) }
            params += properties
        case .userProperties, .identify:
            eventName = type == .identify ? "login" : "set_user_properties"
            if type == .identify { params.append(("method", .text("outbox"))) }
            for (key, value) in properties { userProperties.append((userPropertyName(key), value)) }
        case .location:
            eventName = "location"
            if let latitude { params.append(("latitude", .double(latitude))) }
            if let longitude { params.append(("longitude", .double(longitude))) }
            if let accuracy { params.append(("accuracy", .double(accuracy))) }
        }
        var w = JSONWriter(capacity: 256 + log.payload.count)
        w.raw(#"{"name":"#)
        w.string(eventName)
        w.raw(#","params":{"#)
        if params.count > Self.maxParameters {
            warnings.once("parameters \(eventName)", "event \(eventName): GA4 takes 25 parameters an event; the others were dropped")
        }
        var written = Set<String>()
        for (key, value) in params.prefix(Self.maxParameters) {
            let name = parameterName(key)
            guard written.insert(name).inserted else { continue }
            if written.count > 1 { w.raw(",") }
            w.string(name)
            w.raw(":")
            value.write(into: &w, maxLength: Self.maxValueLength) {
                warnings.once("value \(name)", "parameter \(name): value cut to 100 characters, GA4's limit")
            }
        }
        w.raw(#"},"timestamp_micros":"#)
        w.int(log.wallMs * 1000)
        w.raw("}")
        return (w.bytes, user, userProperties)
    }

    /// SPEC D12: the event's name as GA4 takes it; a rewritten one keeps the original in `original_name`.
    private func eventNameFor(_ name: String, params: inout [(String, StoredValue)]) -> String {
        let rewritten = Self.eventName(name)
        guard rewritten != name else { return name }
        params.append(("original_name", .text(name)))
        warnings.once("event \(name)", "event name \(name) is not one GA4 takes: sent as \(rewritten), the original in original_name")
        return rewritten
    }

    /// `[A-Za-z][A-Za-z0-9_]*` of at most 40 characters, not reserved: invalid characters become `_`, a reserved name
    /// (or prefix) gets `e_` before it.
    static func eventName(_ name: String) -> String {
        var rewritten = WireName.rewritten(name, dollar: false, maxLength: maxNameLength)
        if reservedEventNames.contains(rewritten) || reservedPrefixes.contains(where: rewritten.hasPrefix) {
            rewritten = String(("e_" + rewritten).prefix(maxNameLength))
        }
        return rewritten
    }

    private func parameterName(_ key: String) -> String {
        var name = WireName.rewritten(key, dollar: false, maxLength: Self.maxNameLength)
        if Self.reservedPrefixes.contains(where: name.hasPrefix) { name = String(("p_" + name).prefix(Self.maxNameLength)) }
        if name != key { warnings.once("parameter \(key)", "parameter \(key) is not a name GA4 takes: sent as \(name)") }
        return name
    }

    private func userPropertyName(_ key: String) -> String {
        var name = WireName.rewritten(key, dollar: false, maxLength: Self.maxUserPropertyNameLength)
        if Self.reservedUserProperties.contains(name) || Self.reservedPrefixes.contains(where: name.hasPrefix) {
            name = String(("u_" + name).prefix(Self.maxUserPropertyNameLength))
        }
        if name != key { warnings.once("user property \(key)", "user property \(key) is not a name GA4 takes: sent as \(name)") }
        return name
    }

    /// GA4's reserved names (the Measurement Protocol's reference, "Reserved names").
    static let reservedEventNames: Set<String> = [
        "ad_activeview", "ad_click", "ad_exposure", "ad_impression", "ad_query", "ad_reward", "adunit_exposure",
        "app_background", "app_clear_data", "app_exception", "app_remove", "app_store_refund",
        "app_store_subscription_cancel", "app_store_subscription_convert", "app_store_subscription_renew", "app_update",
        "app_upgrade", "dynamic_link_app_open", "dynamic_link_app_update", "dynamic_link_first_open", "error",
        "firebase_campaign", "firebase_in_app_message_action", "firebase_in_app_message_dismiss",
        "firebase_in_app_message_impression", "first_open", "first_visit", "in_app_purchase", "notification_dismiss",
        "notification_foreground", "notification_open", "notification_receive", "notification_send", "os_update",
        "session_start", "session_start_with_rollout", "user_engagement"]
    static let reservedPrefixes = ["_", "firebase_", "ga_", "google_", "gtag."]
    static let reservedUserProperties: Set<String> = ["first_open_time", "first_visit_time", "last_deep_link_referrer",
                                                      "user_id", "first_open_after_install"]
}

/// The GA4 wire's warnings, each said once per name for the wire's life (SPEC D12, as T3's cuts).
final class GA4Warnings: Sendable {
    let logger: Logger
    private let said = Mutex<Set<String>>([])

    init(logger: Logger) {
        self.logger = logger
    }

    func once(_ key: String, _ message: @autoclosure () -> String) {
        guard said.withLock({ $0.count < 10_000 && $0.insert(key).inserted }) else { return }
        logger.warning("\(message())", metadata: ["outbox.destination": "ga4"])
    }
}

extension String {
    /// The text with `0`s before it up to `width` characters.
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
