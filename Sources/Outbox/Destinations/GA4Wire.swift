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
        // The events first, in a buffer of their own: the request's `user_id` and `user_properties`, which come
        // before them, are known only once every log is read.
        var events = EventJSON(capacity: logs.reduce(64) { $0 + 2 * $1.payload.count + 200 })
        var batch = GA4Batch()
        events.logs(logs) { log, out in event(log, into: &out.json, batch: &batch) }
        var w = JSONWriter(capacity: events.json.count + 512)
        w.raw(#"{"client_id":"#)
        w.string(installID.uuidString.lowercased())
        if let userID = batch.userID {
            w.raw(#","user_id":"#)
            w.string(String(userID.prefix(256)))
        }
        w.raw(#","user_properties":{"#)
        if batch.userProperties.count > Self.maxUserProperties {
            warnings.once("user properties", "GA4 takes 25 user properties a request: the others were dropped")
        }
        for (index, (key, value)) in batch.userProperties.prefix(Self.maxUserProperties).enumerated() {
            if index > 0 { w.raw(",") }
            w.string(key)
            w.raw(#":{"value":"#)
            value.write(into: &w, maxLength: Self.maxUserPropertyValueLength) {
                warnings.once("user property value \(key)", "user property \(key): value cut to 36 characters, GA4's limit")
            }
            w.raw("}")
        }
        w.raw(#"},"events":["#)
        events.json.withBytes { w.raw($0) }
        w.raw("]}")
        return w.bytes
    }

    /// What the logs of one request give it beyond their events, and the room an event is read into, reused from
    /// log to log (SPEC D10: no per-event arrays).
    private struct GA4Batch {
        /// The last user id the batch names, and its bytes as stored: the text is made only when it changes.
        var userID: String?
        var userBytes: [UInt8] = []
        var userProperties: [(String, StoredValue)] = []
        /// The event's properties, pointing into its payload: valid only while it is read.
        var properties: [(JSONText, StoredPayload.Value)] = []
        /// The parameter names an event has written, for GA4's one-per-name.
        var written = ByteNames()
        /// The parameters whose values the batch has cut: warned about once a batch here, once a wire's life there.
        var cut = ByteNames()

        mutating func user(_ text: JSONText) {
            guard userID == nil || !userBytes.elementsEqual(text.raw) else { return }
            userID = text.string
            userBytes.removeAll(keepingCapacity: true)
            userBytes.append(contentsOf: text.raw)
        }

    }

    /// A few short names (an event's 25 parameters at most), each compared byte for byte: no String made.
    struct ByteNames {
        private var bytes: [UInt8] = []
        /// Where each name ends in `bytes`.
        private var ends: [Int] = []

        var count: Int { ends.count }

        /// Whether `name` is new here; it is kept from now on.
        mutating func insert(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
            var start = 0
            for end in ends {
                if end - start == name.count, bytes[start..<end].elementsEqual(name) { return false }
                start = end
            }
            bytes.append(contentsOf: name)
            ends.append(bytes.count)
            return true
        }

        mutating func removeAll() {
            bytes.removeAll(keepingCapacity: true)
            ends.removeAll(keepingCapacity: true)
        }
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

    /// A parameter's value: as the payload holds it, or a text of ours (the category path).
    private enum ParameterValue {
        case stored(StoredPayload.Value), text(String)
    }

    /// One log as a GA4 event (docs/BEHAVIOUR.md, "D12"), written as its payload is read; its user id and user
    /// properties go to `batch`. Names and values GA4 takes as they are stored are copied byte for byte; only those
    /// it would refuse, cut or find reserved are made into texts and rewritten (SPEC D10).
    private func event(_ log: borrowing StoredLog, into w: inout JSONWriter, batch: inout GA4Batch) {
        let wallMs = log.wallMs
        log.payload.withUnsafeBufferPointer { payload in
            var type = LogType.event, name: JSONText?, sid: JSONText?, user: JSONText?, path: JSONText?
            var durationMs: Double?, latitude: Double?, longitude: Double?, accuracy: Double?
            var category: [String]?
            batch.properties.removeAll(keepingCapacity: true)
            StoredPayload.scan(payload) { field in
                switch field {
                case .type(let value): type = value
                case .id: break
                case .sid(let text): sid = text
                case .userID(let text): user = text
                case .name(let text): name = text
                case .path(let text): path = text
                case .durationMs(let ms): durationMs = ms
                case .latitude(let degrees): latitude = degrees
                case .longitude(let degrees): longitude = degrees
                case .accuracy(let metres): accuracy = metres
                case .property(let key, let value):
                    if key.is("$event_duration"), case .double(let ms) = value { durationMs = ms } else {
                        batch.properties.append((key, value))
                    }
                case .categoryStart: category = []
                case .categoryPart(let part): category?.append(part.string)
                case .categoryEnd: break
                }
            }
            if let user { batch.user(user) }
            // The event's name: a stored one GA4 takes is copied, any other rewritten (its original kept).
            var rewrittenFrom: JSONText?
            var eventName: String?
            var nameBytes = JSONText("event")
            switch type {
            case .event:
                if let name {
                    if Self.isTakenAsEventName(name) {
                        nameBytes = name
                    } else {
                        let original = name.string
                        let rewritten = Self.eventName(original)
                        if rewritten != original {
                            rewrittenFrom = name
                            warnings.once("event \(original)",
                                          "event name \(original) is not one GA4 takes: sent as \(rewritten), the original in original_name")
                        }
                        eventName = rewritten
                    }
                }
            case .startSession: nameBytes = JSONText("outbox_session_start")
            case .endSession: nameBytes = JSONText("outbox_session_end")
            case .screen: nameBytes = JSONText("screen_view")
            case .identify: nameBytes = JSONText("login")
            case .userProperties: nameBytes = JSONText("set_user_properties")
            case .location: nameBytes = JSONText("location")
            }
            w.raw(#"{"name":""#)
            // Every event name is `[A-Za-z0-9_]`: nothing to escape.
            if var eventName { eventName.withUTF8 { w.raw(UnsafeRawBufferPointer($0)) } } else { w.raw(UnsafeRawBufferPointer(nameBytes.raw)) }
            w.raw(#"","params":{"#)
            var count = 0
            batch.written.removeAll()
            func parameter(_ key: JSONText, _ value: ParameterValue) {
                count += 1
                guard count <= Self.maxParameters else { return }
                if Self.isTakenAsParameterName(key) {
                    parameter(named: key.raw, value)
                } else {
                    var name = parameterName(key.string)
                    name.withUTF8 { parameter(named: $0, value) }
                }
            }
            func parameter(named name: UnsafeBufferPointer<UInt8>, _ value: ParameterValue) {
                guard batch.written.insert(name) else { return }
                if batch.written.count > 1 { w.raw(",") }
                w.raw(UInt8(ascii: "\""))
                w.raw(UnsafeRawBufferPointer(name))
                w.raw(#"":"#)
                func cut() {
                    guard batch.cut.insert(name) else { return }
                    warnings.once("value \(String(decoding: name, as: UTF8.self))",
                                  "parameter \(String(decoding: name, as: UTF8.self)): value cut to 100 characters, GA4's limit")
                }
                switch value {
                case .stored(.text(let text)):
                    // Unescaped, the stored bytes are the string as written; within the limit in bytes it is within
                    // it in characters, and ASCII has one character a byte (CR LF, the two-byte one, is escaped in
                    // JSON): copied, cut by bytes (SPEC D10's fast path).
                    if !text.escaped, text.raw.count <= Self.maxValueLength || Self.isASCII(text.raw) {
                        if text.raw.count > Self.maxValueLength { cut() }
                        w.raw(UInt8(ascii: "\""))
                        w.raw(UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: text.raw.prefix(Self.maxValueLength))))
                        w.raw(UInt8(ascii: "\""))
                    } else {
                        StoredValue.text(text.string).write(into: &w, maxLength: Self.maxValueLength, cut: cut)
                    }
                case .stored(let stored): StoredValue(stored).write(into: &w, maxLength: Self.maxValueLength, cut: cut)
                case .text(let text): StoredValue.text(text).write(into: &w, maxLength: Self.maxValueLength, cut: cut)
                }
            }
            if let sid { parameter(JSONText("session_id"), .stored(.text(sid))) }
            parameter(JSONText("engagement_time_msec"), .stored(.int(Self.engagementMs(durationMs))))
            switch type {
            case .event:
                if let rewrittenFrom { parameter(JSONText("original_name"), .stored(.text(rewrittenFrom))) }
                if let category { parameter(JSONText("category"), .text(category.joined(separator: ">"))) }
                for (key, value) in batch.properties { parameter(key, .stored(value)) }
            case .startSession, .endSession: break
            case .screen:
                parameter(JSONText("screen_name"), .stored(.text(name ?? JSONText(""))))
                if let path { parameter(JSONText("screen_path"), .stored(.text(path))) }
                for (key, value) in batch.properties { parameter(key, .stored(value)) }
            case .userProperties, .identify:
                if type == .identify { parameter(JSONText("method"), .stored(.text(JSONText("outbox")))) }
                for (key, value) in batch.properties {
                    let name = userPropertyName(key.string)
                    batch.userProperties.removeAll { $0.0 == name }
                    batch.userProperties.append((name, StoredValue(value)))
                }
            case .location:
                if let latitude { parameter(JSONText("latitude"), .stored(.double(latitude))) }
                if let longitude { parameter(JSONText("longitude"), .stored(.double(longitude))) }
                if let accuracy { parameter(JSONText("accuracy"), .stored(.double(accuracy))) }
            }
            if count > Self.maxParameters {
                let eventName = eventName ?? String(decoding: nameBytes.raw, as: UTF8.self)
                warnings.once("parameters \(eventName)", "event \(eventName): GA4 takes 25 parameters an event; the others were dropped")
            }
            w.raw(#"},"timestamp_micros":"#)
            w.int(wallMs * 1000)
            w.raw("}")
        }
    }

    /// Whether GA4 takes a stored event name as it is (`eventName` would give it back): checked on its bytes.
    private static func isTakenAsEventName(_ name: JSONText) -> Bool {
        guard !name.escaped, WireName.isKept(name.raw, dollar: false, maxLength: maxNameLength),
              !hasReservedPrefix(name.raw) else { return false }
        return !reservedEventNameBytes.contains { $0.count == name.raw.count && $0.elementsEqual(name.raw) }
    }

    /// Whether GA4 takes a stored parameter name as it is (`parameterName` would give it back).
    private static func isTakenAsParameterName(_ name: JSONText) -> Bool {
        !name.escaped && WireName.isKept(name.raw, dollar: false, maxLength: maxNameLength) && !hasReservedPrefix(name.raw)
    }

    private static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var high: UInt8 = 0
        for byte in bytes { high |= byte }
        return high < 0x80
    }

    private static func hasReservedPrefix(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
        reservedPrefixBytes.contains { $0.count <= name.count && $0.elementsEqual(name.prefix($0.count)) }
    }

    private static let reservedEventNameBytes = reservedEventNames.map { Array($0.utf8) }
    private static let reservedPrefixBytes = reservedPrefixes.map { Array($0.utf8) }

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

extension GA4Wire {
    /// `engagement_time_msec`: the duration in whole ms, at least 1. A stored duration beyond Int64's range (or not a
    /// number) is clamped rather than trapping in the conversion: stored data must never crash the host.
    static func engagementMs(_ durationMs: Double?) -> Int64 {
        guard let ms = durationMs?.rounded(), ms.isFinite else { return 1 }
        return Int64(min(max(ms, 1), 9.0e18))
    }
}
