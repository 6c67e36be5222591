// Snowplow's collector (SPEC V1–V4b), as the tracker protocol and its `payload_data` schema state it:
// - `POST /com.snowplowanalytics.snowplow/tp2`, body `{"schema": "iglu:com.snowplowanalytics.snowplow/
//   payload_data/jsonschema/1-0-*", "data": [event…]}` (at least one event), every event field a string;
// - `GET /i?e=…&p=…&tv=…` with one event in the query;
// - each event needs `e` (pv, pp, tr, ti, se, ue), `p` (the platform) and `tv` (the tracker version); a
//   structured event (`se`) its category `se_ca` and action `se_ac`; a self-describing one (`ue`) its
//   event as `ue_pr` (JSON) or `ue_px` (base64url JSON) with `schema` and `data`; `eid` a UUID, `dtm`/`stm`/
//   `ttm` epoch ms.
// The real collector answers 200 to anything and sorts bad events out later; the mock refuses a request
// with an invalid event with 400 and the reason, which the official tracker takes as final (no retry).
// Answers: 200 `ok` for POST, the 1×1 GIF for `GET /i`; errors as text. De-duplication by `eid`;
// `log_name` is `se_ac` for structured events, else `e`; the delay uses `ttm`, else `dtm`.

enum SnowplowWire {
    static let postPath = "/com.snowplowanalytics.snowplow/tp2"
    static let getPath = "/i"
    static let schemaPrefix = "iglu:com.snowplowanalytics.snowplow/payload_data/jsonschema/1-0-"
    static let eventTypes: Set<String> = ["pv", "pp", "tr", "ti", "se", "ue"]
    static let platforms: Set<String> = ["web", "mob", "pc", "srv", "app", "tv", "cnsl", "iot", "headset"]

    /// The transparent 1×1 GIF the collector's pixel endpoint answers.
    static let pixel: [UInt8] = [
        0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xFF, 0xFF, 0xFF, 0x21, 0xF9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2C, 0x00, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3B,
    ]

    static func error(_ status: Int, _ reason: String) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "text/plain; charset=utf-8", body: reason)
    }

    static func success(get: Bool, status: Int = 200) -> HTTPResponse {
        get ? HTTPResponse(status: status, headers: [("Content-Type", "image/gif")], body: pixel)
            : HTTPResponse(status: status, contentType: "text/plain; charset=utf-8", body: "ok")
    }

    static func injected(_ request: VendorRequest) -> @Sendable (Int) -> HTTPResponse {
        let get = request.path == getPath
        return { status in
            (200..<300).contains(status) ? success(get: get, status: status)
                : error(status, "\(status) injected by the scenario")
        }
    }

    static func decode(_ request: VendorRequest) -> VendorBatch {
        let injected = injected(request)
        func refuse(_ status: Int, _ reason: String, events: Int = 0) -> VendorBatch {
            .refusedWhole(.snowplow, error(status, reason), events: events, injected: injected)
        }
        let get = request.path == getPath
        guard request.method == (get ? .GET : .POST) else {
            var r = error(405, "\(request.path) only accepts \(get ? "GET" : "POST")")
            r.headers.append(("Allow", get ? "GET" : "POST"))
            return refuse(405, "").with(normal: r)
        }
        var batch = VendorBatch(vendor: .snowplow, normal: success(get: get), injected: injected)
        if get {
            let fields = request.query
            batch.eventCount = 1
            var json = Array("{".utf8)
            for (i, (name, value)) in fields.enumerated() {
                if i > 0 { json.append(UInt8(ascii: ",")) }
                json.append(contentsOf: "\(jsonString(name)):\(jsonString(value))".utf8)
            }
            json.append(UInt8(ascii: "}"))
            let lookup = { (name: String) in fields.first { $0.0 == name }?.1 }
            if let name = eventName(lookup) { batch.names.append(name) }
            if let problem = check(lookup) { return refuse(400, "query: \(problem)", events: 1) }
            batch.events.append(event(lookup, json: json))
            return batch
        }
        let parsed = withJSON(request.body) { doc -> VendorBatch in
            guard doc[0].kind == .object else { return refuse(400, "body must be a JSON object") }
            guard let schema = doc.stringMember(0, "schema"), schema.hasPrefix(schemaPrefix) else {
                return refuse(400, "schema: must be \(schemaPrefix)*")
            }
            guard let data = doc.member(0, "data"), doc[data].kind == .array, doc[data].count > 0 else {
                return refuse(400, "data: must be a non-empty array of events")
            }
            batch.eventCount = Int(doc[data].count)
            var failure: String?
            doc.forEachElement(of: data) { position, e in
                guard failure == nil else { return }
                guard doc[e].kind == .object else {
                    failure = "data[\(position)]: must be an object"
                    return
                }
                var notString: String?
                doc.forEachMember(of: e) { k, v in
                    if notString == nil, doc[v].kind != .string { notString = doc.string(k) }
                }
                if let notString {
                    failure = "data[\(position)].\(notString): must be a string"
                    return
                }
                let fields = fieldIndex(doc, e)
                let dynamic = { (name: String) -> String? in fields[name].map { doc.string($0) } }
                if let name = eventName(dynamic) { batch.names.append(name) }
                if let problem = check(dynamic) {
                    failure = "data[\(position)]: \(problem)"
                    return
                }
                batch.events.append(event(dynamic, json: doc.minified(e)))
            }
            if let failure { return refuse(400, failure, events: batch.eventCount) }
            return batch
        }
        switch parsed {
        case .success(let batch): return batch
        case .failure(let error): return refuse(400, error.reason)
        }
    }

    /// The event's string fields by name, the first of a repeated name kept: one pass over its members, where a
    /// search per lookup made an event's checks quadratic in its fields.
    private static func fieldIndex(_ doc: JSONView, _ e: Int) -> [String: Int] {
        var fields: [String: Int] = [:]
        fields.reserveCapacity(Int(doc[e].count))
        doc.forEachMember(of: e) { k, v in
            guard doc[v].kind == .string else { return }
            let name = doc.string(k)
            if fields[name] == nil { fields[name] = v }
        }
        return fields
    }

    private static func eventName(_ field: (String) -> String?) -> String? {
        field("e") == "se" ? field("se_ac") : field("e")
    }

    private static func event(_ field: (String) -> String?, json: [UInt8]) -> VendorEvent {
        let timestamp = (field("ttm").flatMap(VendorTime.decimalMs)) ?? field("dtm").flatMap(VendorTime.decimalMs)
        return VendorEvent(key: field("eid")?.lowercased(), name: eventName(field), timestampMs: timestamp, json: json)
    }

    /// What makes an event invalid, nil when it is valid.
    private static func check(_ field: (String) -> String?) -> String? {
        guard let e = field("e") else { return "e: missing (the event type)" }
        guard eventTypes.contains(e) else { return "e: \(e) is not an event type (pv, pp, tr, ti, se, ue)" }
        guard let p = field("p") else { return "p: missing (the platform)" }
        guard platforms.contains(p) else { return "p: \(p) is not a platform" }
        guard let tv = field("tv"), !tv.isEmpty else { return "tv: missing (the tracker version)" }
        if let eid = field("eid"), UUIDKey(eid) == nil { return "eid: must be a UUID" }
        for name in ["dtm", "stm", "ttm"] {
            if let v = field(name), VendorTime.decimalMs(v) == nil { return "\(name): must be epoch milliseconds" }
        }
        switch e {
        case "se":
            guard !(field("se_ca") ?? "").isEmpty else { return "se_ca: a structured event needs its category" }
            guard !(field("se_ac") ?? "").isEmpty else { return "se_ac: a structured event needs its action" }
        case "ue":
            let payload: [UInt8]?
            if let pr = field("ue_pr") {
                payload = Array(pr.utf8)
            } else if let px = field("ue_px") {
                guard let decoded = Base64.decode(Array(px.utf8)) else { return "ue_px: not base64" }
                payload = decoded
            } else {
                return "ue_pr or ue_px: a self-describing event needs its event"
            }
            guard let payload else { return "ue_pr: missing" }
            let ok = withJSON(payload) { doc in
                doc[0].kind == .object && doc.stringMember(0, "schema") != nil && doc.member(0, "data") != nil
            }
            guard case .success(true) = ok else {
                return "\(field("ue_pr") == nil ? "ue_px" : "ue_pr"): must be JSON with schema and data"
            }
        default: break
        }
        return nil
    }
}
