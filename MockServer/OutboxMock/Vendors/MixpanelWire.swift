// Mixpanel's ingestion API (SPEC V1–V4b), as its documentation and its official clients state it:
// - `/track` (events), `/engage` (profile updates), `/groups` (group updates), `/import` (events, with
//   authentication); POST (GET for the first three, with the fields in the query);
// - the body a form whose `data` field holds JSON or base64 JSON (an object or an array), or a JSON body;
//   `verbose=1` (form or query) asks for `{"status": 1, "error": null}` instead of `1`;
// - at most 2 000 records a request; an event needs `event` (≤ 255 characters) and `properties.token`
//   (≤ 255 properties, ≤ 1 MB); `$insert_id` at most 36 letters, digits or `-`; `/import` also needs
//   `time`, `distinct_id` (not a placeholder such as `null` or `anonymous`) and `$insert_id`, and HTTP Basic
//   credentials (`strict=1` asks for the per-record errors the mock always gives; `project_id` names the project of
//   a service account); an `/engage` record needs `$token`,
//   `$distinct_id` and an operation, a `/groups` record `$token`, `$group_key`, `$group_id` and an operation;
// - a refused `/track`, `/engage` or `/groups` request is refused whole (`{"status": 0, "error"}` or `0`);
//   `/import` ingests the valid records and lists the others in `failed_records` of a 400 (`{index, insert_id,
//   field, message}`, docs.mixpanel.com/troubleshooting/errors/400-bad-request).
// The Python client reads the body, not the status: every answer is JSON when `verbose` is asked.
// De-duplication by `properties.$insert_id` (records without one are all unique); `log_name` is `event`;
// the delay uses `properties.time` (seconds, or ms when it is that large).

enum MixpanelWire {
    static let paths: Set<String> = ["/track", "/track/", "/engage", "/engage/", "/groups", "/groups/", "/import",
                                     "/import/"]
    static let maxRecords = 2000
    static let maxEventBytes = 1024 * 1024
    static let maxProperties = 255
    /// `/import` refuses these `distinct_id`s, which usually mean an implementation mistake
    /// (docs.mixpanel.com/troubleshooting/errors/400-bad-request).
    static let placeholderIDs: Set<String> = ["anon", "anonymous", "nil", "none", "null", "n/a", "undefined", "unknown",
                                              "00000000-0000-0000-0000-000000000000"]
    static let profileOperations: Set<String> = ["$set", "$set_once", "$add", "$union", "$append", "$remove",
                                                 "$unset", "$delete"]

    enum Endpoint { case track, engage, groups, `import` }

    static func endpoint(_ path: String) -> Endpoint {
        switch path.hasSuffix("/") ? String(path.dropLast()) : path {
        case "/engage": .engage
        case "/groups": .groups
        case "/import": .import
        default: .track
        }
    }

    /// Whether the request asks for the verbose JSON answer (form field or query).
    static func verbose(_ request: VendorRequest, form: [UInt8]?) -> Bool {
        let flag = form.flatMap { FormFields.value($0, "verbose") }.map { String(decoding: $0, as: UTF8.self) }
            ?? request.query.first { $0.0 == "verbose" }?.1
        return flag == "1"
    }

    static func isForm(_ request: VendorRequest) -> Bool {
        let type = request.headers.first(name: "content-type")?.lowercased() ?? ""
        return request.method == .POST && !type.hasPrefix("application/json")
    }

    static func error(_ status: Int, _ reason: String, _ request: VendorRequest) -> HTTPResponse {
        let form = isForm(request) ? Array(request.body) : nil
        return error(status, reason, verbose: verbose(request, form: form), endpoint: endpoint(request.path))
    }

    static func error(_ status: Int, _ reason: String, verbose: Bool, endpoint: Endpoint,
                      failed: [String] = [], imported: Int = 0) -> HTTPResponse {
        if verbose {
            let extra = endpoint == .import
                ? #","failed_records":[\#(failed.joined(separator: ","))],"num_records_imported":\#(imported)"# : ""
            return HTTPResponse(status: status, body: #"{"status":0,"error":\#(jsonString(reason))\#(extra)}"#)
        }
        if endpoint == .import {
            return HTTPResponse(status: status, body: #"{"code":\#(status),"error":\#(jsonString(reason)),"#
                + #""failed_records":[\#(failed.joined(separator: ","))],"num_records_imported":\#(imported),"#
                + #""status":\#(jsonString(HTTPResponse.reasonPhrase(status)))}"#)
        }
        return HTTPResponse(status: status, contentType: "text/plain; charset=utf-8", body: "0")
    }

    static func success(_ status: Int, verbose: Bool, endpoint: Endpoint, imported: Int) -> HTTPResponse {
        if verbose { return HTTPResponse(status: status, body: #"{"status":1,"error":null}"#) }
        if endpoint == .import {
            return HTTPResponse(status: status, body: #"{"code":\#(status),"num_records_imported":\#(imported),"status":"OK"}"#)
        }
        return HTTPResponse(status: status, contentType: "text/plain; charset=utf-8", body: "1")
    }

    static func injected(_ request: VendorRequest) -> @Sendable (Int) -> HTTPResponse {
        let verbose = verbose(request, form: isForm(request) ? Array(request.body) : nil)
        let endpoint = endpoint(request.path)
        return { status in
            (200..<300).contains(status) ? success(status, verbose: verbose, endpoint: endpoint, imported: 0)
                : error(status, "\(status) injected by the scenario", verbose: verbose, endpoint: endpoint)
        }
    }

    static func decode(_ request: VendorRequest) -> VendorBatch {
        let endpoint = endpoint(request.path)
        let form: [UInt8]? = isForm(request) ? Array(request.body) : nil
        let verbose = verbose(request, form: form)
        let injected: @Sendable (Int) -> HTTPResponse = { status in
            (200..<300).contains(status) ? success(status, verbose: verbose, endpoint: endpoint, imported: 0)
                : error(status, "\(status) injected by the scenario", verbose: verbose, endpoint: endpoint)
        }
        func refuse(_ status: Int, _ reason: String, events: Int = 0) -> VendorBatch {
            .refusedWhole(.mixpanel, error(status, reason, verbose: verbose, endpoint: endpoint), events: events,
                          injected: injected)
        }
        guard request.method == .POST || (request.method == .GET && endpoint != .import) else {
            var r = error(405, "\(request.path) only accepts POST", verbose: verbose, endpoint: endpoint)
            r.headers.append(("Allow", endpoint == .import ? "POST" : "GET, POST"))
            return refuse(405, "").with(normal: r)
        }
        if endpoint == .import, request.basicUser == nil {
            return refuse(401, "/import needs HTTP Basic credentials (a service account or the project's API secret)")
        }
        // The records' JSON: the `data` field of the form or query, as JSON or base64 JSON, or the body.
        var json: [UInt8]
        if request.method == .GET || form != nil {
            let data = request.method == .GET
                ? request.query.first { $0.0 == "data" }.map { Array($0.1.utf8) }
                : form.flatMap { FormFields.value($0, "data") }
            guard let data, !data.isEmpty else { return refuse(400, "data: missing (the records, JSON or base64 JSON)") }
            let first = data.first { ![0x20, 0x0A, 0x0D, 0x09].contains($0) }
            if first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
                json = data
            } else if let decoded = Base64.decode(data) {
                json = decoded
            } else {
                return refuse(400, "data: neither JSON nor base64")
            }
        } else {
            json = Array(request.body)
        }
        let parsed = withJSON(json) { doc -> VendorBatch in
            var records: [Int] = []
            switch doc[0].kind {
            case .array: doc.forEachElement(of: 0) { _, e in records.append(e) }
            case .object: records = [0]
            default: return refuse(400, "data: must be a JSON object or array of records")
            }
            guard !records.isEmpty else { return refuse(400, "data: no records") }
            guard records.count <= maxRecords else {
                return refuse(400, "\(records.count) records: at most \(maxRecords) a request", events: records.count)
            }
            var batch = VendorBatch(vendor: .mixpanel, normal: success(200, verbose: verbose, endpoint: endpoint,
                                                                         imported: 0), injected: injected)
            batch.eventCount = records.count
            var failed: [String] = []
            var firstProblem: String?
            for (position, r) in records.enumerated() {
                if let name = doc.stringMember(r, "event") { batch.names.append(name) }
                if let problem = check(doc, r, endpoint) {
                    let at = records.count > 1 || doc[0].kind == .array ? "[\(position)]" : ""
                    firstProblem = firstProblem ?? "\(at)\(problem.field): \(problem.message)"
                    let insertId = properties(doc, r).flatMap { doc.stringMember($0, "$insert_id") }
                    failed.append(#"{"index":\#(position),"insert_id":\#(insertId.map(jsonString) ?? "null"),"#
                        + #""field":\#(jsonString(problem.field)),"message":\#(jsonString(problem.message))}"#)
                    batch.refused += 1
                    continue
                }
                batch.events.append(event(doc, r, endpoint))
            }
            guard let firstProblem else {
                batch.normal = success(200, verbose: verbose, endpoint: endpoint, imported: batch.events.count)
                return batch
            }
            if endpoint != .import {
                // Refused whole: nothing of it is ingested.
                var whole = refuse(400, firstProblem, events: records.count)
                whole.names = batch.names
                return whole
            }
            batch.normal = error(400, "some data points in the request failed validation", verbose: verbose,
                                 endpoint: endpoint, failed: failed, imported: batch.events.count)
            return batch
        }
        switch parsed {
        case .success(let batch): return batch
        case .failure(let error): return refuse(400, "data: \(error.reason)")
        }
    }

    private static func properties(_ doc: JSONView, _ r: Int) -> Int? {
        doc.member(r, "properties").flatMap { doc[$0].kind == .object ? $0 : nil }
    }

    private static func event(_ doc: JSONView, _ r: Int, _ endpoint: Endpoint) -> VendorEvent {
        let props = properties(doc, r)
        let time = endpoint == .track || endpoint == .import ? props.flatMap { doc.member($0, "time") }
            : doc.member(r, "$time")
        let timestamp = time.flatMap { t -> Int64? in
            guard doc[t].kind == .number, let v = doc.double(t) else { return nil }
            // Seconds (the Python client's float) or ms: no event is stamped before 1973 in ms. A value beyond
            // any date (±300 000 years) has no delay to report, and would not fit in Int64.
            let ms = (v > 1e11 ? v : v * 1000).rounded()
            return ms.magnitude < 1e16 ? Int64(ms) : nil
        }
        let insertId = props.flatMap { doc.stringMember($0, "$insert_id") }
        return VendorEvent(key: insertId, name: doc.stringMember(r, "event"), timestampMs: timestamp,
                           json: doc.minified(r))
    }

    /// What makes a record invalid (the field and why), nil when it is valid.
    private static func check(_ doc: JSONView, _ r: Int, _ endpoint: Endpoint) -> (field: String, message: String)? {
        guard doc[r].kind == .object else { return ("", "a record must be an object") }
        guard doc.byteLength(r) <= maxEventBytes else { return ("", "larger than 1 MB") }
        switch endpoint {
        case .engage, .groups:
            guard !(doc.stringMember(r, "$token") ?? "").isEmpty else { return ("$token", "missing") }
            if endpoint == .engage {
                guard doc.isPresent(doc.member(r, "$distinct_id")) else { return ("$distinct_id", "missing") }
            } else {
                guard !(doc.stringMember(r, "$group_key") ?? "").isEmpty else { return ("$group_key", "missing") }
                guard doc.isPresent(doc.member(r, "$group_id")) else { return ("$group_id", "missing") }
            }
            var operations = 0
            doc.forEachMember(of: r) { k, _ in
                if profileOperations.contains(doc.string(k)) { operations += 1 }
            }
            guard operations > 0 else { return ("", "no operation ($set, $set_once, $add, $union, $unset, …)") }
            return nil
        case .track, .import:
            guard let name = doc.member(r, "event"), doc[name].kind == .string, doc.characterCount(name) > 0 else {
                return ("event", "missing")
            }
            guard doc.characterCount(name) <= 255 else { return ("event", "longer than 255 characters") }
            guard let props = properties(doc, r) else { return ("properties", "missing or not an object") }
            guard doc[props].count <= maxProperties else { return ("properties", "more than 255 properties") }
            if endpoint == .track {
                guard !(doc.stringMember(props, "token") ?? "").isEmpty else { return ("properties.token", "missing") }
            }
            if let id = doc.member(props, "$insert_id") {
                guard doc[id].kind == .string, doc.characterCount(id) <= 36,
                      doc.string(id).utf8.allSatisfy({ b in
                          b == UInt8(ascii: "-") || (b | 0x20) &- UInt8(ascii: "a") < 26 || b &- UInt8(ascii: "0") < 10
                      })
                else { return ("properties.$insert_id", "at most 36 letters, digits or -") }
            }
            if let time = doc.member(props, "time"), doc[time].kind != .number {
                return ("properties.time", "must be a number (epoch seconds or ms)")
            }
            if endpoint == .import {
                guard doc.member(props, "time") != nil else { return ("properties.time", "missing") }
                guard doc.isPresent(doc.member(props, "distinct_id")) else { return ("properties.distinct_id", "missing") }
                if let id = doc.stringMember(props, "distinct_id"), placeholderIDs.contains(id.lowercased()) {
                    return ("properties.distinct_id", "'\(id)' is a placeholder value Mixpanel refuses")
                }
                guard doc.member(props, "$insert_id") != nil else { return ("properties.$insert_id", "missing") }
            }
            return nil
        }
    }
}
