import FoundationEssentials

/// Amplitude's HTTP V2 API (SPEC D13): `POST {endpoint}/2/httpapi` with `{"api_key","events":[…]}`. Each log is one
/// event: `insert_id` its id (Amplitude drops a repeat of it for 7 days), `device_id` the install id, `user_id` when
/// one is set, `session_id` the session's start in ms, `time` the event time as A9 corrects it (Amplitude takes it as
/// it is). A 400 naming events by index dead-letters those and sends the rest again at once; a 400 about the key or
/// the request as a whole stops like 401.
struct AmplitudeWire: DeliveryWire {
    var apiKey: String
    var installID: UUID

    var destination: Destination { .amplitude }
    static let spec = DestinationSpec(
        destination: .amplitude, fields: ["apiKey"],
        credential: DestinationCredential(field: "apiKey", keyPath: \.apiKey,
                                          missing: "destination amplitude needs apiKey, the project's API key"),
        headers: ["Content-Type", "Content-Encoding", "Install-ID"],
        makeWire: { configuration, installID in AmplitudeWire(apiKey: configuration.apiKey, installID: installID) })
    /// SPEC D13: Amplitude takes 2 000 events and 1 MB a request (a 413 beyond); the batch size's bound (500) keeps
    /// under the first.
    var maxRequestBytes: Int? { 1_000_000 }

    func request(endpoint: String, headers: [HeaderField]) -> DeliveryDriver.RequestSettings {
        DeliveryDriver.RequestSettings(url: Self.url(endpoint, "/2/httpapi"),
                                       headers: [("Content-Type", "application/json")] + commonHeaders(headers))
    }

    func encode(_ logs: [StoredLog], contexts: [Int64: [UInt8]], times: WireTimes) -> [UInt8] {
        var out = EventJSON(capacity: logs.reduce(256) { $0 + 2 * $1.payload.count + 500 })
        out.json.raw(#"{"api_key":"#)
        out.json.string(apiKey)
        out.json.raw(#","events":["#)
        var device = DeviceProperties(contexts: contexts, installID: installID, style: .amplitude)
        out.logs(logs) { log, out in
            event(log, timeMs: times.timestamp(log), device: device.fragment(log.context), into: &out)
        }
        out.json.raw("]}")
        return out.json.bytes
    }

    /// One log as an Amplitude event (D4's table in docs/BEHAVIOUR.md, "D13"): its properties as the payload is read
    /// (`event_properties`, or `user_properties.$set` for user properties and an identify's traits), then what the
    /// whole payload decides.
    private func event(_ log: borrowing StoredLog, timeMs: Int64, device: [UInt8], into out: inout EventJSON) {
        out.json.raw(#"{"insert_id":""#)
        out.json.id(log.id)
        out.json.raw(#"","time":"#)
        out.json.int(timeMs)
        out.json.raw(",")
        out.json.raw(device)
        var type = LogType.event, name: JSONText?, user: JSONText?, sid: JSONText?
        var latitude: Double?, longitude: Double?
        log.payload.withUnsafeBufferPointer { payload in
            StoredPayload.scan(payload) { field in
                switch field {
                case .type(let value):
                    // Always the first field: the container opens before any member.
                    type = value
                    out.json.raw(type == .userProperties || type == .identify ? #","user_properties":{"$set":{"#
                                 : #","event_properties":{"#)
                    out.first = true
                case .id: break     // written from `log.id` ahead of the fields
                case .sid(let value): sid = value
                case .userID(let id): user = id
                case .name(let text):
                    name = text
                    if type == .screen { out.member("[Amplitude] Screen Name"); out.quoted(text) }
                case .path(let text): out.member("path"); out.quoted(text)
                case .durationMs(let ms): out.member("duration_ms"); out.number(ms)
                case .latitude(let degrees): latitude = degrees
                case .longitude(let degrees): longitude = degrees
                case .accuracy(let metres): out.member("accuracy"); out.number(metres)
                case .property(let key, let value): out.member(key); out.value(value)
                case .categoryStart: out.member("category"); out.json.raw("["); out.first = true
                case .categoryPart(let part): out.element(); out.quoted(part)
                case .categoryEnd: out.json.raw("]"); out.first = false
                }
            }
            out.json.raw(type == .userProperties || type == .identify ? "}}" : "}")
            out.json.raw(#","event_type":"#)
            switch type {
            case .event: if let name { out.quoted(name) } else { out.json.raw(#""event""#) }
            case .startSession: out.json.raw(#""session_start""#)
            case .endSession: out.json.raw(#""session_end""#)
            case .screen: out.json.raw(#""[Amplitude] Screen Viewed""#)
            case .location: out.json.raw(#""location""#)
            case .userProperties, .identify: out.json.raw(#""$identify""#)
            }
            if let user { out.json.raw(#","user_id":"#); out.quoted(user) }
            if let sid {
                out.json.raw(#","session_id":"#)
                out.json.int(UUIDBytes(utf8: sid.raw).map { Int64($0.high >> 16) } ?? -1)
            }
            if let latitude, let longitude {
                out.json.raw(#","location_lat":"#)
                out.number(latitude)
                out.json.raw(#","location_lng":"#)
                out.number(longitude)
            }
            out.json.raw("}")
        }
    }

    /// SPEC D13: a 400 naming events (`events_with_invalid_fields`, `events_with_missing_fields`: field → indices)
    /// dead-letters those and sends the others again at once; a 400 about the key (`error` beginning `Invalid API
    /// key`) or the request as a whole (`missing_field` at the top) stops like 401, dead-lettering nothing; any other
    /// answer is R1's (413 splits, 429 is retried).
    func outcome(of result: TransferResult, nowWallMs: Int64) -> DeliveryMachine.Outcome {
        guard case .response(let response) = result, response.status == 400,
              case .object(let members)? = Self.document(response.body) else {
            return DeliveryMachine.classify(result, nowWallMs: nowWallMs)
        }
        let error = members.first { $0.key == "error" }.flatMap { if case .string(let text) = $0.value { text } else { nil } } ?? ""
        if error.hasPrefix("Invalid API key") {
            return .stop(status: 400, reason: String(error.prefix(200)))
        }
        if case .string(let field)? = members.first(where: { $0.key == "missing_field" })?.value {
            return .stop(status: 400, reason: "the request misses \(field.prefix(100)): \(error.prefix(200))")
        }
        var refused: [DeliveryMachine.RefusedLog] = []
        for (key, words) in [("events_with_invalid_fields", "invalid"), ("events_with_missing_fields", "missing")] {
            guard case .object(let fields)? = members.first(where: { $0.key == key })?.value else { continue }
            for (field, indices) in fields {
                guard case .array(let list) = indices else { continue }
                // The field's name is the server's text: bounded, as Mixpanel's (a dead letter's reason is kept).
                let reason = String("Amplitude: \(words) field \(field)".prefix(300))
                for case .integer(let index) in list where index >= 0 && index < Int64(Int32.max) {
                    refused.append(.init(index: Int(index), reason: reason))
                }
            }
        }
        guard !refused.isEmpty else { return DeliveryMachine.classify(result, nowWallMs: nowWallMs) }
        return .refusedLogs(status: 400, refused: refused, others: .resend)
    }

    /// The answer's JSON, nil when it does not parse.
    static func document(_ body: [UInt8]) -> JSONValue? {
        body.withUnsafeBufferPointer { buffer in
            var scanner = JSONScanner(buffer)
            return try? scanner.document()
        }
    }
}
