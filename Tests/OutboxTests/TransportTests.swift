import CCurlShim
import Foundation
import OutboxTestSupport
import Testing
@testable import Outbox

/// Real HTTP over 127.0.0.1 to `TestHTTPServer`, through a `Transport` on a real libuv loop. Serialized: the
/// concurrency and timeout tests measure time, and two cores are easily crowded.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct TransportTests {
    private func post(_ server: TestHTTPServer, _ path: String, body: [UInt8] = Array("{}".utf8),
                      headers: [(String, String)] = [("Content-Type", "application/json")]) -> HTTPRequest {
        HTTPRequest(url: server.baseURL + path, headers: headers, body: body)
    }

    // SPEC W1, A9, C8: the request's method, headers and body arrive intact; status, headers (Date) and body come
    // back; the loop closes with no handle open.
    @Test func postArrivesIntactAndTheResponseComesBack() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()
        let body = Array(#"{"logs":[{"type":"event","name":"ü"}]}"#.utf8)

        let result = await harness.send(post(server, "/echo?x=1", body: body, headers: [
            ("Content-Type", "application/json"), ("App-Secret", "secret-1"), ("Install-ID", "0d2f…-install"),
        ]))

        let response = try #require(result.response)
        #expect(response.status == 200)
        #expect(response.body == body)
        #expect(response.bodyBytesReceived == body.count)
        #expect(response.headers["date"] != nil)
        #expect(response.headers["CONTENT-TYPE"] == "application/octet-stream")
        #expect(response.timing.total > .zero)
        let request = try #require(server.requests.first)
        #expect(request.method == "POST")
        #expect(request.target == "/echo?x=1")
        #expect(request.body == body)
        #expect(request.header("App-Secret") == "secret-1")
        #expect(request.header("Install-ID") == "0d2f…-install")
        #expect(request.header("Content-Type") == "application/json")
        #expect(request.header("Expect") == nil)
        #expect(request.header("User-Agent")?.hasPrefix("Outbox/") == true)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC W1: easy handles are reused after a success, and a reused handle sends each request's own URL, headers and
    // body — not the previous request's. A failed transfer's handle is freed, not reused.
    @Test func easyHandlesAreReusedWithEachRequestsOwnURLHeadersAndBody() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        for round in 0..<4 {
            let headers = round < 2 ? [("Content-Type", "application/json"), ("App-Secret", "s-\(round / 2)")]
                                    : [("Content-Type", "application/json"), ("App-Secret", "s-1"), ("X-Round", "\(round)")]
            let body = Array("{\"round\":\(round)}".utf8)
            let response = try #require(await harness.send(post(server, "/echo?round=\(round)", body: body, headers: headers)).response)
            #expect(response.status == 200)
            #expect(response.body == body)
        }
        #expect(await harness.sync { $0.handlesCreated } == 1)
        #expect(await harness.sync { $0.idleHandleCount } == 1)
        let requests = server.requests
        #expect(requests.map(\.target) == (0..<4).map { "/echo?round=\($0)" })
        #expect(requests.map { $0.header("App-Secret") } == ["s-0", "s-0", "s-1", "s-1"])
        #expect(requests.map { $0.header("X-Round") } == [nil, nil, "2", "3"])
        #expect(requests.map { String(decoding: $0.body, as: UTF8.self) } == (0..<4).map { "{\"round\":\($0)}" })

        // A refused connection fails the transfer: its handle (the pooled one) is not kept.
        #expect(await harness.send(HTTPRequest(url: "http://127.0.0.1:1/", body: [1])).failure != nil)
        #expect(await harness.sync { $0.idleHandleCount } == 0)
        #expect(await harness.send(post(server, "/ok")).response?.status == 200)
        #expect(await harness.sync { $0.handlesCreated } == 2)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1, R4: a 503 is an answer, not a transport failure, and it carries Retry-After and x-ms-retry-after-ms.
    @Test func errorStatusIsAResponseWithItsRetryAfterHeaders() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let response = try #require(await harness.send(post(server, "/ok?status=503")).response)

        #expect(response.status == 503)
        #expect(!response.isSuccess)
        #expect(response.headers["Retry-After"] == "120")
        #expect(response.headers["X-MS-Retry-After-Ms"] == "1500")
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R4: response headers as RFC 9112 allows them: whitespace around values trimmed, a folded line joined to
    // its field, and past the cap on fields only the ones the engine reads (Retry-After here) still kept.
    @Test func responseHeadersAreParsedAsTheProtocolAllows() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let response = try #require(await harness.send(post(server, "/tricky")).response)

        #expect(response.status == 200)
        #expect(response.headers["x-padded"] == "spaced value")
        #expect(response.headers["X-Folded"] == "first second")
        #expect(response.headers["X-Filler-0"] == "0")
        #expect(response.headers["X-Filler-140"] == nil)
        #expect(response.headers["Retry-After"] == "7")
        #expect(response.headers.count == 101)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC W1: a gzip body round-trips through zlib and through the system's gzip tool.
    @Test func gzipRoundTrip() throws {
        let json = Array(String(repeating: #"{"type":"event","name":"tap","properties":{"k":"v"}},"#, count: 200).utf8)

        let compressed = try Gzip.compress(json)

        #expect(compressed.count < json.count / 5)
        #expect(Array(compressed.prefix(3)) == [0x1F, 0x8B, 0x08])   // gzip magic, deflate
        #expect(try Gzip.decompress(compressed) == json)
        #expect(try Gzip.decompress(try Gzip.compress([])) == [])
        #expect(try Gzip.decompress(compressed + (try Gzip.compress([1, 2, 3]))) == json + [1, 2, 3])
        if FileManager.default.isExecutableFile(atPath: "/bin/gzip") {
            #expect(try Self.gunzipWithSystemTool(compressed) == json)
        }
    }

    // SPEC W1: one Deflater, reset between bodies, gives each body its own complete gzip member — including after
    // a body much larger than the one before, and an empty one.
    @Test func aReusedDeflaterCompressesEachBodyOnItsOwn() throws {
        let deflater = try Deflater(level: 1)
        var random = SystemRandomNumberGenerator()
        let bodies: [[UInt8]] = [
            Array(String(repeating: #"{"name":"a"},"#, count: 120).utf8),
            (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &random) },  // incompressible: needs the bound
            [],
            Array(#"{"sentAt":"2026-11-22T07:33:46.123Z","logs":[]}"#.utf8),
        ]
        for body in bodies {
            let compressed = try deflater.compress(body)
            #expect(Array(compressed.prefix(2)) == [0x1F, 0x8B])
            #expect(try Gzip.decompress(compressed, limit: 1 << 20) == body)
        }
        #expect(throws: GzipError.invalidLevel(10)) { try Deflater(level: 10) }
    }

    // SPEC W1: damaged gzip input is a named error, never a crash.
    @Test func gzipRejectsBadInput() throws {
        let compressed = try Gzip.compress(Array(repeating: 7, count: 10_000))
        #expect(throws: GzipError.truncated) { try Gzip.decompress(Array(compressed.dropLast(20))) }
        #expect(throws: GzipError.tooLarge(limit: 100)) { try Gzip.decompress(compressed, limit: 100) }
        #expect(throws: GzipError.invalidLevel(12)) { try Gzip.compress([1], level: 12) }
        #expect(throws: GzipError.self) { try Gzip.decompress(Array("not gzip at all".utf8)) }
    }

    // SPEC W1: a compressed body goes out byte for byte with the caller's Content-Encoding header.
    @Test func gzipBodyIsSentAsGiven() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()
        let json = Array(String(repeating: #"{"name":"e"},"#, count: 300).utf8)
        let compressed = try Gzip.compress(json)

        let result = await harness.send(post(server, "/ok", body: compressed,
                                             headers: [("Content-Type", "application/json"), ("Content-Encoding", "gzip")]))

        #expect(result.response?.status == 200)
        let request = try #require(server.requests.first)
        #expect(request.header("Content-Encoding") == "gzip")
        #expect(request.body == compressed)
        #expect(try Gzip.decompress(request.body) == json)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC C3: at most 3 transfers in flight; the other 7 wait in the transport's queue and all 10 complete.
    @Test func atMostThreeTransfersAreInFlight() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()
        let results = ResultBox()

        let counts = await harness.sync { transport -> (Int, Int) in
            for _ in 0..<10 { transport.send(post(server, "/ok?delay=100")) { results.add($0) } }
            return (transport.activeCount, transport.queuedCount)
        }
        let all = await results.waitFor(10)

        #expect(counts.0 == 3)
        #expect(counts.1 == 7)
        #expect(all.allSatisfy { $0.response?.status == 200 })
        #expect(server.maxConcurrentRequests == 3)
        #expect(await harness.sync { $0.maxActiveObserved } == 3)
        #expect(await harness.sync { $0.activeCount + $0.queuedCount } == 0)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC C3: time spent in the transport's queue does not count against the request timeout (curl counts a
    // transfer's timeout from when it is added, time in curl's own queue included: requests wait outside curl).
    // 9 requests of 300 ms each, 3 at a time, take ~900 ms: with a 700 ms timeout the last ones would time out
    // if they had been waiting inside curl.
    @Test func queuedTimeDoesNotCountAgainstTheTimeout() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness(options: TransportHarness.options(requestTimeout: .milliseconds(700)))
        let results = ResultBox()

        await harness.sync { transport in
            for _ in 0..<9 { transport.send(post(server, "/ok?delay=300")) { results.add($0) } }
        }
        let all = await results.waitFor(9)

        #expect(all.compactMap(\.failure).isEmpty)
        #expect(all.compactMap(\.response).count == 9)
        let maxQueued = all.compactMap { $0.response?.timing.queued }.max() ?? .zero
        #expect(maxQueued >= .milliseconds(500))
        #expect(await harness.shutdown() == 0)
    }

    // SPEC C3 (keep-alive): 20 requests one after another reuse the connection: 1–3 connections in all.
    @Test func sequentialRequestsReuseTheConnection() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        var reused = 0
        for _ in 0..<20 {
            let response = try #require(await harness.send(post(server, "/ok")).response)
            #expect(response.status == 200)
            if response.reusedConnection { reused += 1 }
        }

        #expect((1...3).contains(server.connectionsAccepted))
        #expect(reused >= 17)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC C3 (keep-alive): a server that silently drops idle connections costs a reconnect, never a failure.
    @Test func droppedIdleConnectionIsReplacedTransparently() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        for _ in 0..<5 {
            let r = await harness.send(post(server, "/ok?drop=1"))
            #expect(r.response?.status == 200, "\(r)")
        }

        #expect(server.connectionsAccepted == 5)
        #expect(await harness.shutdown() == 0)
    }

    // A kept-alive connection that the server resets when it is reused, before answering, costs the request
    // nothing: it goes out again at once on a new connection (once), and the caller sees the answer.
    @Test func requestOnAResetKeptAliveConnectionIsSentAgainOnANewOne() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let first = await harness.send(post(server, "/ok"))
        let second = await harness.send(post(server, "/ok?reset-reused=1"))

        #expect(first.response?.status == 200)
        #expect(second.response?.status == 200, "\(second)")
        #expect(second.response?.reusedConnection == false)
        #expect(server.requests.map(\.connection) == [1, 1, 2])
        // Sent again by us, or by curl itself when it saw the reset as the connection's end before it had
        // finished sending (it does so then; which one happens depends on timing). Exactly once either way.
        #expect(await harness.sync { $0.resentOnFreshConnection } <= 1)
        #expect(await harness.shutdown() == 0)
    }

    // Only once, and only for a kept-alive connection: a new connection reset before the answer is a failure
    // (the server saw the request; SPEC R1's back-off decides when to try again).
    @Test func resetOnANewConnectionIsNotSentAgain() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let result = await harness.send(post(server, "/reset"))
        let kept = await harness.send(post(server, "/ok"))
        let resetTwice = await harness.send(post(server, "/reset?reset-reused=1"))

        #expect(result.failure == .connectionReset)
        #expect(kept.response?.status == 200)
        // Reused connection reset → sent again on a new connection → reset there too → the failure stands.
        #expect(resetTwice.failure == .connectionReset)
        #expect(server.requests.map(\.connection) == [1, 2, 2, 3])
        #expect(await harness.sync { $0.resentOnFreshConnection } <= 1)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1: certificate verification is on by default: a self-signed server is a .tls failure (retryable).
    @Test(.enabled(if: NginxServer.isAvailable)) func selfSignedCertificateIsRefusedByDefault() async throws {
        let server = try NginxServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let result = await harness.send(HTTPRequest(url: server.url(.https1, "/ok"), body: [1, 2, 3]))

        #expect(result.failure == .tls)
        #expect(await harness.shutdown() == 0)
    }

    // caFile trusts a test server's certificate, with verification still on (host name and chain checked).
    @Test(.enabled(if: NginxServer.isAvailable)) func caFileTrustsTheTestCertificate() async throws {
        let server = try NginxServer()
        defer { server.stop() }
        var options = TransportHarness.options()
        options.caFile = server.certificatePath
        let harness = try TransportHarness(options: options)
        let body = Array("tls body".utf8)

        let first = await harness.send(HTTPRequest(url: server.url(.https1, "/ok"), body: body))
        let second = await harness.send(HTTPRequest(url: server.url(.https1, "/ok"), body: body))

        #expect(first.response?.status == 200)
        #expect(second.response?.reusedConnection == true)
        #expect(await harness.shutdown() == 0)
        server.stop()
        #expect(server.loggedRequests.map(\.contentLength) == [body.count, body.count])
    }

    // SPEC R1: nothing listening → .connectionRefused (retryable).
    @Test func nothingListeningIsConnectionRefused() async throws {
        let port = try ClosedPort()
        let harness = try TransportHarness()

        let result = await harness.send(HTTPRequest(url: "http://127.0.0.1:\(port.port)/logs", body: [1]))

        #expect(result.failure == .connectionRefused)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1: a reset after the request arrived → .connectionReset.
    @Test func resetIsConnectionReset() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let result = await harness.send(post(server, "/reset"))

        #expect(result.failure == .connectionReset)
        #expect(server.requests.count == 1)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1, T7: a server that closes without answering lost the answer → .connectionReset, not refused.
    @Test func closeWithoutAnswerIsConnectionReset() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let result = await harness.send(post(server, "/close"))

        #expect(result.failure == .connectionReset)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1: no answer within requestTimeout → .timeout.
    @Test func hangingServerTimesOut() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness(options: TransportHarness.options(requestTimeout: .milliseconds(300)))
        let started = ContinuousClock.now

        let result = await harness.send(post(server, "/hang"))

        #expect(result.failure == .timeout)
        let elapsed = ContinuousClock.now - started
        #expect(elapsed >= .milliseconds(290) && elapsed < .seconds(3))
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1: an answer that is not HTTP → .malformedResponse.
    @Test func garbageAnswerIsMalformed() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let result = await harness.send(post(server, "/garbage"))

        #expect(result.failure == .malformedResponse)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC C8: cancelling one in-flight transfer completes it with .cancelled; the others finish normally.
    @Test func cancelInFlightTransferLeavesTheOthersRunning() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()
        let hung = ResultBox()
        let others = ResultBox()

        let id = await harness.start(post(server, "/hang"), into: hung)
        await server.waitForRequests(1)
        await harness.sync { transport in
            for _ in 0..<2 { transport.send(post(server, "/ok?delay=100")) { others.add($0) } }
        }
        await server.waitForRequests(3)
        harness.onLoop { $0.cancel(id) }

        #expect(await hung.waitFor(1).first?.failure == .cancelled)
        let rest = await others.waitFor(2)
        #expect(rest.allSatisfy { $0.response?.status == 200 })
        #expect(await harness.sync { $0.activeCount } == 0)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC C8: a queued transfer cancelled before it started never reaches the server.
    @Test func cancelQueuedTransferNeverSendsIt() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness(options: TransportHarness.options(maxActive: 1))
        let first = ResultBox()
        let second = ResultBox()

        _ = await harness.start(post(server, "/ok?delay=100&n=1"), into: first)
        let queued = await harness.start(post(server, "/ok?n=2"), into: second)
        #expect(await harness.sync { $0.queuedCount } == 1)
        harness.onLoop { $0.cancel(queued) }

        #expect(await second.waitFor(1).first?.failure == .cancelled)
        #expect(await first.waitFor(1).first?.response?.status == 200)
        #expect(server.requests.map(\.target) == ["/ok?delay=100&n=1"])
        #expect(await harness.shutdown() == 0)
    }

    // SPEC C8: close() with transfers in flight and queued completes every one with .cancelled, closes every
    // handle, and the loop then closes (uv_loop_close == 0).
    @Test func closeCancelsEverythingAndLeavesNoHandle() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()
        let results = ResultBox()

        await harness.sync { transport in
            for _ in 0..<5 { transport.send(post(server, "/hang")) { results.add($0) } }
        }
        await server.waitForRequests(3)
        #expect(await harness.sync { ($0.activeCount, $0.queuedCount, $0.watchedSocketCount) } == (3, 2, 3))

        let closeResult = await harness.shutdown()

        let all = results.all
        #expect(all.count == 5)
        #expect(all.allSatisfy { $0.failure == .cancelled })
        #expect(closeResult == 0)
        #expect(harness.loop.openHandleCount == 0)
    }

    // SPEC C8 (never hurt the host): a transport released on the loop thread without close() still completes its
    // transfers with .cancelled and closes its handles.
    @Test func releasedTransportCancelsAndClosesItsHandles() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let loop = try EventLoop(mode: .dedicatedThread)
        let jobs = JobQueue()
        jobs.wake = LoopAsync(loop: loop) { jobs.drain() }
        let holder = TransportHolder(try Transport(loop: loop, options: TransportHarness.options()))
        try loop.startThread(name: "transport-test-release")
        let results = ResultBox()
        let request = post(server, "/hang")

        jobs.post { holder.transport?.send(request) { results.add($0) } }
        await server.waitForRequests(1)
        jobs.post {
            holder.transport = nil
            jobs.closeWake()
        }

        #expect(await results.waitFor(1).first?.failure == .cancelled)
        loop.joinThread()
        #expect(loop.closeResult == 0)
    }

    // SPEC C8: after close(), a send completes at once with .cancelled and opens nothing.
    @Test func sendAfterCloseIsCancelled() async throws {
        let harness = try TransportHarness()
        let result = await harness.sync { transport -> TransportFailure? in
            transport.close()
            var failure: TransportFailure?
            transport.send(HTTPRequest(url: "http://127.0.0.1:1/")) { failure = $0.failure }
            return failure
        }

        #expect(result == .cancelled)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC W1: a header value with CR/LF would inject headers; it is refused before curl sees it.
    @Test func headerInjectionIsRefused() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let result = await harness.send(post(server, "/ok", headers: [("App-Secret", "x\r\nX-Injected: 1")]))
        let badURL = await harness.send(HTTPRequest(url: "file:///etc/passwd"))

        guard case .invalidRequest = result.failure else { Issue.record("expected invalidRequest, got \(result)"); return }
        guard case .invalidRequest = badURL.failure else { Issue.record("expected invalidRequest, got \(badURL)"); return }
        #expect(server.requests.isEmpty)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC W1: what the transport refuses before curl sees it, as a table (the check is written on bytes).
    @Test func requestValidationTable() {
        let accepted = ["http://127.0.0.1/", "HTTPS://in.example.com/logs?api-version=1.0.0", "HtTp://x", "https://"]
        for url in accepted {
            #expect(HTTPRequest(url: url).validationProblem == nil, "\(url)")
        }
        let refused: [(String, String)] = [
            ("ftp://x", "URL must start with http:// or https://"),
            ("http:/x", "URL must start with http:// or https://"),
            ("httpx://x", "URL must start with http:// or https://"),
            ("https:x", "URL must start with http:// or https://"),
            ("http", "URL must start with http:// or https://"),
            ("http\u{1A}//x", "URL must start with http:// or https://"),
            ("http://a b", "URL contains a space or a control character"),
            ("http://a\u{7F}", "URL contains a space or a control character"),
        ]
        for (url, problem) in refused {
            #expect(HTTPRequest(url: url).validationProblem == problem, "\(url)")
        }
        let good = [("Content-Type", "application/json"), ("X-Ms-Retry-After-Ms", "1"), ("a!#$%&'*+-.^_`|~9", "v")]
        #expect(HTTPRequest(url: "http://x", headers: good).validationProblem == nil)
        #expect(HTTPRequest(url: "http://x", headers: [("Bad Name", "v")]).validationProblem
                == "header name 'Bad Name' is not an HTTP token")
        #expect(HTTPRequest(url: "http://x", headers: [("A:B", "v")]).validationProblem == "header name 'A:B' is not an HTTP token")
        #expect(HTTPRequest(url: "http://x", headers: [("", "v")]).validationProblem == "header name '' is not an HTTP token")
        #expect(HTTPRequest(url: "http://x", headers: [("Install-ID", "a\nb")]).validationProblem
                == "header 'Install-ID' has a CR, LF or NUL in its value")
    }

    // A misbehaving server cannot make the engine hold a large body: it is cut at maxResponseBodyBytes.
    @Test func responseBodyIsCapped() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let response = try #require(await harness.send(post(server, "/big?size=300000")).response)

        #expect(response.status == 200)
        #expect(response.body.count == 64 * 1024)
        #expect(response.bodyBytesReceived == 300_000)
        #expect(response.bodyTruncated)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1: curl's error codes map to the failure classes the retry policy names.
    @Test func curlCodesMapToFailureClasses() {
        let table: [(CURLcode, TransportFailure)] = [
            (CURLE_COULDNT_CONNECT, .connectionRefused),
            (CURLE_RECV_ERROR, .connectionReset),
            (CURLE_SEND_ERROR, .connectionReset),
            (CURLE_GOT_NOTHING, .connectionReset),
            (CURLE_PARTIAL_FILE, .connectionReset),
            (CURLE_COULDNT_RESOLVE_HOST, .dns),
            (CURLE_SSL_CONNECT_ERROR, .tls),
            (CURLE_PEER_FAILED_VERIFICATION, .tls),
            (CURLE_SSL_CACERT_BADFILE, .tls),
            (CURLE_OPERATION_TIMEDOUT, .timeout),
            (CURLE_WEIRD_SERVER_REPLY, .malformedResponse),
            (CURLE_OUT_OF_MEMORY, .other(code: 27, message: "m")),
        ]
        for (code, expected) in table {
            #expect(TransportFailure(curlCode: code, message: "m") == expected, "CURLcode \(code.rawValue)")
        }
    }

    private static func gunzipWithSystemTool(_ bytes: [UInt8]) throws -> [UInt8] {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/gzip")
        process.arguments = ["-dc"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data(bytes))
        try input.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Array(data)
    }
}

// MARK: - Early answers and redirects (SPEC R1), against nginx and TestHTTPServer

extension TransportTests {
    /// Larger than nginx's initial HTTP/2 stream window (64 KiB): nginx answers a location that does not read the
    /// body before the client can finish sending it, every time, and then ends the stream.
    static let bodyBeyondTheInitialWindow = [UInt8]((0..<(256 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 31) })

    static func nginxHarness(_ nginx: NginxServer, requestTimeout: Duration = .seconds(20)) throws -> TransportHarness {
        var options = TransportHarness.options(requestTimeout: requestTimeout)
        options.caFile = nginx.certificatePath
        return try TransportHarness(options: options)
    }

    static func earlyAnswerPath(_ status: Int) -> String {
        switch status {
        case 413: return "/too-large"
        case 401: return "/unauthorized"
        default: return "/ok"
        }
    }

    // SPEC R1: a server may answer before it has read the whole body and then end the HTTP/2 stream (RST_STREAM
    // NO_ERROR) or the connection: the complete answer is the outcome, every time, and nothing is sent twice.
    // 30 requests per case, ten at a time (three in flight, SPEC C3), to a server offering HTTP/2 and to HTTP/1.1
    // ones (plain and TLS). The transport speaks HTTP/1.1 to all of them (`TransportOptions.HTTPVersion` says why).
    @Test(.enabled(if: NginxServer.isAvailable, "nginx is not installed: `make deps` installs Debian's nginx"),
          arguments: [NginxServer.Listener.h2, .https1, .http1], [200, 413, 401])
    func earlyAnswerIsTheOutcomeNotAReset(listener: NginxServer.Listener, status: Int) async throws {
        let nginx = try NginxServer()
        defer { nginx.stop() }
        let harness = try Self.nginxHarness(nginx)
        let request = HTTPRequest(url: nginx.url(listener, Self.earlyAnswerPath(status)),
                                  headers: [("Content-Type", "application/json")], body: Self.bodyBeyondTheInitialWindow)
        let results = ResultBox()

        for round in 1...3 {
            for _ in 0..<10 { _ = await harness.start(request, into: results) }
            _ = await results.waitFor(round * 10)
        }

        let all = await results.waitFor(30)
        let failures = all.compactMap(\.failure)
        #expect(failures.isEmpty, "\(failures.count) of 30 failed: \(failures.map(\.description))")
        #expect(all.map { $0.response?.status } == Array(repeating: status, count: 30))
        #expect(await harness.sync { $0.resentOnFreshConnection } == 0)
        #expect(await harness.shutdown() == 0)
        nginx.stop()
        let logged = nginx.loggedRequests
        #expect(logged.count == 30, "nginx logged \(logged.count) requests for 30 sent")
        #expect(logged.allSatisfy { $0.status == status && $0.contentLength == Self.bodyBeyondTheInitialWindow.count })
        #expect(logged.allSatisfy { $0.protocolVersion == "HTTP/1.1" })
    }

    // SPEC R1: why the transport does not negotiate HTTP/2 with the libcurl it runs on. Given the choice, nginx
    // answers over HTTP/2 and resets each stream whose body it did not read; libcurl 7.88 then loses answers it had
    // received whole. A known issue while it lasts: once a libcurl keeps every answer here, `.negotiated` can be
    // the default again.
    @Test(.enabled(if: NginxServer.isAvailable, "nginx is not installed: `make deps` installs Debian's nginx"))
    func http2EarlyAnswersNeedALibcurlThatKeepsThem() async throws {
        let nginx = try NginxServer()
        defer { nginx.stop() }
        var options = TransportHarness.options(requestTimeout: .seconds(20))
        options.caFile = nginx.certificatePath
        options.httpVersion = .negotiated
        let harness = try TransportHarness(options: options)
        let request = HTTPRequest(url: nginx.url(.h2, "/ok"), body: Self.bodyBeyondTheInitialWindow)
        let results = ResultBox()

        for _ in 0..<10 { _ = await harness.start(request, into: results) }

        let all = await results.waitFor(10)
        withKnownIssue("libcurl 7.88 drops an HTTP/2 answer that arrives with RST_STREAM NO_ERROR", isIntermittent: true) {
            let failures = all.compactMap(\.failure)
            #expect(failures.isEmpty, "\(failures.count) of 10 failed: \(failures.map(\.description))")
        }
        #expect(await harness.shutdown() == 0)
        nginx.stop()
        #expect(nginx.loggedRequests.count == 10)
        #expect(nginx.loggedRequests.allSatisfy { $0.protocolVersion == "HTTP/2.0" && $0.status == 200 })
    }

    // SPEC R1: a complete answer that came while curl was still sending the body is the outcome even when the
    // exchange then ends in an error: here the server never reads the body and the request times out. (A 413 makes
    // curl stop sending by itself; a 2xx does not.)
    @Test(arguments: [200, 413])
    func completeAnswerThenTimeoutIsTheOutcome(status: Int) async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness(options: TransportHarness.options(requestTimeout: .seconds(1)))
        // More than the loopback socket buffers of both sides hold: curl is still sending when the answer comes.
        let body = [UInt8](repeating: 0x7B, count: 32 * 1024 * 1024)

        let result = await harness.send(post(server, "/early?status=\(status)", body: body))

        #expect(result.response?.status == status, "\(result)")
        #expect(result.response?.body == Array("early".utf8))
        #expect(server.requests.count == 1)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1: an answer cut short (fewer body bytes than its Content-Length, then the connection closed) is not
    // an outcome: it stays a retryable .connectionReset.
    @Test func truncatedAnswerStaysAFailure() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let result = await harness.send(post(server, "/truncated"))

        #expect(result.failure == .connectionReset)
        #expect(server.requests.count == 1)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1: 307 and 308 to the same origin are followed with the same method, headers and body; the outcome is
    // what the target answered.
    @Test(arguments: [307, 308])
    func sameOriginTemporaryAndPermanentRedirectsAreFollowedWithTheBody(status: Int) async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()
        let body = Self.bodyBeyondTheInitialWindow
        let headers = [("Content-Type", "application/json"), ("App-Secret", "secret-r"), ("Install-ID", "install-r")]

        let result = await harness.send(post(server, "/redirect?status=\(status)&to=/echo", body: body, headers: headers))

        let response = try #require(result.response)
        #expect(response.status == 200)
        #expect(response.body.count == min(body.count, 64 * 1024))
        #expect(response.bodyBytesReceived == body.count)
        let requests = server.requests
        #expect(requests.map(\.target) == ["/redirect?status=\(status)&to=/echo", "/echo"])
        #expect(requests.allSatisfy { $0.method == "POST" && $0.body == body })
        #expect(requests.allSatisfy { $0.header("App-Secret") == "secret-r" && $0.header("Install-ID") == "install-r" })
        #expect(requests.allSatisfy { $0.header("Content-Type") == "application/json" })
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1: a 307 to another origin (another port, another host name) would carry the app secret there: it is
    // handed back as it came, Location included, and the other origin receives nothing.
    @Test func crossOriginRedirectIsNotFollowed() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let other = try TestHTTPServer()
        defer { other.stop() }
        let harness = try TransportHarness()

        let otherPort = await harness.send(post(server, "/redirect?status=307&to=/echo&port=\(other.port)"))
        let otherHost = await harness.send(post(server, "/redirect?status=307&to=/echo&host=localhost"))

        #expect(otherPort.response?.status == 307)
        #expect(otherPort.response?.headers["location"] == "http://127.0.0.1:\(other.port)/echo")
        #expect(otherHost.response?.status == 307)
        #expect(otherHost.response?.headers["Location"] == "http://localhost:\(server.port)/echo")
        #expect(server.requests.count == 2)
        #expect(other.requests.isEmpty)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1: 301, 302 and 303 are never followed (they would turn a POST into a GET): the 3xx and its Location
    // are the outcome.
    @Test(arguments: [301, 302, 303])
    func otherRedirectsAreNotFollowed(status: Int) async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let result = await harness.send(post(server, "/redirect?status=\(status)&to=/echo"))

        let response = try #require(result.response)
        #expect(response.status == status)
        #expect(response.headers["location"] == "http://127.0.0.1:\(server.port)/echo")
        #expect(server.requests.count == 1)
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1: at most 3 hops: a chain of 3 redirects ends at its target; in a chain of 4 the 4th redirect is the
    // outcome, with its Location.
    @Test func atMostThreeRedirectsAreFollowed() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()
        let body = Array("{\"logs\":[]}".utf8)

        let three = await harness.send(post(server, "/hops?left=3&status=307", body: body))
        let afterThree = server.requests.count
        let four = await harness.send(post(server, "/hops?left=4&status=308", body: body))

        #expect(three.response?.status == 200)
        #expect(three.response?.body == body)
        #expect(afterThree == 4)
        #expect(four.response?.status == 308)
        #expect(four.response?.headers["location"] == "http://127.0.0.1:\(server.port)/hops?left=0&status=308")
        #expect(server.requests.map(\.target).suffix(4) == (1...4).reversed().map { "/hops?left=\($0)&status=308" })
        #expect(server.requests.allSatisfy { $0.body == body })
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1: a followed redirect is not remembered: the next request goes to its own URL again.
    @Test func followedRedirectIsNotRemembered() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()

        let first = await harness.send(post(server, "/hops?left=1&status=308"))
        let second = await harness.send(post(server, "/hops?left=1&status=308"))

        #expect(first.response?.status == 200)
        #expect(second.response?.status == 200)
        #expect(server.requests.map(\.target) == ["/hops?left=1&status=308", "/hops?left=0&status=308",
                                                  "/hops?left=1&status=308", "/hops?left=0&status=308"])
        #expect(await harness.shutdown() == 0)
    }

    // SPEC R1: the same rules against nginx over HTTP/2 and HTTP/1.1, with a body nginx answers before reading:
    // 307 and 308 to the same origin are followed, a 307 to another origin, 301–303 and a 4th hop are the outcome.
    @Test(.enabled(if: NginxServer.isAvailable, "nginx is not installed: `make deps` installs Debian's nginx"),
          arguments: [NginxServer.Listener.h2, .https1, .http1])
    func redirectsAgainstNginx(listener: NginxServer.Listener) async throws {
        let nginx = try NginxServer()
        defer { nginx.stop() }
        let harness = try Self.nginxHarness(nginx)
        func send(_ path: String) async -> TransferResult {
            await harness.send(HTTPRequest(url: nginx.url(listener, path), headers: [("App-Secret", "s")],
                                           body: Self.bodyBeyondTheInitialWindow))
        }
        let origin = nginx.url(listener)

        for status in [307, 308] {
            let result = await send("/redirect/\(status)")
            #expect(result.response?.status == 200, "\(status): \(result)")
        }
        let crossOrigin = await send("/redirect/307-other-origin")
        #expect(crossOrigin.response?.status == 307)
        #expect(crossOrigin.response?.headers["location"] == nginx.url(.otherOrigin, "/ok"))
        for status in [301, 302, 303] {
            let result = await send("/redirect/\(status)")
            #expect(result.response?.status == status)
            #expect(result.response?.headers["location"] == origin + "/ok")
        }
        let chain = await send("/chain/1")
        #expect(chain.response?.status == 307)
        #expect(chain.response?.headers["location"] == origin + "/chain/5")
        let afterChain = await send("/chain/2")
        #expect(afterChain.response?.status == 200)

        #expect(await harness.shutdown() == 0)
        nginx.stop()
        let logged = nginx.loggedRequests
        let expected = ["/redirect/307", "/ok", "/redirect/308", "/ok", "/redirect/307-other-origin",
                        "/redirect/301", "/redirect/302", "/redirect/303",
                        "/chain/1", "/chain/2", "/chain/3", "/chain/4", "/chain/2", "/chain/3", "/chain/4", "/chain/5"]
        // Sorted: nginx logs a request once it has finished discarding its body, which may be after the next hop.
        #expect(logged.map(\.uri).sorted() == expected.sorted())
        #expect(logged.allSatisfy { $0.method == "POST" && $0.contentLength == Self.bodyBeyondTheInitialWindow.count })
        #expect(logged.allSatisfy { $0.port == nginx.port(listener) })
    }
}
