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
