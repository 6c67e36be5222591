// OTLP/HTTP as the `otlp` vendor (SPEC V1–V4b): the seam between the vendor framework (routing, numbering,
// scenarios, decompression within the mock's limit, de-duplication, stats) and OTLPDecoder, which knows the wire.
// - `POST /v1/logs`, `/v1/traces`, `/v1/metrics`; other methods 405 with `Allow: POST`.
// - Content-Type `application/x-protobuf` or `application/json`, else 415 (the specification's answer).
// - Every record (log record, span, data point) is an event keyed by the decoder's `dedupKey`, named by its
//   `logName`, timed by its `timeUnixNano`; refused ones are counted and reported in `partial_success` of the 200.
// - Every 4xx and 5xx, the mock's own or a scenario's, carries a google.rpc.Status in the request's encoding
//   (protobuf when the request's Content-Type names neither), which is what the exporters parse and log.

enum OTLPHTTPWire {
    /// The encoding answers use: the request's, protobuf when it named none OTLP knows.
    static func encoding(_ request: VendorRequest) -> OTLPEncoding {
        OTLPEncoding(contentType: request.headers.first(name: "content-type")) ?? .protobuf
    }

    static func error(_ status: Int, _ message: String, encoding: OTLPEncoding) -> HTTPResponse {
        let e = OTLPDecoder.errorBody(encoding: encoding, status: status, message: message)
        return HTTPResponse(status: status, headers: [("Content-Type", e.contentType)], body: e.body)
    }

    static func error(_ status: Int, _ message: String, _ request: VendorRequest) -> HTTPResponse {
        error(status, message, encoding: encoding(request))
    }

    /// A scenario's status without a body: an empty Export…ServiceResponse for a 2xx, a google.rpc.Status otherwise.
    static func injected(_ request: VendorRequest) -> @Sendable (Int) -> HTTPResponse {
        let encoding = encoding(request)
        let signal = OTLPSignal(path: request.path)
        return { status in
            guard (200..<300).contains(status) else {
                return error(status, "\(status) injected by the scenario", encoding: encoding)
            }
            guard let signal else { return HTTPResponse(status: status, body: []) }
            let ok = OTLPDecoder.successBody(signal: signal, encoding: encoding, partial: nil)
            return HTTPResponse(status: status, headers: [("Content-Type", ok.contentType)], body: ok.body)
        }
    }

    static func decode(_ request: VendorRequest) -> VendorBatch {
        let injected = injected(request)
        func refuse(_ response: HTTPResponse) -> VendorBatch {
            .refusedWhole(.otlp, response, injected: injected)
        }
        guard let signal = OTLPSignal(path: request.path) else {
            return refuse(error(404, "no such OTLP path \(request.path)", request))
        }
        guard request.method == .POST else {
            var r = error(405, "\(request.path) only accepts POST", request)
            r.headers.append(("Allow", "POST"))
            return refuse(r)
        }
        guard let encoding = OTLPEncoding(contentType: request.headers.first(name: "content-type")) else {
            return refuse(error(415, OTLPEncoding.unsupportedMessage, encoding: .protobuf))
        }
        let decoded: OTLPDecoded
        do {
            decoded = try OTLPDecoder.decode(signal: signal, encoding: encoding, body: Array(request.body))
        } catch {
            return refuse(self.error(error.status, error.message, encoding: encoding))
        }
        let ok = OTLPDecoder.successBody(signal: signal, encoding: encoding, partial: decoded.partialSuccess)
        var batch = VendorBatch(vendor: .otlp, normal: HTTPResponse(status: 200, headers: [("Content-Type", ok.contentType)],
                                                                     body: ok.body), injected: injected)
        batch.eventCount = decoded.records.count + decoded.refused.count
        batch.refused = decoded.refused.count
        batch.names.reserveCapacity(decoded.records.count)
        batch.events.reserveCapacity(decoded.records.count)
        for (index, record) in decoded.records.enumerated() {
            batch.names.append(record.logName)
            // Rendered when read (StoredLogReader), from the body the server keeps: rendering every record as
            // OTLP/JSON on arrival was most of the decoder's cost, duplicates included.
            batch.events.append(VendorEvent(key: record.dedupKey, name: record.logName,
                                            timestampMs: record.timeUnixNano.map { Int64($0 / 1_000_000) },
                                            json: [], span: index..<index + 1))
        }
        batch.renderedWhenRead = OTLPSource(signal: signal, encoding: encoding)
        return batch
    }
}
