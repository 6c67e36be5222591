// PostHog's capture API (SPEC V1–V4b), as its documentation and its official clients state it:
// - v0: `POST /batch/` with `{"api_key", "batch": [event…]}`; `/capture/`, `/e/`, `/i/v0/e/` with one event
//   (`{"api_key", "event", …}`), a `batch`, or an array of events. Success is exactly 200 (`{"status": 1}`):
//   the Python client retries anything else. A missing project key is 401; an invalid payload (an event
//   without `event` or `distinct_id`, a `uuid` that is not one, an event over 1 MiB) refuses the whole
//   request with 400 — both `{"type", "code", "detail"}`, the body the clients read.
// - v1: `POST /i/v1/analytics/events`, the key as `Authorization: Bearer`, `{"created_at", "batch": […]}`;
//   a 2xx must carry `{"results": {uuid: {"result": "ok|warning|drop|retry", "details"}}}` (uuids left out
//   count as delivered), so an invalid event is refused alone, as `"drop"`, inside the 200.
// - de-duplication by `uuid`; `log_name` is `event`; the delay uses `timestamp`.

enum PostHogWire {
    static let v1Path = "/i/v1/analytics/events"
    static let v0Paths = ["/batch/", "/capture/", "/e/", "/i/v0/e/"]
    static let paths: Set<String> = Set(v0Paths + v0Paths.map { String($0.dropLast()) } + [v1Path])
    static let maxEventBytes = 1024 * 1024

    static func error(_ status: Int, _ detail: String) -> HTTPResponse {
        let (type, code): (String, String) = switch status {
        case 401: ("authentication_error", "invalid_api_key")
        case 400...499: ("validation_error", "invalid_payload")
        default: ("server_error", "server_error")
        }
        return HTTPResponse(status: status, body: #"{"type":"\#(type)","code":"\#(code)","detail":\#(jsonString(detail))}"#)
    }

    static func injected(_ request: VendorRequest) -> @Sendable (Int) -> HTTPResponse {
        let v1 = request.path == v1Path
        return { status in
            guard (200..<300).contains(status) else { return error(status, "\(status) injected by the scenario") }
            return HTTPResponse(status: status, body: v1 ? #"{"results":{}}"# : #"{"status":1}"#)
        }
    }

    static func decode(_ request: VendorRequest) -> VendorBatch {
        let injected = injected(request)
        func refuse(_ status: Int, _ detail: String, events: Int = 0) -> VendorBatch {
            .refusedWhole(.posthog, error(status, detail), events: events, injected: injected)
        }
        guard request.method == .POST else {
            var r = error(405, "\(request.path) only accepts POST")
            r.headers.append(("Allow", "POST"))
            return refuse(405, "").with(normal: r)
        }
        let v1 = request.path == v1Path
        if v1, request.bearer == nil {
            return refuse(401, "Authorization: Bearer <project API key> is required")
        }
        let parsed = withJSON(request.body) { doc -> VendorBatch in
            // The events: a `batch` array, a top-level array, or the body as one event.
            var list: Int?
            var single: Int?
            switch doc[0].kind {
            case .array: list = 0
            case .object:
                if let b = doc.member(0, "batch") {
                    guard doc[b].kind == .array else { return refuse(400, "batch must be an array") }
                    list = b
                } else if v1 {
                    return refuse(400, "batch: missing")
                } else {
                    single = 0
                }
            default: return refuse(400, "body must be a JSON object or array")
            }
            var events: [Int] = []
            if let list { doc.forEachElement(of: list) { _, e in events.append(e) } }
            if let single { events.append(single) }
            guard !events.isEmpty else { return refuse(400, "no events in the body") }
            if !v1 {
                let key = doc.stringMember(0, "api_key") ?? doc.stringMember(0, "token")
                    ?? events.lazy.compactMap { e in
                        doc.stringMember(e, "api_key") ?? doc.stringMember(e, "token")
                            ?? doc.member(e, "properties").flatMap { doc.stringMember($0, "token") }
                    }.first
                guard let key, !key.isEmpty else {
                    return refuse(401, "No api_key set: send the project API key as api_key", events: events.count)
                }
            }
            var batch = VendorBatch(vendor: .posthog, normal: HTTPResponse(status: 200, body: #"{"status":1}"#),
                                    injected: injected)
            batch.eventCount = events.count
            var drops: [(String, String)] = []
            for (position, e) in events.enumerated() {
                if let name = doc.stringMember(e, "event") { batch.names.append(name) }
                let uuid = doc.stringMember(e, "uuid")
                let problem = check(doc, e)
                if v1 {
                    guard let uuid, UUIDKey(uuid) != nil else {
                        return refuse(400, "batch[\(position)].uuid: a UUID is required in v1", events: events.count)
                    }
                    if let problem {
                        drops.append((uuid, problem))
                        batch.refused += 1
                        continue
                    }
                } else if let problem {
                    let at = list == nil ? "" : "batch[\(position)]: "
                    return refuse(400, "Invalid payload: \(at)\(problem)", events: events.count)
                }
                let timestamp = doc.stringMember(e, "timestamp").flatMap(VendorTime.iso8601Ms)
                batch.events.append(VendorEvent(key: uuid?.lowercased(), name: doc.stringMember(e, "event"),
                                                timestampMs: timestamp, json: doc.minified(e)))
            }
            if v1 {
                let results = drops.map { #"\#(jsonString($0.0)):{"result":"drop","details":\#(jsonString($0.1))}"# }
                batch.normal = HTTPResponse(status: 200, body: #"{"results":{\#(results.joined(separator: ","))}}"#)
            }
            return batch
        }
        switch parsed {
        case .success(let batch): return batch
        case .failure(let error): return refuse(400, "Malformed request data: \(error.reason)")
        }
    }

    /// What makes an event invalid, nil when it is valid.
    private static func check(_ doc: JSONView, _ e: Int) -> String? {
        guard doc[e].kind == .object else { return "an event must be an object" }
        guard let name = doc.member(e, "event"), doc[name].kind == .string, doc.characterCount(name) > 0 else {
            return "every event must have an event name field 'event'"
        }
        let properties = doc.member(e, "properties")
        if let properties, doc[properties].kind != .object { return "properties must be an object" }
        let distinct = doc.member(e, "distinct_id") ?? properties.flatMap { p in
            doc.member(p, "distinct_id") ?? doc.member(p, "$distinct_id")
        }
        guard let distinct, [.string, .number].contains(doc[distinct].kind),
              doc[distinct].kind == .number || doc.characterCount(distinct) > 0
        else { return "every event must have a distinct_id (a string or number)" }
        if let uuid = doc.member(e, "uuid"), doc[uuid].kind != .null {
            guard doc[uuid].kind == .string, doc.withDecodedBytes(uuid, { UUIDKey($0) }) != nil else {
                return "uuid must be a UUID"
            }
        }
        if let t = doc.member(e, "timestamp"), doc[t].kind != .null {
            guard doc[t].kind == .string, doc.withDecodedBytes(t, { VendorTime.iso8601Ms($0) }) != nil else {
                return "timestamp must be an ISO 8601 date-time"
            }
        }
        guard doc.byteLength(e) <= maxEventBytes else { return "event larger than 1 MiB" }
        return nil
    }
}
