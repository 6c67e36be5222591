import Foundation
import Testing
@testable import OutboxMock

@Suite("Server over HTTP (SPEC W1, M1, M2, M4, M6, M7, X1)")
struct ServerTests {
    // SPEC W1, M1: a valid batch gets 200 {"status":"Success"} with a Date header.
    @Test func validBatchIsAcceptedWithDateHeader() throws {
        try withServer { (server: MockServer) throws in
            let response = try Wire.post(server.port, Wire.events(3))
            #expect(response.status == 200)
            #expect(response.text == #"{"status":"Success"}"#)
            let date = try #require(response.header("Date"))
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
            let parsed = try #require(formatter.date(from: date))
            #expect(abs(parsed.timeIntervalSinceNow) < 5)
            let stats = server.stats()
            #expect(stats.requests == 1)
            #expect(stats.logsReceived == 3)
            #expect(stats.logsUnique == 3)
            #expect(stats.statusCounts == ["200": 1])
        }
    }

    // SPEC W1: App-Secret and Install-ID are required; --app-secret checks the value.
    @Test func credentialsAreRequired() throws {
        try withServer(.init(appSecret: "s3cret", threads: 2)) { (server: MockServer) throws in
            let body = Wire.body(Wire.events(1))
            func post(_ headers: [(String, String)]) throws -> TestResponse {
                try TestConnection(port: server.port).request("POST", Wire.logsPath, headers: headers, body: body)
            }
            let noSecret = try post(Wire.headers(secret: nil))
            #expect(noSecret.status == 401)
            #expect(noSecret.json["reason"] as? String == "App-Secret header missing")
            let wrong = try post(Wire.headers(secret: "guess"))
            #expect(wrong.status == 401)
            #expect(wrong.json["reason"] as? String == "App-Secret does not match")
            #expect(!wrong.text.contains("s3cret"))
            let noInstall = try post(Wire.headers(install: nil, secret: "s3cret"))
            #expect(noInstall.status == 401)
            #expect(noInstall.json["reason"] as? String == "Install-ID header missing")
            let badInstall = try post(Wire.headers(install: "me", secret: "s3cret"))
            #expect(badInstall.json["reason"] as? String == "Install-ID is not a UUID")
            #expect(try post(Wire.headers(secret: "s3cret")).status == 200)
            #expect(server.stats().statusCounts == ["401": 4, "200": 1])
            #expect(server.stats().logsUnique == 1)
        }
    }

    // SPEC W1: path, method, api-version, Content-Type and Content-Encoding.
    @Test func requestLineAndHeadersAreChecked() throws {
        try withServer { (server: MockServer) throws in
            let port = server.port
            let body = Wire.body(Wire.events(1))
            let conn = try TestConnection(port: port)
            let noVersion = try conn.request("POST", "/logs", headers: Wire.headers(), body: body)
            #expect(noVersion.status == 400)
            #expect(noVersion.json["reason"] as? String == "api-version: must be 1.0.0")
            #expect(try conn.request("POST", "/logs?api-version=2.0.0", headers: Wire.headers(), body: body).status == 400)
            let unknown = try conn.request("POST", "/v2/batch", headers: Wire.headers(), body: body)
            #expect(unknown.status == 404)
            // A client may have meant any vendor's path, or written one twice: the answer lists every vendor's.
            let reason = unknown.json["reason"] as? String ?? ""
            for path in ["/logs?api-version=1.0.0", "/v1/logs", "/batch/", "/v1/batch", "/track", "/com.snowplowanalytics.snowplow/tp2"] {
                #expect(reason.contains(path), "\(reason)")
            }
            let get = try conn.request("GET", Wire.logsPath)
            #expect(get.status == 405)
            #expect(get.header("Allow") == "POST")
            var textHeaders = Wire.headers()
            textHeaders[0] = ("Content-Type", "text/plain")
            #expect(try conn.request("POST", Wire.logsPath, headers: textHeaders, body: body).status == 415)
            let brotli = try conn.request("POST", Wire.logsPath, headers: Wire.headers() + [("Content-Encoding", "br")],
                                          body: body)
            #expect(brotli.status == 415)
            #expect(try conn.request("POST", Wire.logsPath, headers: Wire.headers(), body: body).status == 200)
        }
    }

    // SPEC M1: a refusal is 400 with a JSON reason naming the first bad log's index and field.
    @Test func invalidBatchGets400WithIndexAndField() throws {
        try withServer { (server: MockServer) throws in
            var bad = Wire.event()
            bad["name"] = String(repeating: "x", count: 257)
            let response = try Wire.post(server.port, Wire.events(3) + [bad, Wire.event()])
            #expect(response.status == 400)
            let json = response.json
            #expect(json["status"] as? String == "Invalid")
            #expect(json["reason"] as? String == "logs[3].name: longer than 256 characters")
            #expect(json["index"] as? Int == 3)
            #expect(json["field"] as? String == "name")
            // Nothing of a refused batch is recorded.
            #expect(server.stats().logsReceived == 0)
            #expect(try statsJSON(server.port)["status_counts"] as? [String: Int] == ["400": 1])
        }
    }

    // SPEC W1, M1: gzip bodies are decompressed.
    @Test func gzipBodyIsAccepted() throws {
        try withServer { (server: MockServer) throws in
            let logs = Wire.events(50)
            let response = try Wire.post(server.port, logs, gzip: true)
            #expect(response.status == 200)
            #expect(server.stats().logsUnique == 50)
            let ids = Set(server.uniqueLogs().map(\.id))
            #expect(ids == Set(logs.compactMap { $0["id"] as? String }))
            // Bytes on the wire count the body as sent, compressed; a reset clears them.
            #expect(server.wireBytes() == TestGzip.compress(Wire.body(logs)).count)
            server.reset()
            #expect(server.wireBytes() == 0)
        }
    }

    // SPEC M1: a gzip bomb (small on the wire, huge decompressed) gets 413.
    @Test func gzipBombGets413() throws {
        try withServer(.init(bodyLimit: 64 * 1024, decompressedLimit: 256 * 1024, threads: 2)) { (server: MockServer) throws in
            var plain = Array(#"{"logs":[{"type":"event","pad":""#.utf8)
            plain += [UInt8](repeating: UInt8(ascii: "a"), count: 4 * 1024 * 1024)
            plain += Array(#""}]}"#.utf8)
            let bomb = TestGzip.compress(plain, level: 9)
            #expect(bomb.count < 64 * 1024)
            let conn = try TestConnection(port: server.port)
            let response = try conn.request("POST", Wire.logsPath, headers: Wire.headers(gzip: true), body: bomb)
            #expect(response.status == 413)
            #expect((response.json["reason"] as? String)?.contains("decompressed body larger than 262144 bytes") == true)
            #expect(response.header("Connection") == "close")
            // The server stays healthy.
            #expect(try Wire.post(server.port, Wire.events(1), gzip: true).status == 200)
        }
    }

    // SPEC M1: a body over the limit gets 413, with or without Content-Length known in advance.
    @Test func oversizedBodyGets413() throws {
        try withServer(.init(bodyLimit: 100_000, threads: 2)) { (server: MockServer) throws in
            let big = Wire.body(Wire.events(400))
            #expect(big.count > 100_000)
            let response = try Wire.post(server.port, Wire.events(400))
            #expect(response.status == 413)
            #expect(response.json["reason"] as? String == "body larger than 100000 bytes")
            // Chunked: no Content-Length, the limit is found by counting.
            let conn = try TestConnection(port: server.port)
            var head = "POST \(Wire.logsPath) HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            for (n, v) in Wire.headers() { head += "\(n): \(v)\r\n" }
            head += "\r\n"
            var bytes = Array(head.utf8)
            for chunk in stride(from: 0, to: big.count, by: 16384).map({ big[$0..<min($0 + 16384, big.count)] }) {
                bytes += Array((String(chunk.count, radix: 16) + "\r\n").utf8) + chunk + Array("\r\n".utf8)
            }
            bytes += Array("0\r\n\r\n".utf8)
            try conn.sendRaw(bytes)
            #expect(try conn.readResponse().status == 413)
            #expect(server.stats().statusCounts == ["413": 2])
        }
    }

    // SPEC M1: a body that claims gzip but is not gets 400.
    @Test func brokenGzipGets400() throws {
        try withServer { (server: MockServer) throws in
            let conn = try TestConnection(port: server.port)
            let response = try conn.request("POST", Wire.logsPath, headers: Wire.headers(gzip: true),
                                            body: Array("definitely not gzip".utf8))
            #expect(response.status == 400)
            #expect(response.json["field"] as? String == "body")
        }
    }

    // SPEC M2: de-duplication by log id, per install.
    @Test func duplicatesAreCountedPerInstall() throws {
        try withServer { (server: MockServer) throws in
            let logs = Wire.events(5)
            #expect(try Wire.post(server.port, logs).status == 200)
            #expect(try Wire.post(server.port, logs).status == 200)
            #expect(try Wire.post(server.port, Array(logs[0..<2]) + Wire.events(1), install: Wire.otherInstall).status == 200)
            let stats = try statsJSON(server.port)
            #expect(stats["logs_received"] as? Int == 13)
            #expect(stats["logs_unique"] as? Int == 6)
            #expect(stats["logs_duplicate"] as? Int == 7)
            let installs = try #require(stats["installs"] as? [String: [String: Int]])
            #expect(installs[Wire.install] == ["logs_received": 10, "logs_unique": 5])
            #expect(installs[Wire.otherInstall] == ["logs_received": 3, "logs_unique": 1])
            // The duplicate keeps its first arrival.
            #expect(server.uniqueLogs().filter { $0.install == Wire.otherInstall }.count == 1)
        }
    }

    // SPEC X1, V4: /_mock/stats has exactly the X1 keys, and `vendors`.
    @Test func statsHaveExactlyTheX1Keys() throws {
        try withServer { (server: MockServer) throws in
            try Wire.post(server.port, Wire.events(2))
            let stats = try statsJSON(server.port)
            #expect(Set(stats.keys) == ["requests", "status_counts", "logs_received", "logs_unique", "logs_duplicate",
                                        "faults", "installs", "late_logs", "delay_ms", "max_in_flight", "vendors"])
            #expect(Set((stats["delay_ms"] as? [String: Any] ?? [:]).keys) == ["p50", "p90", "p99", "max"])
            let decoded = try JSONDecoder().decode(MockStats.self, from: Data(HTTP.get(server.port, "/_mock/stats").body))
            #expect(decoded == server.stats())
        }
    }

    // SPEC X1: /_mock/logs gives the unique logs in arrival order, as JSON lines with received_at.
    @Test func logsEndpointGivesUniqueLogsInArrivalOrder() throws {
        try withServer { (server: MockServer) throws in
            let first = Wire.events(2, name: "first")
            let second = Wire.events(2, name: "second")
            try Wire.post(server.port, first)
            try Wire.post(server.port, second + [first[0]])
            let lines = try HTTP.get(server.port, "/_mock/logs").jsonLines
            #expect(lines.map { $0["id"] as? String } == (first + second).map { $0["id"] as? String })
            #expect(lines.map { $0["name"] as? String } == ["first", "first", "second", "second"])
            for line in lines {
                let receivedAt = try #require(line["received_at"] as? String)
                guard case .valid(let ms) = ISOTimestamp.parse(receivedAt) else {
                    Issue.record("bad received_at \(receivedAt)")
                    continue
                }
                #expect(abs(Double(ms) / 1000 - Date().timeIntervalSince1970) < 10)
                #expect(line["device"] is [String: Any])
            }
        }
    }

    // SPEC X1: /_mock/requests has one line per request: at, install, logs, status or action, duration_ms.
    @Test func requestsEndpointListsEveryRequest() throws {
        try withServer { (server: MockServer) throws in
            try Wire.post(server.port, Wire.events(3))
            try Wire.post(server.port, Wire.events(2), install: Wire.otherInstall)
            _ = try TestConnection(port: server.port).request("POST", Wire.logsPath,
                                                              headers: Wire.headers(secret: nil),
                                                              body: Wire.body(Wire.events(1)))
            let lines = try requestLines(server.port)
            #expect(lines.count == 3)
            #expect(lines.map { $0["status"] as? Int } == [200, 200, 401])
            #expect(lines.map { $0["logs"] as? Int } == [3, 2, 1])
            #expect(lines.map { $0["install"] as? String } == [Wire.install, Wire.otherInstall, Wire.install])
            for line in lines {
                #expect(Set(line.keys) == ["at", "install", "logs", "status", "duration_ms"])
                #expect((line["duration_ms"] as? Double ?? -1) >= 0)
            }
            let ats = lines.compactMap { $0["at"] as? Int }
            #expect(ats == ats.sorted())
            // Control requests are not counted.
            #expect(server.stats().requests == 3)
        }
    }

    // SPEC M7: logs that arrive after 04:00 of the next day are late; delays have percentiles.
    @Test func lateLogsAndDelayPercentiles() throws {
        try withServer { (server: MockServer) throws in
            let now = Date()
            let fresh = (0..<8).map { i in Wire.event(timestamp: Wire.timestamp(now.addingTimeInterval(-Double(i)))) }
            let old = [Wire.event(timestamp: Wire.timestamp(now.addingTimeInterval(-2 * 86_400))),
                       Wire.event(timestamp: Wire.timestamp(now.addingTimeInterval(-3 * 86_400)))]
            try Wire.post(server.port, fresh + old)
            let stats = server.stats()
            #expect(stats.lateLogs == 2)
            #expect(stats.delayMs.p50 >= 3000 && stats.delayMs.p50 < 10_000)
            #expect(stats.delayMs.p90 >= 2 * 86_400_000 - 10_000 && stats.delayMs.p90 < 2 * 86_400_000 + 10_000)
            #expect(stats.delayMs.max >= 3 * 86_400_000 - 10_000)
            let histogram = try JSONDecoder().decode(DelayHistogram.self,
                                                     from: Data(HTTP.get(server.port, "/_mock/histogram").body))
            #expect(histogram.buckets.reduce(0) { $0 + $1.count } == 10)
            #expect(histogram.buckets.last?.count == 2)
        }
    }

    // SPEC M7: the cutoff is 04:00 of the next day in the report time zone, DST included.
    @Test func reportingCutoffFollowsTheTimeZone() throws {
        func ms(_ s: String) throws -> Int64 {
            guard case .valid(let v) = ISOTimestamp.parse(s) else { throw ClientError.malformed(s) }
            return v
        }
        var utc = ReportingCutoff(timeZone: try #require(TimeZone(identifier: "UTC")))
        #expect(try utc.cutoff(forTimestamp: ms("2026-11-22T23:59:59.999Z")) == ms("2026-11-23T04:00:00.000Z"))
        var paris = ReportingCutoff(timeZone: try #require(TimeZone(identifier: "Europe/Paris")))
        // 23:30 UTC on the 22nd is already the 23rd in Paris (UTC+1): cutoff 04:00 Paris on the 24th.
        #expect(try paris.cutoff(forTimestamp: ms("2026-11-22T23:30:00.000Z")) == ms("2026-11-24T03:00:00.000Z"))
        // Summer time (UTC+2).
        #expect(try paris.cutoff(forTimestamp: ms("2026-07-01T12:00:00.000Z")) == ms("2026-07-02T02:00:00.000Z"))
        // The night summer time ends (25 October 2026): the cutoff is 04:00 CET = 03:00 UTC.
        #expect(try paris.cutoff(forTimestamp: ms("2026-10-24T12:00:00.000Z")) == ms("2026-10-25T03:00:00.000Z"))
        // UTC+5:45: 18:14 UTC is 23:59 on the 22nd, 18:16 UTC is 00:01 on the 23rd.
        var kathmandu = ReportingCutoff(timeZone: try #require(TimeZone(identifier: "Asia/Kathmandu")))
        #expect(try kathmandu.cutoff(forTimestamp: ms("2026-11-22T18:14:00.000Z")) == ms("2026-11-22T22:15:00.000Z"))
        #expect(try kathmandu.cutoff(forTimestamp: ms("2026-11-22T18:16:00.000Z")) == ms("2026-11-23T22:15:00.000Z"))
    }

    // SPEC M7: --report-timezone changes which logs are late.
    @Test func reportTimeZoneDecidesLateness() throws {
        // Two fixed-offset zones far apart: find a timestamp that is late in one and not in the other.
        let day: Int64 = 86_400_000, hour: Int64 = 3_600_000
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        // Late or not, or nil when `now` is within a minute of the cutoff: the server decides a little later, so
        // such a stamp could go either way.
        func late(_ t: Int64, offsetHours: Int64) -> Bool? {
            let o = offsetHours * hour
            let localDayStart = ISOTimestamp.floorDivMod(t + o, day).0 * day
            let cutoff = localDayStart + day + 4 * hour - o
            if now - 60_000 > cutoff { return true }
            if now + 60_000 < cutoff { return false }
            return nil
        }
        // Cutoffs fall on whole hours: around 14:00 and 16:00 UTC no stamp tells UTC+14 from UTC-12 by more than
        // the margin, so a second pair (cutoffs at 18:00 and 12:00 UTC) covers those minutes. (With one pair and
        // whole hours 20–60 h back, this test failed whenever it ran between 16:00 and 06:00 UTC.)
        var chosen: (stamp: Int64, east: Int64, west: Int64)?
        search: for (east, west) in [(Int64(14), Int64(-12)), (10, -8)] {
            for step in Int64(12)...(60 * 12) {
                let stamp = now - step * hour / 12
                if let e = late(stamp, offsetHours: east), let w = late(stamp, offsetHours: west), e != w {
                    chosen = (stamp, east, west)
                    break search
                }
            }
        }
        let (stamp, east, west) = try #require(chosen)
        func lateLogs(in zone: String) throws -> Int {
            let tz = try #require(TimeZone(identifier: zone))
            return try withServer(.init(reportTimeZone: tz, threads: 2)) { (server: MockServer) throws in
                try Wire.post(server.port, [Wire.event(timestamp: ISOTimestamp.format(epochMs: stamp))])
                return server.stats().lateLogs
            }
        }
        // Etc/GMT-N is UTC+N (POSIX signs).
        #expect(try lateLogs(in: "Etc/GMT-\(east)") == (late(stamp, offsetHours: east) == true ? 1 : 0))
        #expect(try lateLogs(in: "Etc/GMT+\(-west)") == (late(stamp, offsetHours: west) == true ? 1 : 0))
    }

    // SPEC X1: max_in_flight is the most requests handled at once.
    @Test func maxInFlightCountsConcurrentRequests() throws {
        try withServer(scenario: #"{"rules":[{"respond":{"delay_ms":300}}]}"#) { (server: MockServer) throws in
            let seen = concurrently(4) { _ in (try? Wire.post(server.port, Wire.events(1)).status) ?? -1 }
            #expect(seen == [200, 200, 200, 200])
            #expect(server.stats().maxInFlight == 4)
            #expect(server.stats().logsUnique == 4)
        }
    }

    // SPEC M6, W1: one write per response and TCP_NODELAY — keep-alive requests do not stall ~40 ms each.
    @Test func keepAliveRequestsDoNotStall() throws {
        try withServer { (server: MockServer) throws in
            let conn = try TestConnection(port: server.port)
            let start = Date()
            for _ in 0..<200 {
                #expect(try Wire.post(server.port, Wire.events(1), on: conn).status == 200)
            }
            // 200 × 40 ms would be 8 s; a healthy loopback round trip is well under 1 ms.
            #expect(Date().timeIntervalSince(start) < 4)
            #expect(server.stats().requests == 200)
        }
    }

    // SPEC W1: curl sends Expect: 100-continue with larger bodies.
    @Test func expectContinueIsHonoured() throws {
        try withServer { (server: MockServer) throws in
            let conn = try TestConnection(port: server.port)
            let body = Wire.body(Wire.events(5))
            var head = "POST \(Wire.logsPath) HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: \(body.count)\r\n"
            for (n, v) in Wire.headers() { head += "\(n): \(v)\r\n" }
            try conn.sendRaw(Array((head + "\r\n").utf8))
            // The interim answer arrives before the body is sent.
            var first = [UInt8](repeating: 0, count: 25)
            let got = try conn.readInterim(into: &first)
            #expect(String(decoding: first[0..<got], as: UTF8.self) == "HTTP/1.1 100 Continue\r\n\r\n")
            try conn.sendRaw(body)
            #expect(try conn.readResponse().status == 200)
        }
    }

    // SPEC M1: a too-large body announced with Expect: 100-continue is refused before it is sent.
    @Test func expectContinueWithTooLargeBodyGets413AtOnce() throws {
        try withServer(.init(bodyLimit: 1000, threads: 2)) { (server: MockServer) throws in
            let conn = try TestConnection(port: server.port)
            var head = "POST \(Wire.logsPath) HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n"
            for (n, v) in Wire.headers() { head += "\(n): \(v)\r\n" }
            try conn.sendRaw(Array((head + "\r\n").utf8))
            let response = try conn.readResponse()
            #expect(response.status == 413)
            #expect(response.header("Connection") == "close")
            #expect(server.stats().statusCounts == ["413": 1])
        }
    }

    // SPEC M4: the control API — scenario get/put, reset, unknown endpoints.
    @Test func controlAPI() throws {
        try withServer { (server: MockServer) throws in
            let port = server.port
            try Wire.post(port, Wire.events(2))
            let put = try HTTP.send(port, "PUT", "/_mock/scenario",
                                    body: #"{"seed":7,"rules":[{"match":{"requests":"2-"},"respond":{"status":503}}]}"#)
            #expect(put.status == 200)
            let current = try HTTP.get(port, "/_mock/scenario").json
            #expect(current["seed"] as? Int == 7)
            // Swapping keeps the request numbers: this is request 2.
            #expect(try Wire.post(port, Wire.events(1)).status == 503)
            let badPut = try HTTP.send(port, "PUT", "/_mock/scenario", body: #"{"rules":[{"mach":{}}]}"#)
            #expect(badPut.status == 400)
            #expect((badPut.json["reason"] as? String)?.contains(#"unknown key "mach""#) == true)
            #expect(try HTTP.send(port, "POST", "/_mock/reset").status == 200)
            let stats = try statsJSON(port)
            #expect(stats["requests"] as? Int == 0)
            #expect(stats["logs_unique"] as? Int == 0)
            #expect(try requestLines(port).isEmpty)
            #expect(try HTTP.get(port, "/_mock/logs").body.isEmpty)
            // Reset restarts the request numbers: request 1 passes again.
            #expect(try Wire.post(port, Wire.events(1)).status == 200)
            #expect(try HTTP.get(port, "/_mock/nothing").status == 404)
            #expect(try HTTP.send(port, "DELETE", "/_mock/stats").status == 405)
            #expect(try HTTP.send(port, "GET", "/_mock/reset").status == 405)
        }
    }

    // SPEC M4: the live page is served, self-contained, and polls /_mock/stats.
    @Test func livePageIsSelfContained() throws {
        try withServer { (server: MockServer) throws in
            let page = try HTTP.get(server.port, "/_mock/")
            #expect(page.status == 200)
            #expect(page.header("Content-Type")?.hasPrefix("text/html") == true)
            #expect(page.text.contains("/_mock/stats"))
            #expect(page.text.contains("/_mock/histogram"))
            #expect(!page.text.contains("http://") && !page.text.contains("https://"))
            #expect(!page.text.contains("src="))
            #expect(try HTTP.get(server.port, "/_mock").status == 200)
            #expect(server.stats().requests == 0)
        }
    }

    // SPEC X1: start and stop are safe to misuse: a busy port is a named error, stop is idempotent.
    @Test func lifecycleErrorsAreNamed() throws {
        try withServer { (server: MockServer) throws in
            let clash = try MockServer(configuration: .init(port: server.port, threads: 1))
            #expect(throws: MockServerError.self) { try clash.start() }
            try clash.stop()
            #expect(throws: MockServerError.alreadyStarted) { try server.start() }
        }
        let server = try MockServer(configuration: .init(threads: 1))
        try server.start()
        try server.stop()
        try server.stop()
        #expect(throws: MockServerError.alreadyStarted) { try server.start() }
        #expect(throws: MockServerError.self) { try MockServer(configuration: .init(bodyLimit: 0)) }
    }

    // SPEC M1: a request that is not HTTP gets 400 and the connection is closed.
    @Test func garbageGets400() throws {
        try withServer { (server: MockServer) throws in
            let conn = try TestConnection(port: server.port)
            try conn.sendRaw(Array("HELLO THERE\r\n\r\n".utf8))
            #expect(try conn.readResponse().status == 400)
        }
    }
}
