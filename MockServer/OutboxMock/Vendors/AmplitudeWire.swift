// Amplitude's HTTP V2 API (SPEC V1–V4b, D13), as its documentation states it
// (amplitude.com/docs/apis/analytics/http-v2, …/http-api-batching-retries):
// - `POST /2/httpapi` (the Batch Event Upload API, `/batch`, takes the same body; PostHog owns that path here) with `Content-Type:
//   application/json` and `{"api_key", "events": [event…], "options"?}`;
// - a missing `api_key` or `events` is a 400 naming it in `missing_field`; an unknown key a 400 whose `error`
//   begins `Invalid API key`;
// - an event needs `event_type` and a `user_id` or `device_id` (each at least 5 characters, unless
//   `options.min_id_length` lowers it); `time` is an integer of ms since 1970; `event_type` is not one of
//   Amplitude's reserved names; an invalid event makes the whole request a 400 listing the events by index in
//   `events_with_invalid_fields` / `events_with_missing_fields` (field → indices) — none of it is ingested;
// - at most 2 000 events and 1 MB a request (413 beyond); 30 events/s per device or user on this path: a 429 with
//   `eps_threshold` and `throttled_devices` / `throttled_users` (a scenario injects it; the mock keeps no rate);
// - success: 200 `{"code": 200, "events_ingested", "payload_size_bytes", "server_upload_time"}`;
// - de-duplication by `insert_id` (7 days; events without one are all unique); `log_name` is `event_type`; the
//   delay uses `time`.

enum AmplitudeWire {
    static let paths: Set<String> = ["/2/httpapi"]
    static let maxEvents = 2000
    static let maxBodyBytes = 1_000_000
    static let reservedTypes: Set<String> = ["$identify", "$groupidentify", "revenue_amount"]

    static func error(_ status: Int, _ message: String, extra: String = "") -> HTTPResponse {
        HTTPResponse(status: status, body: #"{"code":\#(status),"error":\#(jsonString(message))\#(extra)}"#)
    }

    static func injected(_ request: VendorRequest) -> @Sendable (Int) -> HTTPResponse {
        let install = request.headers.first(name: "install-id") ?? "device"
        return { status in
            switch status {
            case 200..<300:
                return HTTPResponse(status: status, body: #"{"code":\#(status),"events_ingested":0,"payload_size_bytes":0,"server_upload_time":0}"#)
            case 429:
                return error(429, "Too many requests for some devices and users",
                             extra: #","eps_threshold":30,"throttled_devices":{\#(jsonString(install)):31},"throttled_users":{},"throttled_events":[]"#)
            default:
                return error(status, "\(status) injected by the scenario")
            }
        }
    }

    static func decode(_ request: VendorRequest) -> VendorBatch {
        let injected = injected(request)
        func refuse(_ status: Int, _ message: String, extra: String = "", events: Int = 0) -> VendorBatch {
            .refusedWhole(.amplitude, error(status, message, extra: extra), events: events, injected: injected)
        }
        guard request.method == .POST else {
            var r = error(405, "\(request.path) only accepts POST")
            r.headers.append(("Allow", "POST"))
            return refuse(405, "").with(normal: r)
        }
        guard (request.headers.first(name: "content-type") ?? "").lowercased().hasPrefix("application/json") else {
            return refuse(400, "Invalid Content-Type header: it must be application/json")
        }
        guard request.body.count <= maxBodyBytes else {
            return refuse(413, "Payload too large: \(request.body.count) bytes, the limit is \(maxBodyBytes)")
        }
        let parsed = withJSON(request.body) { doc -> VendorBatch in
            guard doc[0].kind == .object else { return refuse(400, "Invalid JSON request body") }
            guard let key = doc.stringMember(0, "api_key"), !key.isEmpty else {
                return refuse(400, "Request missing required field", extra: #","missing_field":"api_key""#)
            }
            guard key.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return refuse(400, "Invalid API key: \(key.prefix(8))…") }
            guard let list = doc.member(0, "events"), doc[list].kind == .array, doc[list].count > 0 else {
                return refuse(400, "Request missing required field", extra: #","missing_field":"events""#)
            }
            var events: [Int] = []
            doc.forEachElement(of: list) { _, e in events.append(e) }
            guard events.count <= maxEvents else {
                return refuse(413, "Payload too large: \(events.count) events, the limit is \(maxEvents)", events: events.count)
            }
            let minLength = doc.member(0, "options").flatMap { doc.member($0, "min_id_length") }
                .flatMap { doc.int64($0) }.map(Int.init) ?? 5
            var batch = VendorBatch(vendor: .amplitude, normal: HTTPResponse(status: 200, body: ""), injected: injected)
            batch.eventCount = events.count
            var invalid: [String: [Int]] = [:], missing: [String: [Int]] = [:]
            for (position, e) in events.enumerated() {
                if let name = doc.stringMember(e, "event_type") { batch.names.append(name) }
                if let problem = check(doc, e, minLength: minLength) {
                    if problem.missing { missing[problem.field, default: []].append(position) }
                    else { invalid[problem.field, default: []].append(position) }
                    continue
                }
                let time = doc.member(e, "time").flatMap { doc.int64($0) }
                batch.events.append(VendorEvent(key: doc.stringMember(e, "insert_id"), name: doc.stringMember(e, "event_type"),
                                                timestampMs: time, json: doc.minified(e)))
            }
            guard invalid.isEmpty && missing.isEmpty else {
                func listed(_ fields: [String: [Int]]) -> String {
                    "{" + fields.sorted { $0.key < $1.key }.map { #"\#(jsonString($0.key)):[\#($0.value.map(String.init).joined(separator: ","))]"# }
                        .joined(separator: ",") + "}"
                }
                let refused = Set(invalid.values.joined()).union(missing.values.joined()).count
                var whole = refuse(400, "Request missing required field",
                                   extra: #","events_with_invalid_fields":\#(listed(invalid)),"events_with_missing_fields":\#(listed(missing))"#,
                                   events: events.count)
                whole.refused = refused
                whole.names = batch.names
                return whole
            }
            batch.normal = HTTPResponse(status: 200, body: #"{"code":200,"events_ingested":\#(events.count),"payload_size_bytes":\#(request.body.count),"server_upload_time":0}"#)
            return batch
        }
        switch parsed {
        case .success(let batch): return batch
        case .failure(let error): return refuse(400, "Invalid JSON request body: \(error.reason)")
        }
    }

    /// What makes an event invalid (the field, and whether it is missing rather than invalid), nil when it is valid.
    private static func check(_ doc: JSONView, _ e: Int, minLength: Int) -> (field: String, missing: Bool)? {
        guard doc[e].kind == .object else { return ("event", false) }
        guard let type = doc.member(e, "event_type") else { return ("event_type", true) }
        guard doc[type].kind == .string, doc.characterCount(type) > 0, !reservedTypes.contains(doc.string(type)) || doc.string(type) == "$identify"
        else { return ("event_type", false) }
        let user = doc.member(e, "user_id").flatMap { doc[$0].kind == .null ? nil : $0 }
        let device = doc.member(e, "device_id").flatMap { doc[$0].kind == .null ? nil : $0 }
        guard user != nil || device != nil else { return ("user_id", true) }
        for (field, id) in [("user_id", user), ("device_id", device)] {
            guard let id else { continue }
            guard doc[id].kind == .string, doc.characterCount(id) >= minLength else { return (field, false) }
        }
        if let time = doc.member(e, "time") {
            guard doc[time].kind == .number, doc.int64(time) != nil else { return ("time", false) }
        }
        if let session = doc.member(e, "session_id") {
            guard doc[session].kind == .number, doc.int64(session) != nil else { return ("session_id", false) }
        }
        if let id = doc.member(e, "insert_id") {
            guard doc[id].kind == .string, doc.characterCount(id) > 0 else { return ("insert_id", false) }
        }
        if let member = doc.member(e, "event_properties"), doc[member].kind != .object { return ("event_properties", false) }
        if let member = doc.member(e, "user_properties"), doc[member].kind != .object { return ("user_properties", false) }
        return nil
    }
}
