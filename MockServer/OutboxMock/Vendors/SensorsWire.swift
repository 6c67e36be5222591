import Foundation
import NIOCore

// Sensors Analytics' data access (SPEC D11), as its documentation and its SDKs state it
// (https://manual.sensorsdata.cn/sa/2.5/en/api-1573850.html, the data format:
// https://manual.sensorsdata.cn/sa/3.0/en/%E6%95%B0%E6%8D%AE%E6%A0%BC%E5%BC%8F-1573775.html):
// - `POST /sa?project=P`, a form: `data_list` (a JSON array of records) or `data` (one record), base64 of the JSON,
//   gzipped when `gzip=1`; `crc`, when present, the Java `String.hashCode` of the base64 text;
// - a record: `type` (track, track_signup, profile_set, …), `distinct_id` (≤ 255 characters), `time` (ms), an
//   `event` named `[A-Za-z_$][A-Za-z0-9_$]*` (≤ 100) for the track types, `original_id` for track_signup, and
//   `properties` whose keys follow the same rule and are none of the reserved names;
// - the mock refuses a request with an invalid record whole, with 400 and the reason;
// - de-duplication by `_track_id` with `distinct_id`, `event` and `time` (records without `_track_id`, as the
//   official Python client sends them, are all unique); `log_name` is `event`; the delay uses `time`.

enum SensorsWire {
    static let path = "/sa"
    static let types: Set<String> = ["track", "track_signup", "track_id_bind", "track_id_unbind", "profile_set",
                                     "profile_set_once", "profile_unset", "profile_delete", "profile_append",
                                     "profile_increment", "item_set", "item_delete"]
    static let reserved: Set<String> = ["date", "datetime", "distinct_id", "event", "events", "event_id", "first_id",
                                        "id", "original_id", "device_id", "properties", "second_id", "time",
                                        "user_id", "users"]

    static func error(_ status: Int, _ reason: String) -> HTTPResponse {
        HTTPResponse(status: status, body: #"{"code":\#(status),"error":\#(jsonString(reason))}"#)
    }

    static func injected(_ request: VendorRequest) -> @Sendable (Int) -> HTTPResponse {
        { status in (200..<300).contains(status) ? HTTPResponse(status: status, body: "{}") : error(status, "\(status) injected by the scenario") }
    }

    /// Java's `String.hashCode` over UTF-16 code units, as an Int32 with wraparound.
    static func javaHashCode(_ text: String) -> Int32 {
        text.utf16.reduce(Int32(0)) { $0 &* 31 &+ Int32($1) }
    }

    /// Sensors' identifier rule, `[A-Za-z_$][A-Za-z0-9_$]*` of at most 100.
    static func isName(_ text: String) -> Bool {
        guard let first = text.utf8.first, text.utf8.count <= 100 else { return false }
        func allowed(_ b: UInt8) -> Bool {
            (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z") || b == UInt8(ascii: "_") || b == UInt8(ascii: "$")
        }
        return allowed(first) && text.utf8.allSatisfy { allowed($0) || ($0 >= 48 && $0 <= 57) }
    }

    static func decode(_ request: VendorRequest) -> VendorBatch {
        let injected = injected(request)
        func refuse(_ status: Int, _ reason: String, events: Int = 0) -> VendorBatch {
            .refusedWhole(.sensors, error(status, reason), events: events, injected: injected)
        }
        guard request.method == .POST else {
            var r = error(405, "\(request.path) only accepts POST")
            r.headers.append(("Allow", "POST"))
            return refuse(405, "").with(normal: r)
        }
        guard let project = request.query.first(where: { $0.0 == "project" })?.1, !project.isEmpty else {
            return refuse(400, "project: missing from the query (/sa?project=NAME)")
        }
        let form = Array(request.body)
        let list = FormFields.value(form, "data_list")
        guard let field = list ?? FormFields.value(form, "data") else { return refuse(400, "data_list: missing") }
        let text = String(decoding: field, as: UTF8.self)
        if let crc = FormFields.value(form, "crc").map({ String(decoding: $0, as: UTF8.self) }), !crc.isEmpty {
            guard Int32(crc) == javaHashCode(text) else { return refuse(400, "crc \(crc) does not match the data") }
        }
        guard var json = Base64.decode(field) else { return refuse(400, "data_list: not base64") }
        let gzip = FormFields.value(form, "gzip").map { String(decoding: $0, as: UTF8.self) } ?? "0"
        if gzip == "1" {
            do {
                let inflated = try BodyInflater.streaming(ByteBuffer(bytes: json), limit: 64 << 20, allocator: ByteBufferAllocator())
                json = Array(inflated.readableBytesView)
            } catch {
                return refuse(400, "data_list: gzip=1 but not gzip")
            }
        } else if gzip != "0" {
            return refuse(400, "gzip \(gzip): the mock takes 0 and 1")
        }
        let parsed = withJSON(json) { doc -> VendorBatch in
            var records: [Int] = []
            if list != nil {
                guard doc[0].kind == .array else { return refuse(400, "data_list must be a JSON array") }
                doc.forEachElement(of: 0) { _, e in records.append(e) }
            } else {
                records.append(0)
            }
            guard !records.isEmpty else { return refuse(400, "no records") }
            var batch = VendorBatch(vendor: .sensors, normal: HTTPResponse(status: 200, body: "{}"), injected: injected)
            batch.eventCount = records.count
            for (position, e) in records.enumerated() {
                if let name = doc.stringMember(e, "event") { batch.names.append(name) }
                if let problem = check(doc, e) { return refuse(400, "record \(position): \(problem)", events: records.count) }
                let time = doc.member(e, "time").flatMap(doc.int64)
                let key = doc.member(e, "_track_id").flatMap(doc.int64).map { id in
                    "\(id)|\(doc.stringMember(e, "distinct_id") ?? "")|\(doc.stringMember(e, "event") ?? "")|\(time ?? 0)"
                }
                batch.events.append(VendorEvent(key: key, name: doc.stringMember(e, "event") ?? doc.stringMember(e, "type"),
                                                timestampMs: time, json: doc.minified(e)))
            }
            return batch
        }
        switch parsed {
        case .success(let batch): return batch
        case .failure(let error): return refuse(400, "data_list: \(error.reason)")
        }
    }

    /// What makes a record invalid, nil when it is valid.
    private static func check(_ doc: JSONView, _ e: Int) -> String? {
        guard doc[e].kind == .object else { return "a record must be an object" }
        guard let type = doc.stringMember(e, "type"), types.contains(type) else { return "type: missing or unknown" }
        guard let distinct = doc.stringMember(e, "distinct_id"), !distinct.isEmpty, distinct.count <= 255 else {
            return "distinct_id: missing, empty or over 255 characters"
        }
        guard let time = doc.member(e, "time"), doc.int64(time) != nil else { return "time: missing or not ms since 1970" }
        if let id = doc.member(e, "_track_id"), doc.int64(id) == nil { return "_track_id: not an integer" }
        if type.hasPrefix("track") && type != "track_id_bind" && type != "track_id_unbind" || type == "track_id_bind" {
            guard let event = doc.stringMember(e, "event"), isName(event) else { return "event: missing or not a valid name" }
        }
        if type == "track_signup", (doc.stringMember(e, "original_id") ?? "").isEmpty { return "original_id: missing" }
        if let properties = doc.member(e, "properties") {
            guard doc[properties].kind == .object else { return "properties must be an object" }
            var problem: String?
            doc.forEachMember(of: properties) { k, _ in
                let key = doc.string(k)
                if problem == nil, !isName(key) || reserved.contains(key.lowercased()) {
                    problem = "property \(key): not a valid name, or reserved"
                }
            }
            if let problem { return problem }
        }
        return nil
    }
}
