import FoundationEssentials

/// Mixpanel's import API (SPEC D14): `POST {endpoint}/import?strict=1` (with `&project_id=N` for a service account),
/// HTTP Basic — a service account, or the project token as user name — and a JSON array of events. Each log is one
/// event: `$insert_id` its id (Mixpanel drops a repeat of it), `distinct_id` the user id or else the install id,
/// `$device_id` the install id, `time` the event time in ms as A9 corrects it. A 400 is a partial success: the records
/// it names are dead-lettered with Mixpanel's field and message, the others were imported.
struct MixpanelWire: DeliveryWire {
    var projectToken: String
    var serviceAccountUser: String
    var serviceAccountSecret: String
    var projectID: Int?
    var installID: UUID

    var destination: Destination { .mixpanel }
    static let spec = DestinationSpec(
        destination: .mixpanel, fields: ["projectToken", "serviceAccountUser", "serviceAccountSecret", "projectId"],
        credential: DestinationCredential(field: "projectToken", keyPath: \.projectToken, missing: nil),
        headers: ["Content-Type", "Content-Encoding", "Authorization", "Install-ID"],
        makeWire: { configuration, installID in
            MixpanelWire(projectToken: configuration.projectToken, serviceAccountUser: configuration.serviceAccountUser,
                         serviceAccountSecret: configuration.serviceAccountSecret, projectID: configuration.projectId,
                         installID: installID)
        },
        problem: credentialProblem)
    /// SPEC D14: Mixpanel imports 2 000 events and 10 MB (uncompressed) a request, 1 MB an event; the batch size's
    /// bound (500) keeps under the first.
    var maxRequestBytes: Int? { 10_000_000 }
    var maxLogBytes: Int? { 1_000_000 }

    /// SPEC D14: a project token, or a whole service account (user, secret and project id); nil when the
    /// configuration can send. Without an endpoint nothing is sent, and nothing is required.
    @Sendable static func credentialProblem(_ configuration: Configuration) -> String? {
        guard configuration.endpoint != nil else { return nil }
        let user = configuration.serviceAccountUser, secret = configuration.serviceAccountSecret
        if user.isEmpty && secret.isEmpty {
            guard configuration.projectToken.isEmpty else { return nil }
            return "destination mixpanel needs projectToken, or a service account: serviceAccountUser with serviceAccountSecret and projectId"
        }
        guard configuration.projectToken.isEmpty else {
            return "destination mixpanel takes projectToken or a service account (serviceAccountUser), not both"
        }
        if user.isEmpty { return "destination mixpanel: serviceAccountSecret needs serviceAccountUser" }
        if secret.isEmpty { return "destination mixpanel: serviceAccountUser needs serviceAccountSecret" }
        guard let id = configuration.projectId else { return "destination mixpanel: a service account needs projectId" }
        guard id > 0 else { return "projectId must be a positive number, got \(id)" }
        return nil
    }

    func request(endpoint: String, headers: [HeaderField]) -> DeliveryDriver.RequestSettings {
        let serviceAccount = !serviceAccountUser.isEmpty
        let basic = Data((serviceAccount ? serviceAccountUser + ":" + serviceAccountSecret : projectToken + ":").utf8)
            .base64EncodedString()
        let query = "strict=1" + (serviceAccount ? projectID.map { "&project_id=\($0)" } ?? "" : "")
        return DeliveryDriver.RequestSettings(
            url: Self.url(endpoint, "/import", query: query),
            headers: [("Content-Type", "application/json"), ("Authorization", "Basic " + basic)] + commonHeaders(headers))
    }

    func encode(_ logs: [StoredLog], contexts: [Int64: [UInt8]], times: WireTimes) -> [UInt8] {
        var out = EventJSON(capacity: logs.reduce(256) { $0 + 2 * $1.payload.count + 500 })
        out.json.raw("[")
        var device = DeviceProperties(contexts: contexts, installID: installID, style: .mixpanel)
        let install = Array(installID.uuidString.lowercased().utf8)
        out.logs(logs) { log, out in
            event(log, timeMs: times.timestamp(log), device: device.fragment(log.context), install: install, into: &out)
        }
        out.json.raw("]")
        return out.json.bytes
    }

    /// One log as a Mixpanel event (the table in docs/BEHAVIOUR.md, "D14"): its properties as the payload is read,
    /// then what the whole payload decides (`distinct_id`, `event`).
    private func event(_ log: borrowing StoredLog, timeMs: Int64, device: [UInt8], install: [UInt8], into out: inout EventJSON) {
        out.json.raw(#"{"properties":{"$insert_id":""#)
        out.json.id(log.id)
        out.json.raw(#"","time":"#)
        out.json.int(timeMs)
        out.json.raw(",")
        out.json.raw(device)
        var type = LogType.event, name: JSONText?, user: JSONText?
        log.payload.withUnsafeBufferPointer { payload in
            StoredPayload.scan(payload) { field in
                switch field {
                case .type(let value):
                    type = value
                    if type == .identify { out.member("$anon_id"); out.quoted(install) }
                case .id: break     // written from `log.id` ahead of the fields
                case .sid(let sid): out.member("session_id"); out.quoted(sid)
                case .userID(let id): user = id
                case .name(let text):
                    name = text
                    if type == .screen { out.member("$screen_name"); out.quoted(text) }
                case .path(let text): out.member("path"); out.quoted(text)
                case .durationMs(let ms): out.member("duration_ms"); out.number(ms)
                case .latitude(let degrees): out.member("$latitude"); out.number(degrees)
                case .longitude(let degrees): out.member("$longitude"); out.number(degrees)
                case .accuracy(let metres): out.member("accuracy"); out.number(metres)
                case .property(let key, let value): out.member(key); out.value(value)
                case .categoryStart: out.member("category"); out.json.raw("["); out.first = true
                case .categoryPart(let part): out.element(); out.quoted(part)
                case .categoryEnd: out.json.raw("]"); out.first = false
                }
            }
            out.json.raw(#","distinct_id":"#)
            if let user {
                out.quoted(user)
                out.json.raw(#","$user_id":"#)
                out.quoted(user)
            } else {
                out.quoted(install)
            }
            out.json.raw(#"},"event":"#)
            switch type {
            case .event: if let name { out.quoted(name) } else { out.json.raw(#""event""#) }
            case .startSession: out.json.raw(#""session_start""#)
            case .endSession: out.json.raw(#""session_end""#)
            case .screen: out.json.raw(#""$screen""#)
            case .userProperties: out.json.raw(#""user_properties""#)
            case .location: out.json.raw(#""location""#)
            case .identify: out.json.raw(#""$identify""#)
            }
            out.json.raw("}")
        }
    }

    /// SPEC D14: a 400 with a readable `failed_records` is a partial success: those records (by `index`) are
    /// dead-lettered with Mixpanel's field and message, the others were imported — nothing is sent again. A 400
    /// without one is R1's (bisected); any other answer is R1's.
    func outcome(of result: TransferResult, nowWallMs: Int64) -> DeliveryMachine.Outcome {
        guard case .response(let response) = result, response.status == 400,
              case .object(let members)? = AmplitudeWire.document(response.body),
              case .array(let records)? = members.first(where: { $0.key == "failed_records" })?.value else {
            return DeliveryMachine.classify(result, nowWallMs: nowWallMs)
        }
        var refused: [DeliveryMachine.RefusedLog] = []
        for case .object(let record) in records {
            func text(_ key: String) -> String? {
                if case .string(let value)? = record.first(where: { $0.key == key })?.value { return value }
                return nil
            }
            guard case .integer(let index)? = record.first(where: { $0.key == "index" })?.value,
                  index >= 0, index < Int64(Int32.max) else { continue }
            let reason = "Mixpanel: \(text("field") ?? "?"): \(text("message") ?? "refused")"
            refused.append(.init(index: Int(index), reason: String(reason.prefix(300))))
        }
        guard !refused.isEmpty else { return DeliveryMachine.classify(result, nowWallMs: nowWallMs) }
        return .refusedLogs(status: 400, refused: refused, others: .delivered)
    }
}
