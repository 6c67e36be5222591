// Segment's HTTP tracking API (SPEC V1–V4b), as its documentation states it:
// - `POST /v1/batch` with `{"batch": [message…], "writeKey"?, "sentAt"?, "context"?}`, and the single-call
//   paths `/v1/track|identify|page|screen|group|alias` with one message as the body;
// - the write key as HTTP Basic user name or `writeKey` in the body;
// - a request over 500 KB (batch) or 32 KB (single call), a message over 32 KB, or invalid JSON: 400;
// - every other request 200 — including messages the service then drops: without `userId` and
//   `anonymousId`, a track without `event`, an unknown `type`, beyond 2 500 in one batch. The mock answers
//   those 200 too (as the client would see it) and counts them in `events_refused`.
// - de-duplication by `messageId` (< 100 characters).
// Errors carry `{"code", "message"}`, the shape the official clients read.

enum SegmentWire {
    static let batchPath = "/v1/batch"
    static let callTypes = ["track", "identify", "page", "screen", "group", "alias"]
    static let paths: Set<String> = Set([batchPath] + callTypes.map { "/v1/" + $0 })
    static let maxBatchBytes = 500 * 1024
    static let maxMessageBytes = 32 * 1024
    static let maxBatchMessages = 2500
    static let maxMessageIdLength = 100

    static let success = HTTPResponse(status: 200, body: #"{"success":true}"#)

    static func error(_ status: Int, _ code: String, _ message: String) -> HTTPResponse {
        HTTPResponse(status: status, body: #"{"code":\#(jsonString(code)),"message":\#(jsonString(message))}"#)
    }

    @Sendable static func injectedStatus(_ status: Int) -> HTTPResponse {
        (200..<300).contains(status) ? HTTPResponse(status: status, body: #"{"success":true}"#)
            : error(status, "injected", "\(status) injected by the scenario")
    }

    static func decode(_ request: VendorRequest) -> VendorBatch {
        func refuse(_ status: Int, _ code: String, _ message: String, events: Int = 0) -> VendorBatch {
            .refusedWhole(.segment, error(status, code, message), events: events, injected: injectedStatus)
        }
        guard request.method == .POST else {
            var r = error(405, "method_not_allowed", "\(request.path) only accepts POST")
            r.headers.append(("Allow", "POST"))
            return refuse(405, "", "").with(normal: r)
        }
        let isBatch = request.path == batchPath
        let limit = isBatch ? maxBatchBytes : maxMessageBytes
        guard request.body.count <= limit else {
            return refuse(400, "payload_too_large", "body of \(request.body.count) bytes: the limit is \(limit)")
        }
        let parsed = withJSON(request.body) { doc -> VendorBatch in
            guard doc[0].kind == .object else { return refuse(400, "invalid_json", "body must be a JSON object") }
            let bodyKey = doc.stringMember(0, "writeKey")
            guard let key = request.basicUser ?? bodyKey, !key.isEmpty else {
                return refuse(401, "unauthorized", "write key missing: send it as the HTTP Basic user or as writeKey")
            }
            var batch = VendorBatch(vendor: .segment, normal: success, injected: injectedStatus)
            if isBatch {
                guard let list = doc.member(0, "batch"), doc[list].kind == .array else {
                    return refuse(400, "invalid_request", "batch: missing or not an array")
                }
                var tooLarge: String?
                doc.forEachElement(of: list) { position, element in
                    batch.eventCount += 1
                    if tooLarge == nil, doc.byteLength(element) > maxMessageBytes {
                        tooLarge = "batch[\(position)]: \(doc.byteLength(element)) bytes, over the 32 KB of a message"
                    }
                    if position >= maxBatchMessages {
                        batch.refused += 1
                        return
                    }
                    add(doc, element, type: nil, to: &batch)
                }
                if let tooLarge { return refuse(400, "payload_too_large", tooLarge, events: batch.eventCount) }
            } else {
                batch.eventCount = 1
                add(doc, 0, type: String(request.path.dropFirst(4)), to: &batch)
            }
            return batch
        }
        switch parsed {
        case .success(let batch): return batch
        case .failure(let error): return refuse(400, "invalid_json", error.reason)
        }
    }

    /// Validates one message; accepted ones are appended to `events`, others counted in `refused`.
    private static func add(_ doc: JSONView, _ index: Int, type pathType: String?, to batch: inout VendorBatch) {
        guard doc[index].kind == .object else {
            batch.refused += 1
            return
        }
        let type = doc.stringMember(index, "type") ?? pathType
        let event = doc.stringMember(index, "event")
        let name = type == "track" ? event : type
        if let name { batch.names.append(name) }
        guard let type, callTypes.contains(type), pathType == nil || pathType == type else {
            batch.refused += 1
            return
        }
        // A number is an id too: the service coerces it to a string.
        func isId(_ key: StaticString) -> Bool {
            guard let v = doc.member(index, key) else { return false }
            return doc[v].kind == .number || (doc[v].kind == .string && doc.characterCount(v) > 0)
        }
        guard isId("userId") || isId("anonymousId") else {
            batch.refused += 1
            return
        }
        if type == "track", (event ?? "").isEmpty {
            batch.refused += 1
            return
        }
        if type == "alias", (doc.stringMember(index, "previousId") ?? "").isEmpty {
            batch.refused += 1
            return
        }
        if type == "group", !doc.isPresent(doc.member(index, "groupId")) {
            batch.refused += 1
            return
        }
        let messageId = doc.stringMember(index, "messageId")
        if let messageId, messageId.count >= maxMessageIdLength {
            batch.refused += 1
            return
        }
        let timestamp = doc.stringMember(index, "timestamp").flatMap(VendorTime.iso8601Ms)
        var json = doc.minified(index)
        if pathType != nil, doc.member(index, "type") == nil, json.count > 1 {
            // A single call's type is its path: recorded as a batch would carry it.
            json.insert(contentsOf: #""type":\#(jsonString(type)),"#.utf8, at: 1)
            if json.count > 2, json[json.count - 2] == UInt8(ascii: ",") { json.remove(at: json.count - 2) }
        }
        batch.events.append(VendorEvent(key: messageId.flatMap { $0.isEmpty ? nil : $0 }, name: name,
                                        timestampMs: timestamp, json: json))
    }
}
