import Foundation
import NIOCore
import NIOEmbedded
import Testing
@testable import OutboxMock

/// One connection of the mock on an `EmbeddedChannel`: the server's own pipeline (`MockServer.addConnectionHandlers`),
/// a manual clock, and the loop's time moved by hand. No socket, no thread, no sleep.
private final class EmbeddedConnection {
    let channel = EmbeddedChannel()
    let core: MockCore
    let clock = ManualMockClock()
    private var written: [UInt8] = []

    init(scenario: Scenario? = nil, bodyLimit: Int = 5 * 1024 * 1024, decompressedLimit: Int = 20 * 1024 * 1024) throws {
        core = try MockCore(configuration: .init(scenario: scenario, bodyLimit: bodyLimit,
                                                 decompressedLimit: decompressedLimit, threads: 1, clock: clock))
        try MockServer.addConnectionHandlers(to: channel, core: core)
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
    }

    // A channel's pipeline and the channel hold each other until it closes: finished here, or every connection
    // (with its core and handlers) stays allocated for good (LeakSanitizer, `make sanitize`).
    deinit { _ = try? channel.finish(acceptAlreadyClosed: true) }

    /// Feeds `bytes` to the pipeline as if they arrived from the client.
    func receive(_ bytes: [UInt8]) throws {
        try channel.writeInbound(channel.allocator.buffer(bytes: bytes))
    }

    /// Everything the handler has written so far (also after the channel closed).
    func output() throws -> [UInt8] {
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
            written += buffer.readableBytesView
        }
        return written
    }

    /// The complete HTTP responses written so far, in order.
    func responses() throws -> [TestResponse] { HTTPBytes.responses(in: try output()) }

    func advance(ms: Int64) { channel.embeddedEventLoop.advanceTime(by: .milliseconds(ms)) }

    var isOpen: Bool { channel.isActive }
}

/// Raw HTTP/1.1 bytes, written and read without a client library.
enum HTTPBytes {
    static func request(_ method: String = "POST", _ path: String = Wire.logsPath,
                        headers: [(String, String)] = Wire.headers(), body: [UInt8] = Wire.body(Wire.events(1)))
        -> [UInt8] {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" { head += "Content-Length: \(body.count)\r\n" }
        return Array((head + "\r\n").utf8) + body
    }

    /// Splits `bytes` into responses framed by Content-Length; an incomplete tail is left out.
    static func responses(in bytes: [UInt8]) -> [TestResponse] {
        var result: [TestResponse] = []
        var rest = bytes[...]
        let separator = Array("\r\n\r\n".utf8)
        while let end = rest.firstRange(of: separator) {
            let lines = String(decoding: rest[rest.startIndex..<end.lowerBound], as: UTF8.self)
                .components(separatedBy: "\r\n")
            let statusWords = lines[0].split(separator: " ")
            guard statusWords.count >= 2, statusWords[0] == "HTTP/1.1", let status = Int(statusWords[1]) else { break }
            let headers = lines.dropFirst().compactMap { line -> (String, String)? in
                guard let colon = line.firstIndex(of: ":") else { return nil }
                return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
            }
            let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
            guard rest.distance(from: end.upperBound, to: rest.endIndex) >= length else { break }
            let bodyEnd = rest.index(end.upperBound, offsetBy: length)
            result.append(TestResponse(status: status, headers: headers, body: Array(rest[end.upperBound..<bodyEnd])))
            rest = rest[bodyEnd...]
        }
        return result
    }
}

private func scenario(_ json: String) throws -> Scenario { try Scenario.decode(from: Data(json.utf8)) }

/// A handler to take a context from: writes pass through it to the channel.
private final class Outbound: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
}

@Suite("Connection handler on an EmbeddedChannel (SPEC M1, M3, X2)")
struct ConnectionHandlerTests {
    // SPEC M1: HTTP/1.1 keep-alive — two requests one after the other on one connection are both answered, and the
    // connection stays open for a third.
    @Test func keepAliveAnswersEachRequestAndStaysOpen() throws {
        let connection = try EmbeddedConnection()
        try connection.receive(HTTPBytes.request())
        #expect(try connection.responses().map(\.status) == [200])
        try connection.receive(HTTPBytes.request())
        let responses = try connection.responses()
        #expect(responses.map(\.status) == [200, 200])
        #expect(responses.allSatisfy { $0.header("Connection")?.lowercased() != "close" })
        #expect(connection.isOpen)
        #expect(connection.core.stats().logsUnique == 2)
    }

    // SPEC M1, X2 delay_ms: pipelined requests are answered in the order they arrived, even when the first one's
    // answer is delayed and the second's is not.
    @Test func pipelinedRequestsAreAnsweredInOrder() throws {
        let connection = try EmbeddedConnection(
            scenario: try scenario(#"{"rules":[{"match":{"requests":"1"},"respond":{"status":202,"delay_ms":100}}]}"#))
        try connection.receive(HTTPBytes.request() + HTTPBytes.request())
        #expect(try connection.output().isEmpty)
        connection.advance(ms: 100)
        #expect(try connection.responses().map(\.status) == [202, 200])
        #expect(connection.isOpen)
    }

    // SPEC M1: a body over the wire limit gets 413 and the connection closes (the rest of the body is not read).
    @Test func aBodyOverTheLimitGets413AndCloses() throws {
        let connection = try EmbeddedConnection(bodyLimit: 1024, decompressedLimit: 4096)
        try connection.receive(HTTPBytes.request(body: Wire.body(Wire.events(20))))
        let responses = try connection.responses()
        #expect(responses.map(\.status) == [413])
        #expect(responses.first?.json["reason"] as? String == "body larger than 1024 bytes")
        #expect(responses.first?.header("Connection")?.lowercased() == "close")
        #expect(!connection.isOpen)
        #expect(connection.core.stats().logsUnique == 0)
    }

    // SPEC M1: a gzip bomb — small on the wire, over the limit once inflated — gets 413 and the connection closes.
    @Test func aGzipBombGets413AndCloses() throws {
        let connection = try EmbeddedConnection(bodyLimit: 1024, decompressedLimit: 4096)
        let bomb = TestGzip.compress([UInt8](repeating: UInt8(ascii: " "), count: 200_000), level: 9)
        #expect(bomb.count < 1024)
        try connection.receive(HTTPBytes.request(headers: Wire.headers(gzip: true), body: bomb))
        let responses = try connection.responses()
        #expect(responses.map(\.status) == [413])
        #expect(responses.first?.json["reason"] as? String == "decompressed body larger than 4096 bytes")
        #expect(!connection.isOpen)
    }

    // SPEC M1, M10: gzip's stated size (ISIZE) only sizes the one-shot inflate. A bomb whose trailer claims a
    // small size still stops at the limit (413); a body that lies about its size, a gzip member followed by
    // other bytes, or a truncated member is refused (400); an honest one is accepted.
    @Test func gzipStatedSizeIsNeverTrusted() throws {
        func withStatedSize(_ gz: [UInt8], _ size: UInt32) -> [UInt8] {
            var out = gz
            for i in 0..<4 { out[out.count - 4 + i] = UInt8(truncatingIfNeeded: size >> (8 * UInt32(i))) }
            return out
        }
        let plain = Wire.body(Wire.events(3))
        let gz = TestGzip.compress(plain)
        let cases: [(String, [UInt8], Int)] = [
            ("honest", gz, 200),
            ("bomb claiming 100 bytes", withStatedSize(
                TestGzip.compress([UInt8](repeating: UInt8(ascii: " "), count: 200_000), level: 9), 100), 413),
            ("size too small", withStatedSize(gz, UInt32(plain.count - 1)), 400),
            ("size too large", withStatedSize(gz, UInt32(plain.count + 1)), 400),
            ("trailing bytes", gz + [1, 2, 3], 400),
            ("truncated", Array(gz.dropLast(6)), 400),
        ]
        for (name, body, status) in cases {
            let connection = try EmbeddedConnection(bodyLimit: 16384, decompressedLimit: 65536)
            try connection.receive(HTTPBytes.request(headers: Wire.headers(gzip: true), body: body))
            #expect(try connection.responses().map(\.status) == [status], "\(name)")
            #expect(connection.core.stats().logsUnique == (status == 200 ? 3 : 0), "\(name)")
        }
    }

    // SPEC M2, M10: accepted logs read back (`GET /_mock/logs`) as they were sent, one line each, whatever the
    // body's encoding and layout. gzip bodies are kept compressed and inflated again when read. The batches are
    // pipelined behind a delayed answer, so the later ones wait holding their bodies while the inflater (which
    // reuses its buffers) goes on to the next.
    @Test func acceptedLogsReadBackAsSentWhateverTheEncoding() throws {
        let connection = try EmbeddedConnection(
            scenario: try scenario(#"{"rules":[{"match":{"requests":"1"},"respond":{"delay_ms":100}}]}"#))
        let batches = [Wire.events(3), Wire.events(2, name: "Pretty, printed"), Wire.events(4, name: "plain")]
        let pretty = try JSONSerialization.data(withJSONObject: ["logs": batches[1]], options: [.prettyPrinted])
        #expect(String(decoding: pretty, as: UTF8.self).contains("\n  "))
        try connection.receive(
            HTTPBytes.request(headers: Wire.headers(gzip: true), body: TestGzip.compress(Wire.body(batches[0])))
                + HTTPBytes.request(headers: Wire.headers(gzip: true), body: TestGzip.compress(Array(pretty)))
                + HTTPBytes.request(body: Wire.body(batches[2])))
        connection.advance(ms: 100)
        #expect(try connection.responses().map(\.status) == [200, 200, 200])

        let stored = connection.core.storedLogs()
        let kept = stored.map { log -> String in
            if case .gzip = log.body.bytes { return "gzip" }
            return "plain"
        }
        #expect(kept == Array(repeating: "gzip", count: 5) + Array(repeating: "plain", count: 4))
        let lines = String(decoding: ControlAPI.jsonLines(logs: stored).body, as: UTF8.self)
            .split(separator: "\n").map(String.init)
        let sent = batches.flatMap { $0 }
        #expect(lines.count == sent.count)
        for (line, log) in zip(lines, sent) {
            #expect(!line.contains(" : ") && !line.contains("\n"), "\(line)")
            var object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            #expect(object.removeValue(forKey: "vendor") as? String == "appcenter")
            #expect(object.removeValue(forKey: "received_at") != nil)
            #expect(NSDictionary(dictionary: object).isEqual(to: log), "\(line)")
        }
    }

    // SPEC M10: answers written while the loop handles one turn's ready connections go out together when the
    // turn ends, not one flush each; nothing is held past the turn.
    @Test func answersAreFlushedTogetherAtTheEndOfTheLoopsTurn() throws {
        let loop = EmbeddedEventLoop()
        let batcher = FlushBatcher(loop: loop)
        let channels = [EmbeddedChannel(handler: Outbound(), loop: loop), EmbeddedChannel(handler: Outbound(), loop: loop)]
        defer { for channel in channels { _ = try? channel.finish(acceptAlreadyClosed: true) } }
        for (i, channel) in channels.enumerated() {
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000 + i)).wait()
            let context = try channel.pipeline.syncOperations.context(handlerType: Outbound.self)
            context.write(NIOAny(channel.allocator.buffer(string: "answer \(i)")), promise: nil)
            batcher.add(context)
        }
        #expect(try channels.allSatisfy { try $0.readOutbound(as: ByteBuffer.self) == nil })
        loop.run()
        for (i, channel) in channels.enumerated() {
            #expect(try channel.readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } == "answer \(i)")
        }
        // `flushNow` (before an outage closes the loop's other connections) empties what is pending at once.
        let context = try channels[0].pipeline.syncOperations.context(handlerType: Outbound.self)
        context.write(NIOAny(channels[0].allocator.buffer(string: "late")), promise: nil)
        batcher.add(context)
        batcher.flushNow()
        #expect(try channels[0].readOutbound(as: ByteBuffer.self).map { String(buffer: $0) } == "late")
    }

    // SPEC X2 respond: the rule's status, headers and body are written as given, and the connection stays open.
    @Test func respondWritesTheRuleStatusHeadersAndBody() throws {
        let connection = try EmbeddedConnection(scenario: try scenario(
            #"{"rules":[{"respond":{"status":429,"headers":{"Retry-After":"7"},"body":"slow down"}}]}"#))
        try connection.receive(HTTPBytes.request())
        let response = try #require(try connection.responses().first)
        #expect(response.status == 429)
        #expect(response.header("Retry-After") == "7")
        #expect(response.header("Content-Type") == "text/plain; charset=utf-8")
        #expect(response.text == "slow down")
        #expect(connection.isOpen)
        #expect(connection.core.stats().logsUnique == 0)   // not 2xx: the client sends them again (SPEC M2)
    }

    // SPEC X2 respond delay_ms: nothing is written before the delay has passed on the loop's clock, then the answer.
    @Test func respondWithDelayWritesOnlyAfterTheDelay() throws {
        let connection = try EmbeddedConnection(
            scenario: try scenario(#"{"rules":[{"respond":{"delay_ms":250}}]}"#))
        try connection.receive(HTTPBytes.request())
        connection.advance(ms: 249)
        #expect(try connection.output().isEmpty)
        connection.advance(ms: 1)
        #expect(try connection.responses().map(\.status) == [200])
        #expect(connection.isOpen)
    }

    // SPEC X2 refuse: the connection is closed without a byte written (the port goes down when the server listens).
    @Test func refuseClosesWithoutAnswering() throws {
        let connection = try EmbeddedConnection(scenario: try scenario(#"{"rules":[{"action":"refuse","duration_s":5}]}"#))
        try connection.receive(HTTPBytes.request())
        #expect(try connection.output().isEmpty)
        #expect(!connection.isOpen)
        #expect(connection.core.stats().faults == ["refuse": 1])
        #expect(connection.core.stats().logsUnique == 0)
    }

    // SPEC X2 reset: closed without an answer and without recording (on a socket, SO_LINGER 0 makes it an RST; an
    // EmbeddedChannel has no socket options, so here the close is what can be seen).
    @Test func resetClosesWithoutAnsweringOrRecording() throws {
        let connection = try EmbeddedConnection(scenario: try scenario(#"{"rules":[{"action":"reset"}]}"#))
        try connection.receive(HTTPBytes.request())
        #expect(try connection.output().isEmpty)
        #expect(!connection.isOpen)
        #expect(connection.core.stats().faults == ["reset": 1])
        #expect(connection.core.stats().logsUnique == 0)
    }

    // SPEC X2 drop_after_body, M2: the body is read and its logs recorded, then the connection closes unanswered.
    @Test func dropAfterBodyRecordsThenClosesWithoutAnswering() throws {
        let connection = try EmbeddedConnection(scenario: try scenario(#"{"rules":[{"action":"drop_after_body"}]}"#))
        try connection.receive(HTTPBytes.request(body: Wire.body(Wire.events(3))))
        #expect(try connection.output().isEmpty)
        #expect(!connection.isOpen)
        #expect(connection.core.stats().logsUnique == 3)
    }

    // SPEC X2 hang: nothing is ever written, the connection stays open and the request stays in flight until the
    // client gives up.
    @Test func hangNeverAnswersAndHoldsTheRequestInFlight() throws {
        let connection = try EmbeddedConnection(scenario: try scenario(#"{"rules":[{"action":"hang"}]}"#))
        try connection.receive(HTTPBytes.request())
        connection.advance(ms: 3_600_000)
        #expect(try connection.output().isEmpty)
        #expect(connection.isOpen)
        #expect(connection.core.state.withLockedValue { $0.inFlight } == 1)
        try connection.channel.close().wait()
        #expect(connection.core.state.withLockedValue { $0.inFlight } == 0)
    }

    // SPEC X2 malformed: bytes that are not an HTTP response are written, then the connection closes.
    @Test func malformedWritesGarbageThenCloses() throws {
        let connection = try EmbeddedConnection(scenario: try scenario(#"{"rules":[{"action":"malformed"}]}"#))
        try connection.receive(HTTPBytes.request())
        let written = String(decoding: try connection.output(), as: UTF8.self)
        #expect(written == "HTTP/1.1 2OO 0K\r\nContent-Length: banana\r\n\u{0}\u{1}\r\n{\"status\":")
        #expect(HTTPBytes.responses(in: try connection.output()).isEmpty)
        #expect(!connection.isOpen)
        #expect(connection.core.stats().faults == ["malformed": 1])
    }

    // MARK: - SPEC M8 network faults, on the loop's manual clock

    // SPEC M8 drop_before_body: the head alone closes the connection; the body that follows is never read.
    @Test func dropBeforeBodyClosesOnTheHead() throws {
        let connection = try EmbeddedConnection(scenario: try scenario(#"{"rules":[{"action":"drop_before_body"}]}"#))
        let request = HTTPBytes.request(body: Wire.body(Wire.events(3)))
        let headEnd = try #require(request.firstRange(of: Array("\r\n\r\n".utf8))).upperBound
        try connection.receive(Array(request[..<headEnd]))
        #expect(try connection.output().isEmpty)
        #expect(!connection.isOpen)
        #expect(connection.core.stats().faults == ["drop_before_body": 1])
        #expect(connection.core.stats().logsReceived == 0)
        #expect(connection.core.state.withLockedValue { $0.inFlight } == 0)
    }

    // SPEC M8 drop_before_body, M1: a pipelined request to drop waits its turn, so the answer before it still goes out.
    @Test func dropBeforeBodyBehindAPipelinedRequestWaitsItsTurn() throws {
        let connection = try EmbeddedConnection(scenario: try scenario(
            #"{"rules":[{"match":{"requests":"1"},"respond":{"delay_ms":100}},{"match":{"requests":"2"},"action":"drop_before_body"}]}"#))
        try connection.receive(HTTPBytes.request() + HTTPBytes.request())
        #expect(connection.isOpen)
        connection.advance(ms: 100)
        #expect(try connection.responses().map(\.status) == [200])
        #expect(!connection.isOpen)
        #expect(connection.core.stats().logsUnique == 1)
        #expect(connection.core.stats().faults == ["respond": 1, "drop_before_body": 1])
    }

    // SPEC M8 latency_ms + jitter_ms: the answer waits latency ± jitter, added to delay_ms; the draw is seeded,
    // so the same seed gives the same wait.
    @Test func latencyWaitsOnTheLoopClock() throws {
        let json = #"{"seed":3,"rules":[{"respond":{"delay_ms":100},"network":{"latency_ms":200,"jitter_ms":50}}]}"#
        var twin = ScenarioEngine(scenario: try scenario(json))
        let wait = 100 + twin.latencyMs(Scenario.Network(latencyMs: 200, jitterMs: 50))
        let connection = try EmbeddedConnection(scenario: try scenario(json))
        try connection.receive(HTTPBytes.request())
        connection.advance(ms: Int64(wait - 1))
        #expect(try connection.output().isEmpty)
        connection.advance(ms: 1)
        #expect(try connection.responses().map(\.status) == [200])
        #expect(connection.core.stats().faults == ["respond": 1, "latency": 1])
    }

    // SPEC M8 kbps: a request of N bytes is complete no sooner than N × 8 / (kbps × 1000) s after its first byte,
    // and the answer then goes out at the same rate, a piece per hundredth of a second.
    @Test func bandwidthPacesReadingAndWriting() throws {
        let connection = try EmbeddedConnection(scenario: try scenario(#"{"rules":[{"network":{"kbps":8}}]}"#))
        let request = HTTPBytes.request()
        try connection.receive(request)
        // 8 kbps = 1 byte per ms.
        connection.advance(ms: Int64(request.count) - 2)
        #expect(try connection.output().isEmpty)
        connection.advance(ms: 2)
        // The first 10-byte piece is due 10 ms after the request is read.
        connection.advance(ms: 10)
        #expect(try connection.output().count == 10)
        connection.advance(ms: 10)
        #expect(try connection.output().count == 20)
        connection.advance(ms: 1000)
        #expect(try connection.responses().map(\.status) == [200])
        #expect(connection.isOpen)
    }

    // SPEC M8 slice_bytes + slice_delay_ms: pieces of that size, that far apart; then the connection serves on.
    @Test func slicesAreWrittenApart() throws {
        let connection = try EmbeddedConnection(
            scenario: try scenario(#"{"rules":[{"match":{"requests":"1"},"network":{"slice_bytes":5,"slice_delay_ms":20}}]}"#))
        try connection.receive(HTTPBytes.request())
        #expect(String(decoding: try connection.output(), as: UTF8.self) == "HTTP/")
        connection.advance(ms: 19)
        #expect(try connection.output().count == 5)
        connection.advance(ms: 1)
        #expect(String(decoding: try connection.output(), as: UTF8.self) == "HTTP/1.1 2")
        connection.advance(ms: 10_000)
        #expect(try connection.responses().map(\.status) == [200])
        try connection.receive(HTTPBytes.request())
        #expect(try connection.responses().map(\.status) == [200, 200])
        #expect(connection.core.stats().faults == ["slice": 1])
    }

    // SPEC M8 limit_bytes: that many bytes of the answer, then the connection closes.
    @Test func limitBytesWritesThatManyThenCloses() throws {
        let connection = try EmbeddedConnection(scenario: try scenario(#"{"rules":[{"network":{"limit_bytes":10}}]}"#))
        try connection.receive(HTTPBytes.request())
        #expect(String(decoding: try connection.output(), as: UTF8.self) == "HTTP/1.1 2")
        #expect(!connection.isOpen)
    }

    // SPEC M8 slow_close_ms: the whole answer, marked `Connection: close`, then the connection closes that much later.
    @Test func slowCloseClosesLater() throws {
        let connection = try EmbeddedConnection(scenario: try scenario(#"{"rules":[{"network":{"slow_close_ms":500}}]}"#))
        try connection.receive(HTTPBytes.request())
        let response = try #require(try connection.responses().first)
        #expect(response.header("Connection") == "close")
        connection.advance(ms: 499)
        #expect(connection.isOpen)
        connection.advance(ms: 1)
        #expect(!connection.isOpen)
    }
}
