import NIOHTTP1

/// App Center's ingestion wire, Outbox's own (SPEC W1, M1): `POST /logs?api-version=1.0.0` with `App-Secret` and
/// `Install-ID`, a JSON body of logs checked one by one by `LogValidator` (in place, on the connection's reused tape,
/// SPEC M10), answered `{"status":"Success"}` or `{"status":"Error","reason":…}`.
enum AppCenterWire: IngestionWire {
    static var vendor: Vendor { .appcenter }
    static let path = "/logs"

    static func owns(path: String) -> Bool { path == Self.path }

    static func read(_ input: WireInput, failure: (status: Int, reason: String)?, context: inout WireContext)
        -> VendorBatch {
        let head = input.head
        var batch = VendorBatch(vendor: vendor, normal: .success, injected: injected(input.request))
        // The body is parsed whatever the headers say, so that `min_logs` and `log_name` rules see it.
        var check: LogValidator.BatchCheck?
        if failure == nil, head.method == .POST {
            let c = LogValidator.check(body: input.request.body, storage: context.tokens)
            if context.tokens.byteCount > WireContext.maxRetainedBytes { context.tokens = JSONTokenStorage() }
            batch.eventCount = c.logCount
            if c.failure == nil { batch.names = c.logs.compactMap(\.name) }
            check = c
        }
        if let refusal = refusal(head: head, install: input.install, failure: failure, appSecret: context.appSecret) {
            batch.normal = refusal
        } else if let check {
            if let failure = check.failure {
                batch.normal = .invalid(failure)
            } else {
                batch.events = check.logs.map(VendorEvent.init)
                batch.install = input.install
                batch.minify = check.hasInnerWhitespace
            }
        }
        // The logs of a batch refused with a 400 count as refused (SPEC V4).
        if batch.normal.status == 400 { batch.refused = batch.eventCount }
        return batch
    }

    /// Everything a healthy server refuses before looking at the logs, in this order: method, api-version,
    /// App-Secret, Install-ID, Content-Type, Content-Encoding, size, gzip data.
    static func refusal(head: HTTPRequestHead, install: String?, failure: (status: Int, reason: String)?,
                        appSecret: String?) -> HTTPResponse? {
        guard head.method == .POST else {
            var r = HTTPResponse.json(405, "MethodNotAllowed", reason: "/logs only accepts POST")
            r.headers.append(("Allow", "POST"))
            return r
        }
        guard ConnectionHandler.query(of: head.uri, "api-version") == "1.0.0" else {
            return .json(400, "Invalid", reason: "api-version: must be 1.0.0", extra: #","field":"api-version""#)
        }
        guard let secret = head.headers.first(name: "app-secret"), !secret.isEmpty else {
            return .json(401, "Unauthorized", reason: "App-Secret header missing")
        }
        if let appSecret, secret != appSecret {
            return .json(401, "Unauthorized", reason: "App-Secret does not match")  // never echo secrets
        }
        guard let install, !install.isEmpty else {
            return .json(401, "Unauthorized", reason: "Install-ID header missing")
        }
        guard UUIDKey(install) != nil else {
            return .json(401, "Unauthorized", reason: "Install-ID is not a UUID")
        }
        let contentType = head.headers.first(name: "content-type")?.lowercased() ?? ""
        guard contentType.hasPrefix("application/json") else {
            return .json(415, "UnsupportedMediaType",
                         reason: "Content-Type must be application/json, got \(contentType.isEmpty ? "none" : contentType)")
        }
        if let encoding = head.headers.first(name: "content-encoding")?.lowercased(),
           !["gzip", "deflate", "identity"].contains(encoding) {
            return .json(415, "UnsupportedMediaType", reason: "Content-Encoding \(encoding) is not supported (gzip is)")
        }
        guard let failure else { return nil }
        return bodyError(failure.status, failure.reason)
    }

    /// A path no wire owns: the answer lists every vendor's paths (a client may have meant any of them, or written
    /// a path twice), in App Center's error shape, the mock's default.
    static func notFound(_ path: String) -> HTTPResponse {
        .json(404, "NotFound", reason: "no such path \(path); the paths are \(Vendor.allCases.map(\.ingestionPaths).joined(separator: "; "))")
    }

    static func error(_ status: Int, _ reason: String, _ request: VendorRequest) -> HTTPResponse {
        bodyError(status, reason)
    }

    /// A body too large (413) or not readable (400), in App Center's error shape.
    private static func bodyError(_ status: Int, _ reason: String) -> HTTPResponse {
        status == 413 ? .json(413, "TooLarge", reason: reason) : .json(status, "Invalid", reason: reason, extra: #","field":"body""#)
    }

    /// `{"status":"Success"}` or `{"status":"Error","reason":…}`.
    static func injected(_ request: VendorRequest) -> @Sendable (Int) -> HTTPResponse { response(status:) }

    @Sendable static func response(status: Int) -> HTTPResponse {
        let body = (200..<300).contains(status) ? #"{"status":"Success"}"#
            : #"{"status":"Error","reason":"\#(status) injected by the scenario"}"#
        return HTTPResponse(status: status, headers: [("Content-Type", "application/json")], body: Array(body.utf8))
    }
}
