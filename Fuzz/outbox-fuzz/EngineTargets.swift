// The engine's side: its response handling, its gzip, and its store opened on any bytes.
import CZlib
import FoundationEssentials
import Glibc
import Logging
@testable import Outbox

/// A fixed "now" (2025-11-14), so that a run is reproducible from its inputs alone.
private let nowWallMs: Int64 = 1_763_100_000_000

/// SPEC R1, R4, A9 — what the engine makes of a server's answer, from the bytes curl hands over: the input is the
/// header lines (status lines included; each fed to the transfer's header callback as curl does, CRLF-terminated)
/// up to the first empty line, then the body (fed to the body callback in two pieces, past a small cap). Then the
/// classifier (status, `Retry-After` in seconds or as an HTTP date, `x-ms-retry-after-ms`, the body's reason), the
/// pipeline pause, whether the answer arrived whole (`Content-Length`), and the `Date` header into the clock
/// correction.
let engineResponseTarget = FuzzTarget(name: "engine-response",
                                      summary: "response header lines and body through the engine's header callback, classifier and Date parser") { input in
    let transfer = CurlTransfer(id: TransferID(rawValue: 1), request: HTTPRequest(url: "http://127.0.0.1/logs"),
                                bodyCap: 256, completion: { _ in })
    var position = 0
    var line: [UInt8] = []
    var bodyStart = input.count
    while position < input.count {
        let byte = input[position]
        position += 1
        if byte != 0x0A { line.append(byte); continue }
        if line.last == 0x0D { line.removeLast() }
        line += [0x0D, 0x0A]
        _ = line.withUnsafeMutableBufferPointer { bytes in
            bytes.baseAddress!.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                transfer.received(header: $0, count: bytes.count)
            }
        }
        if line.count == 2 { bodyStart = position; break }
        line = []
    }
    if bodyStart < input.count {
        var body = Array(input[bodyStart...])
        let half = body.count / 2
        body.withUnsafeMutableBufferPointer { bytes in
            bytes.baseAddress!.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                invariant(transfer.received(body: $0, count: half) == half, "the body callback refused bytes")
                invariant(transfer.received(body: $0 + half, count: bytes.count - half) == bytes.count - half,
                          "the body callback refused bytes")
            }
        }
    }
    invariant(transfer.responseBody.count <= 256, "the body kept past its cap")
    _ = transfer.receivedCompleteAnswer

    let response = HTTPResponse(status: transfer.blockStatus ?? 0, headers: transfer.responseHeaders,
                                body: transfer.responseBody, bodyBytesReceived: transfer.responseBytes,
                                timing: TransferTiming(queued: .zero, connect: .zero, firstByte: .zero, total: .zero),
                                reusedConnection: false)
    let outcome = DeliveryMachine.classify(.response(response), nowWallMs: nowWallMs)
    if response.isSuccess { invariant(outcome == .delivered, "a \(response.status) not delivered: \(outcome)") }
    if case .retryable(_, let retryAfterMs?) = outcome {
        invariant(retryAfterMs >= 0, "a negative Retry-After: \(retryAfterMs)")
        let policy = RetryPolicy()
        if let pause = policy.pipelinePause(retryAfterMs: retryAfterMs, scheduledMs: 5000) {
            invariant(pause > 5000 && pause <= policy.maxRetryAfterMs, "a pause of \(pause) ms")
        }
    }
    // The same parsers on each raw header value, whatever the status (a 200's Retry-After is read too).
    for (name, value) in response.headers {
        _ = RetryPolicy.retryAfterMs(retryAfter: value, msRetryAfter: nil, nowMs: nowWallMs)
        _ = RetryPolicy.retryAfterMs(retryAfter: nil, msRetryAfter: value, nowMs: nowWallMs)
        _ = RetryPolicy.retryAfterMs(retryAfter: value, msRetryAfter: nil, nowMs: -nowWallMs)
        guard HTTPHeaders.equalsIgnoringCase(name, "date"), let serverMs = HTTPDate.parse(value) else { continue }
        // SPEC A9: as DeliveryDriver.learnServerClock, then every log timestamp of the next batch.
        var correction = ClockCorrection()
        correction.learn(serverMs: serverMs, monoNs: 5_000_000_000, boot: 7)
        for (wallMs, monoNs, boot) in [(nowWallMs - 60_000, Int64(1_000_000_000), Int64(7)), (0, 0, 6),
                                       (Int64.max / 2, Int64(4_000_000_000), Int64(7))] {
            _ = correction.timestamp(wallMs: wallMs, monoNs: monoNs, boot: boot,
                                     nowWallMs: nowWallMs, nowMonoNs: 9_000_000_000, nowBoot: 7)
        }
    }
}

/// Gzip bodies, bombs included: the engine's own inflate (`Gzip.decompress`, bounded), the mock's (`BodyInflater`,
/// bounded by its decompressed limit), and — the input read the other way, as a request body — the engine's two
/// compressors (`CFastGzip`, zlib), whose output both inflates must give back byte for byte.
let gzipTarget = FuzzTarget(name: "gzip", summary: "gzip bytes through the engine's and the mock's bounded inflate; any bytes through both compressors and back") { input in
    let bytes = Array(input)
    let limit = MockInflate.limit
    do {
        let inflated = try Gzip.decompress(bytes, limit: limit)
        invariant(inflated.count <= limit, "Gzip.decompress gave \(inflated.count) bytes past its limit")
    } catch let error as GzipError {
        invariant(!error.description.isEmpty, "a gzip error without a description")
    } catch {
        invariant(false, "Gzip.decompress threw something other than GzipError: \(error)")
    }
    _ = MockInflate.inflate(input)

    // Round trips: what the engine sends, the mock (and zlib) read back unchanged.
    // Made per input: a compressor kept in a global was reported by LeakSanitizer at the end of a run.
    for choice in [BodyCompression.fast, .zlib(level: 1)] {
        guard let compressor = BodyCompressor(choice), let compressed = compressor.compress(bytes) else {
            return invariant(false, "\(choice) could not compress \(bytes.count) bytes")
        }
        let engine = try? Gzip.decompress(compressed, limit: limit)
        invariant(engine == bytes, "\(choice) → Gzip.decompress changed the bytes")
        let mock = compressed.withUnsafeBufferPointer { MockInflate.inflate($0) }
        guard case .inflated(let back, _) = mock, back == bytes else {
            return invariant(false, "\(choice) → the mock's inflate changed the bytes")
        }
    }
}

/// SPEC S7: the store file holds any bytes at all (a torn copy, another program's file, a disk gone bad). Opening
/// it ends in an open store (the damage moved aside) or a clean error; never a crash. SQLite itself is not
/// instrumented, so coverage counts only our opener's paths: 100 000 runs are enough (scripts/fuzz.sh).
private nonisolated(unsafe) var storeDirectory = ""

let storeTarget = FuzzTarget(name: "store", summary: "any bytes as the store file, opened by LogStore", body: { input in
    let path = storeDirectory + "/fuzz.outbox"
    for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    // A second file beside it: what a moved-aside store leaves (the opener picks a free name).
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    invariant(fd >= 0, "cannot create \(path): \(errno)")
    var written = 0
    while written < input.count {
        let n = write(fd, input.baseAddress! + written, input.count - written)
        invariant(n > 0, "cannot write \(path): \(errno)")
        written += n
    }
    close(fd)
    var logger = Logger(label: "outbox-fuzz")
    logger.logLevel = .critical
    do {
        let store = try LogStore(path: path, limits: StoreLimits(maxStorageSize: 256 * 1024), clock: SystemClock(),
                                 logger: logger)
        // Opened: it answers, and closes.
        _ = try? store.counts()
        store.close()
    } catch {
        invariant(!"\(error)".isEmpty, "a store error without a description")
    }
    // Whatever was moved aside goes, so that the directory does not fill up over 100 000 runs.
    if let entries = opendir(storeDirectory) {
        while let entry = readdir(entries) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { unlink(storeDirectory + "/" + name) }
        }
        closedir(entries)
    }
}, setUp: {
    storeDirectory = temporaryDirectory("store")
})

/// `outbox-fuzz --seed-store PATH`: a small store as the engine leaves it (three logs, closed cleanly), the store
/// target's seed; made by the code under test rather than kept as a binary file that a schema change would outdate.
func makeStoreSeed(path: String) throws {
    var logger = Logger(label: "outbox-fuzz")
    logger.logLevel = .critical
    let store = try LogStore(path: path, limits: StoreLimits(maxStorageSize: 64 * 1024), clock: SystemClock(), logger: logger)
    var logs: [NewLog] = []
    for ordinal in 1...3 {
        let payload = Array(#"{"type":"event","name":"seed","properties":{"i":\#(ordinal)}}"#.utf8)
        let id = UUIDBytes(high: 0xF022_0000_0000_0000 | UInt64(ordinal), low: UInt64(ordinal))
        let priority: Priority = ordinal == 2 ? .critical : .normal
        logs.append(NewLog(id: id, priority: priority, wallMs: nowWallMs + Int64(ordinal),
                           monoNs: Int64(ordinal) * 1_000_000, boot: 7, context: 0, payload: payload))
    }
    _ = try store.append(logs, newEventNames: ["seed"])
    store.close()
}

/// SPEC D5, K5 — an OTLP server's answer as the engine reads it: the first byte picks the `Content-Type`, the second
/// the status, the rest is the body (`partial_success`, protobuf or JSON, or anything). A 2xx is delivered or
/// partially rejected with a positive count and a bounded message; 415 stops; nothing traps.
let otlpResponseTarget = FuzzTarget(name: "otlp-response",
                                    summary: "an OTLP answer's partial_success (protobuf or JSON, by Content-Type) through OTLPWire.outcome") { input in
    guard input.count >= 2 else { return }
    let types = ["application/json", "application/x-protobuf", "application/protobuf", "application/json; charset=utf-8", "text/plain"]
    let statuses = [200, 202, 206, 400, 415, 429, 500, 503]
    let type = types[Int(input[0]) % types.count]
    let status = statuses[Int(input[1]) % statuses.count]
    let response = HTTPResponse(status: status, headers: HTTPHeaders([("Content-Type", type)]), body: Array(input[2...]),
                                bodyBytesReceived: input.count - 2,
                                timing: TransferTiming(queued: .zero, connect: .zero, firstByte: .zero, total: .zero),
                                reusedConnection: false)
    let outcome = OTLPWire(encoding: .protobuf, installID: UUID()).outcome(of: .response(response), nowWallMs: nowWallMs)
    switch outcome {
    case .partiallyRejected(let count, let message):
        invariant((200..<300).contains(status), "a partial rejection from a \(status)")
        invariant(count > 0 && message.count <= 1000, "a partial rejection of \(count) with \(message.count) characters")
    case .delivered:
        invariant((200..<300).contains(status), "a \(status) delivered")
    default:
        invariant(!(200..<300).contains(status), "a \(status) not delivered: \(outcome)")
        if status == 415, case .stop = outcome {} else if status == 415 { invariant(false, "415 did not stop: \(outcome)") }
    }
}

/// SPEC D5, R1, K5 — any answer of a destination's server (status, headers, body, or a transport failure) through
/// the wire's `outcome`: a 2xx is delivered, anything else is not, a stop only for 301/307/401/403/404 (and the
/// statuses in `stops`: Amplitude's 400 about the key), nothing crashes. A wire that reads logs named by index in
/// the answer (`named`: D13, D14) refuses them only from a 400, with indices a batch can hold, reasons and stop
/// reasons bounded, and the others `named` says; `fromInput` then turns an input whose second byte is 1 into such an
/// answer (indices and a field name from the bytes), which must give back exactly those indices.
func destinationResponseTarget(_ name: String, stops: Set<Int> = [], named: DeliveryMachine.Others? = nil,
                               fromInput: (@Sendable ([UInt8]) -> (body: [UInt8], indices: [Int], field: String))? = nil,
                               _ wire: @escaping @Sendable () -> any DeliveryWire) -> FuzzTarget {
    FuzzTarget(name: "\(name)-response", summary: "any answer of a \(name) server through its wire's outcome") { input in
        guard input.count >= 3 else { return }
        let statuses = [200, 201, 202, 204, 301, 307, 400, 401, 403, 404, 408, 413, 422, 429, 500, 501, 503, 505]
        let status = statuses[Int(input[0]) % statuses.count]
        let wire = wire()
        if input[1] == 0 {
            let outcome = wire.outcome(of: .failure(.connectionReset), nowWallMs: nowWallMs)
            invariant({ if case .retryable = outcome { return true }; return false }(), "a reset is not retryable: \(outcome)")
            return
        }
        var headers: [(String, String)] = [("Content-Type", input[2] % 2 == 0 ? "application/json" : "text/plain")]
        var body = Array(input[3...])
        var expected: (indices: [Int], field: String)?
        if input[1] == 1, let fromInput {
            let made = fromInput(body)
            body = made.body
            expected = (made.indices, made.field)
        }
        if input[2] % 3 == 0 { headers.append(("Retry-After", String(decoding: body.prefix(12), as: UTF8.self))) }
        let response = HTTPResponse(status: status, headers: HTTPHeaders(headers), body: body, bodyBytesReceived: body.count,
                                    timing: TransferTiming(queued: .zero, connect: .zero, firstByte: .zero, total: .zero),
                                    reusedConnection: false)
        let outcome = wire.outcome(of: .response(response), nowWallMs: nowWallMs)
        switch outcome {
        case .delivered, .partiallyRejected:
            invariant((200..<300).contains(status), "a \(status) delivered: \(outcome)")
        case .stop(let stopStatus, let reason):
            invariant([301, 307, 401, 403, 404].contains(status) || stops.contains(status), "a \(status) stopped sending")
            invariant(stopStatus == status && reason.count <= 600, "a stop as \(stopStatus) for a \(status), reason of \(reason.count) characters")
        case .refusedLogs(let refusedStatus, let refused, let others):
            invariant(named != nil && status == 400 && refusedStatus == 400, "a \(status) named refused logs")
            invariant(others == named, "the others of a named refusal \(others), not \(String(describing: named))")
            invariant(!refused.isEmpty, "a named refusal naming nothing")
            for log in refused {
                invariant(log.index >= 0 && log.index < Int(Int32.max), "a refused index \(log.index)")
                invariant(!log.reason.isEmpty && log.reason.count <= 400, "a reason of \(log.reason.count) characters")
            }
        default:
            invariant(!(200..<300).contains(status), "a \(status) not delivered: \(outcome)")
        }
        // A well-formed answer naming logs (made from the input) is read back exactly, whatever the field's characters.
        guard let expected, status == 400 else { return }
        guard case .refusedLogs(_, let refused, _) = outcome else {
            return invariant(expected.indices.isEmpty, "an answer naming \(expected.indices) read as \(outcome)")
        }
        invariant(refused.map(\.index) == expected.indices, "an answer naming \(expected.indices) read as \(refused.map(\.index))")
        // Compared as UTF-8: a field starting with a combining mark joins the character before it in the reason.
        let field = Array(expected.field.prefix(100).utf8)
        invariant(refused.allSatisfy { Array($0.reason.utf8).contains(subsequence: field) },
                  "a reason without the answer's field: \(refused.first?.reason ?? "")")
    }
}

let postHogResponseTarget = destinationResponseTarget("posthog") { PostHogWire(apiKey: "phc_fuzz", installID: UUID()) }
let segmentResponseTarget = destinationResponseTarget("segment") { SegmentWire(writeKey: "fuzz", profile: .segment, installID: UUID()) }
/// D11, D12: Sensors' and GA4's answers are R1's (the wires add no reading of their own).
let sensorsResponseTarget = destinationResponseTarget("sensors") { SensorsWire(installID: UUID()) }
let ga4ResponseTarget = destinationResponseTarget("ga4") {
    var logger = Logger(label: "outbox-fuzz")
    logger.logLevel = .critical
    return GA4Wire(measurementId: "G-FUZZ", apiSecret: "fuzz", installID: UUID(), warnings: GA4Warnings(logger: logger))
}
/// D13: a 400 naming events by index (`events_with_invalid_fields` / `events_with_missing_fields`) refuses those and
/// resends the others; one about the key or a missing top-level field stops.
let amplitudeResponseTarget = destinationResponseTarget("amplitude", stops: [400], named: .resend, fromInput: { bytes in
    let (indices, field) = namedIndices(bytes)
    let list = indices.map(String.init).joined(separator: ",")
    return (Array(#"{"code":400,"error":"Request missing required field","events_with_invalid_fields":{"\#(escapedJSON(field))":[\#(list)]}}"#.utf8),
            indices, field)
}) { AmplitudeWire(apiKey: "fuzz", installID: UUID()) }
/// D14: a 400 with `failed_records` settles the batch: those records refused, the others imported.
let mixpanelResponseTarget = destinationResponseTarget("mixpanel", named: .delivered, fromInput: { bytes in
    let (indices, field) = namedIndices(bytes)
    let records = indices.map { #"{"index":\#($0),"insert_id":"x","field":"\#(escapedJSON(field))","message":"invalid"}"# }
    return (Array(#"{"code":400,"error":"some data points in the request failed validation","failed_records":[\#(records.joined(separator: ","))],"num_records_imported":0,"status":"Bad Request"}"#.utf8),
            indices, field)
}) { MixpanelWire(projectToken: "fuzz", serviceAccountUser: "", serviceAccountSecret: "", projectID: nil, installID: UUID()) }

/// The indices (the first byte says how many, up to 16; two bytes each, so up to 65 535) and the field name (the
/// bytes after them) of an answer made from a fuzz input.
private func namedIndices(_ bytes: [UInt8]) -> (indices: [Int], field: String) {
    let count = min(Int(bytes.first ?? 0) % 17, max(0, (bytes.count - 1) / 2))
    let indices = (0..<count).map { Int(bytes[1 + 2 * $0]) << 8 | Int(bytes[2 + 2 * $0]) }
    let field = String(decoding: bytes.dropFirst(1 + 2 * count), as: UTF8.self)
    return (indices, field)
}

/// A JSON string's contents, every character outside printable ASCII (and `"`, `\`) escaped as `\uXXXX` — UTF-16
/// units, so a scalar past U+FFFF is a surrogate pair — independently of the engine's own writer.
private func escapedJSON(_ text: String) -> String {
    var out = ""
    for unit in text.utf16 {
        if unit >= 0x20 && unit < 0x7F && unit != 0x22 && unit != 0x5C {
            out.unicodeScalars.append(Unicode.Scalar(UInt8(unit)))
        } else {
            let hex = String(unit, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        }
    }
    return out
}

/// SPEC D2, D4, K5 — any bytes as a stored payload (a store written by another version, a disk gone bad), beside a
/// good log, through both OTLP encoders: the protobuf body's lengths nest to its end, the JSON body parses, and the
/// good log is in both.
let otlpPayloadTarget = FuzzTarget(name: "otlp-payload",
                                   summary: "any bytes as a stored payload, encoded by OTLPWire as protobuf and OTLP/JSON") { input in
    let good = StoredLog(seq: 1, id: UUIDBytes(high: 0x0193_0000_0000_7000, low: 0x8000_0000_0000_0001), priority: .normal,
                         wallMs: nowWallMs, monoNs: 0, boot: 0, context: 1,
                         payload: Array(#"{"type":"event","id":"x","sid":null,"name":"good"}"#.utf8))
    var odd = good
    odd.seq = 2
    odd.id.low += 1
    odd.payload = Array(input)
    let times = WireTimes(sentAtMs: nowWallMs, timestamp: { $0.wallMs })
    let contexts: [Int64: [UInt8]] = [1: Array(#"{"osName":"Linux"}"#.utf8)]
    let proto = OTLPWire(encoding: .protobuf, installID: UUID()).encode([good, odd], contexts: contexts, times: times)
    invariant(protoNests(proto[...], depth: 0), "the protobuf body's lengths do not nest")
    invariant(proto.contains(subsequence: Array("good".utf8)), "the good log is not in the protobuf body")
    let json = OTLPWire(encoding: .json, installID: UUID()).encode([good, odd], contexts: contexts, times: times)
    let parsed: JSONValue? = json.withUnsafeBufferPointer { buffer in
        var scanner = JSONScanner(buffer)
        return try? scanner.document()
    }
    invariant(parsed != nil, "the OTLP/JSON body does not parse: \(String(decoding: json.prefix(300), as: UTF8.self))")
}

/// Whether every length-delimited field's bytes, read as a message, read to their end (strings that happen not
/// to parse as messages are accepted: the walk only checks that no length runs past its parent).
private func protoNests(_ bytes: ArraySlice<UInt8>, depth: Int) -> Bool {
    var reader = ProtoReader(bytes)
    while let field = reader.next() {
        if case .bytes(_, let inner) = field, depth < 6 {
            var probe = ProtoReader(inner)
            while probe.next() != nil {}
            if !probe.failed, !protoNests(inner, depth: depth + 1) { return false }
        }
    }
    return !reader.failed
}

private extension Array where Element == UInt8 {
    func contains(subsequence: [UInt8]) -> Bool {
        guard subsequence.count <= count else { return false }
        return (0...(count - subsequence.count)).contains { self[$0..<($0 + subsequence.count)].elementsEqual(subsequence) }
    }
}

/// SPEC K1, K5 — the key-file reader and the opening of sealed values, on any bytes. The input is written to a key file
/// (mode 0600) and read by `StoreKey(contentsOfFile:)`: it is accepted exactly when it is 32 bytes, or 64 hex digits
/// and at most one final newline, and then the key is those bytes (or what the digits say); anything else is refused
/// with a message that names the file. The same bytes, as a stored value, never open under a key: a value forged
/// without the key does not authenticate.
private nonisolated(unsafe) var keyDirectory = ""
private nonisolated(unsafe) var fuzzKeys: StoreKeys?

let storeKeyTarget = FuzzTarget(name: "store-key", summary: "any bytes as a key file (StoreKey) and as a sealed value", body: { input in
    let path = keyDirectory + "/fuzz.key"
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    invariant(fd >= 0, "cannot create \(path): \(errno)")
    if input.count > 0 { invariant(write(fd, input.baseAddress, input.count) == input.count, "cannot write \(path)") }
    close(fd)
    let bytes = Array(input)
    var text = bytes[...]
    if text.last == UInt8(ascii: "\n") { text = text.dropLast() }
    let hex = text.count == 64 && text.allSatisfy { ($0 >= 48 && $0 <= 57) || ($0 >= 65 && $0 <= 70) || ($0 >= 97 && $0 <= 102) }
    do {
        let key = try StoreKey(contentsOfFile: path)
        invariant(bytes.count == 32 || hex, "a key file of \(bytes.count) bytes was accepted")
        if bytes.count == 32 {
            invariant(key.bytes == bytes, "a raw key file read as other bytes")
        } else {
            let expected = stride(from: 0, to: 64, by: 2).map { index -> UInt8 in
                let pair = String(decoding: text[text.startIndex + index ..< text.startIndex + index + 2], as: UTF8.self)
                return UInt8(pair, radix: 16) ?? 0
            }
            invariant(key.bytes == expected, "a hex key file read as other bytes")
        }
        let keyHex = key.bytes.map { String($0, radix: 16) }.map { $0.count == 1 ? "0" + $0 : $0 }.joined()
        invariant(!key.description.contains(keyHex), "the key's description shows it")
    } catch {
        invariant(bytes.count != 32 && !hex, "a valid key file was refused: \(error)")
        invariant("\(error)".contains(path), "the refusal does not name the file: \(error)")
    }
    if let keys = fuzzKeys {
        invariant(keys.open(UnsafeRawBufferPointer(input), .log(UUIDBytes(high: 1, low: 2))) == nil,
                  "bytes made without the key opened as a sealed value")
    }
}, setUp: {
    keyDirectory = temporaryDirectory("store-key")
    fuzzKeys = try? StoreKeys(key: StoreKey(bytes: [UInt8](repeating: 7, count: 32)), previous: nil,
                              nameKey: [UInt8](repeating: 9, count: 32))
})
