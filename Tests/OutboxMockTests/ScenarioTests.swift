import Foundation
import Testing
import OutboxTestSupport
@testable import OutboxMock

/// Every action and match key of SPEC X2, driven by a real client over loopback, checking what the client
/// saw and what /_mock/stats and /_mock/requests say.
@Suite("Scenarios (SPEC M3, X2)")
struct ScenarioTests {
    // SPEC X2 respond: status, headers and body as given; 429 with Retry-After.
    @Test func respondWithStatusHeadersAndBody() throws {
        let scenario = #"{"rules":[{"respond":{"status":429,"headers":{"Retry-After":"2","X-Test":"yes"},"body":"slow down"}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let response = try Wire.post(server.port, Wire.events(2))
            #expect(response.status == 429)
            #expect(response.header("Retry-After") == "2")
            #expect(response.header("X-Test") == "yes")
            #expect(response.text == "slow down")
            #expect(response.header("Date") != nil)
            let stats = try statsJSON(server.port)
            #expect(stats["faults"] as? [String: Int] == ["respond": 1])
            #expect(stats["status_counts"] as? [String: Int] == ["429": 1])
            // A non-2xx answer records nothing: the client will send these logs again.
            #expect(stats["logs_received"] as? Int == 0)
            #expect(try requestLines(server.port).first?["status"] as? Int == 429)
        }
    }

    // SPEC X2 respond: delay_ms delays the answer; without a status the request is handled normally.
    @Test func respondWithDelayOnly() throws {
        try withServer(scenario: #"{"rules":[{"respond":{"delay_ms":250}}]}"#) { (server: MockServer) throws in
            let start = Date()
            let response = try Wire.post(server.port, Wire.events(3))
            #expect(Date().timeIntervalSince(start) >= 0.25)
            #expect(response.status == 200)
            #expect(response.text == #"{"status":"Success"}"#)
            #expect(server.stats().logsUnique == 3)
            let line = try #require(try requestLines(server.port).first)
            #expect((line["duration_ms"] as? Double ?? 0) >= 250)
        }
    }

    // SPEC X2 respond: a scenario 2xx on a valid batch records it.
    @Test func respondWith202RecordsTheLogs() throws {
        try withServer(scenario: #"{"rules":[{"respond":{"status":202}}]}"#) { (server: MockServer) throws in
            let response = try Wire.post(server.port, Wire.events(2))
            #expect(response.status == 202)
            #expect(response.text == #"{"status":"Success"}"#)
            #expect(server.stats().logsUnique == 2)
        }
    }

    // SPEC M3, X2 refuse: the port refuses connections for the window, then the same port accepts again.
    @Test func refuseClosesThePortForItsDuration() throws {
        let scenario = #"{"rules":[{"match":{"requests":"2"},"action":"refuse","duration_s":0.6}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let port = server.port
            let idle = try TestConnection(port: port)
            #expect(try Wire.post(port, Wire.events(1), on: idle).status == 200)
            let start = Date()
            #expect(outcome { try Wire.post(port, Wire.events(1)) } == "closed")
            // Down: new connections are refused, and open ones were closed.
            #expect(outcome { try Wire.post(port, Wire.events(1)) } == "refused")
            #expect(["closed", "reset"].contains(outcome { try Wire.post(port, Wire.events(1), on: idle) }))
            // Up again on the same port once the window has passed.
            #expect(eventually { (try? TestConnection(port: port)) != nil })
            #expect(Date().timeIntervalSince(start) >= 0.5)
            #expect(server.port == port)
            #expect(try Wire.post(port, Wire.events(1)).status == 200)
            let stats = try statsJSON(port)
            #expect(stats["faults"] as? [String: Int] == ["refuse": 1])
            #expect(stats["requests"] as? Int == 3)
            let actions = try requestLines(port).map { ($0["action"] as? String) ?? String($0["status"] as? Int ?? 0) }
            #expect(actions == ["200", "refuse", "200"])
        }
    }

    // SPEC M3, X2 refuse: without duration_s, a request-triggered outage lasts until the rule's until_s.
    @Test func refuseLastsUntilTheWindowEnds() throws {
        let scenario = #"{"rules":[{"match":{"requests":"2-","until_s":0.7},"action":"refuse"}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let port = server.port
            let start = Date()
            #expect(try Wire.post(port, Wire.events(1)).status == 200)
            #expect(outcome { try Wire.post(port, Wire.events(1)) } == "closed")
            #expect(throws: ClientError.refused) { try TestConnection(port: port) }
            #expect(eventually { (try? TestConnection(port: port)) != nil })
            #expect(Date().timeIntervalSince(start) >= 0.6)
            // After until_s the rule no longer matches.
            #expect(try Wire.post(port, Wire.events(1)).status == 200)
            #expect(server.stats().faults == ["refuse": 1])
        }
    }

    // SPEC M3, X2 refuse + after_s/until_s: a pure time window takes the port down on a timer, even with
    // no request in it, and a reset restarts the window. Real time (the port's timers run on the event loop):
    // the window opens 1 s after start, so that the first request lands before it on a loaded machine.
    @Test func refuseTimeWindowIsScheduled() throws {
        let scenario = #"{"rules":[{"match":{"after_s":1,"until_s":2},"action":"refuse"}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let port = server.port
            #expect(try Wire.post(port, Wire.events(1)).status == 200)
            #expect(eventually(timeout: 10) { outcome { try TestConnection(port: port).request("GET", "/_mock/stats") } == "refused" })
            #expect(eventually(timeout: 10) { (try? TestConnection(port: port)) != nil })
            #expect(try Wire.post(port, Wire.events(1)).status == 200)
            // In-process reset restarts the scenario clock: the window comes again.
            server.reset()
            #expect(eventually(timeout: 10) { outcome { try TestConnection(port: port).request("GET", "/_mock/stats") } == "refused" })
            #expect(eventually(timeout: 10) { (try? TestConnection(port: port)) != nil })
        }
    }

    // SPEC M3, X2 reset: a TCP reset instead of an answer; nothing is recorded.
    @Test func resetSendsATCPReset() throws {
        try withServer(scenario: #"{"rules":[{"match":{"requests":"1"},"action":"reset"}]}"#) { (server: MockServer) throws in
            #expect(outcome { try Wire.post(server.port, Wire.events(2)) } == "reset")
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)
            let stats = server.stats()
            #expect(stats.faults == ["reset": 1])
            #expect(stats.logsReceived == 1)
            #expect(try requestLines(server.port).first?["action"] as? String == "reset")
        }
    }

    // SPEC M3, X2 drop_after_body: the logs are recorded, the connection closes without an answer (lost ack).
    @Test func dropAfterBodyRecordsThenCloses() throws {
        try withServer(scenario: #"{"rules":[{"match":{"requests":"1"},"action":"drop_after_body"}]}"#) { (server: MockServer) throws in
            let logs = Wire.events(4)
            #expect(outcome { try Wire.post(server.port, logs) } == "closed")
            #expect(server.stats().logsUnique == 4)
            // The client re-sends; the server absorbs the duplicates.
            #expect(try Wire.post(server.port, logs).status == 200)
            let stats = try statsJSON(server.port)
            #expect(stats["logs_duplicate"] as? Int == 4)
            #expect(stats["faults"] as? [String: Int] == ["drop_after_body": 1])
            let lines = try requestLines(server.port)
            #expect(lines.first?["action"] as? String == "drop_after_body")
            #expect(lines.first?["logs"] as? Int == 4)
        }
    }

    // SPEC M3, X2 hang: no answer; the connection stays open until the client gives up.
    @Test func hangNeverAnswers() throws {
        try withServer(scenario: #"{"rules":[{"match":{"requests":"1"},"action":"hang"}]}"#) { (server: MockServer) throws in
            #expect(outcome { try Wire.post(server.port, Wire.events(1), timeout: 0.3) } == "timeout")
            #expect(server.stats().faults == ["hang": 1])
            #expect(server.stats().logsReceived == 0)
            #expect(try requestLines(server.port).first?["action"] as? String == "hang")
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)
        }
    }

    // SPEC M3, X2 malformed: bytes that are not an HTTP response.
    @Test func malformedAnswerIsNotHTTP() throws {
        try withServer(scenario: #"{"rules":[{"match":{"requests":"1"},"action":"malformed"}]}"#) { (server: MockServer) throws in
            #expect(outcome { try Wire.post(server.port, Wire.events(1)) } == "malformed")
            #expect(server.stats().faults == ["malformed": 1])
            #expect(try requestLines(server.port).first?["action"] as? String == "malformed")
        }
    }

    // SPEC X2 requests: "3", "1-5", "10-" and lists count ingestion requests since start, 1-based.
    @Test func requestsMatchByNumber() throws {
        let scenario = #"{"rules":[{"match":{"requests":"2"},"respond":{"status":500}},"#
            + #"{"match":{"requests":"4-5"},"respond":{"status":502}},"#
            + #"{"match":{"requests":"8-"},"respond":{"status":504}},"#
            + #"{"match":{"requests":"1,7"},"respond":{"status":201}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let conn = try TestConnection(port: server.port)
            var statuses: [Int] = []
            for _ in 1...9 {
                _ = try HTTP.get(server.port, "/_mock/stats")  // control requests do not count
                statuses.append(try Wire.post(server.port, Wire.events(1), on: conn).status)
            }
            #expect(statuses == [201, 500, 200, 502, 502, 200, 201, 504, 504])
            #expect(server.stats().faults == ["respond": 7])
        }
    }

    // SPEC X2 after_s / until_s: time windows since start or reset, on the server's (injected) clock: no sleeping.
    @Test func timeWindowMatches() throws {
        let scenario = #"{"rules":[{"match":{"after_s":0.4,"until_s":0.8},"respond":{"status":503}}]}"#
        let clock = ManualMockClock()
        let configuration = MockServer.Configuration(scenario: try Scenario.decode(from: Data(scenario.utf8)),
                                                     threads: 2, clock: clock)
        try withServer(configuration) { (server: MockServer) throws in
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)
            clock.advance(seconds: 0.399)
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)   // not yet after_s
            clock.advance(seconds: 0.101)
            #expect(try Wire.post(server.port, Wire.events(1)).status == 503)
            clock.advance(seconds: 0.3)
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)   // until_s is exclusive
            clock.advance(seconds: 3600)
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)
            server.reset()
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)
            clock.advance(seconds: 0.5)
            #expect(try Wire.post(server.port, Wire.events(1)).status == 503)
            #expect(try requestLines(server.port).map { $0["at"] as? Int } == [0, 500])
        }
    }

    // SPEC F9: the scenario clock alone restarts (the fleet's first event): after_s counts from there, and what was
    // recorded before — counts, logs, request numbers — stays.
    @Test func restartingTheScenarioClockKeepsWhatWasRecorded() throws {
        let scenario = #"{"rules":[{"match":{"after_s":0.4,"until_s":0.8},"respond":{"status":503}}]}"#
        let clock = ManualMockClock()
        let configuration = MockServer.Configuration(scenario: try Scenario.decode(from: Data(scenario.utf8)),
                                                     threads: 2, clock: clock)
        try withServer(configuration) { (server: MockServer) throws in
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)
            clock.advance(seconds: 0.5)
            server.restartScenarioClock()
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)   // 0 s on the restarted clock
            clock.advance(seconds: 0.4)
            #expect(try Wire.post(server.port, Wire.events(1)).status == 503)
            #expect(server.stats().requests == 3)
            #expect(server.stats().logsUnique == 2)
            #expect(try requestLines(server.port).map { $0["at"] as? Int } == [0, 0, 400])
        }
    }

    // SPEC X2 clock_skew_s, M7: received_at and the Date header are the injected wall clock plus the skew.
    @Test func receivedAtAndTheDateHeaderFollowTheInjectedClock() throws {
        let clock = ManualMockClock(wallMs: 1_795_332_826_000)   // 2026-11-22T07:33:46Z
        let configuration = MockServer.Configuration(scenario: Scenario(clockSkewSeconds: -3600), threads: 2, clock: clock)
        try withServer(configuration) { (server: MockServer) throws in
            clock.advance(seconds: 2.5)
            let response = try Wire.post(server.port, Wire.events(1))
            #expect(response.status == 200)
            #expect(response.header("Date") == "Sun, 22 Nov 2026 06:33:48 GMT")
            #expect(server.uniqueLogs().map(\.receivedAtMs) == [1_795_332_828_500 - 3_600_000])
        }
    }

    // SPEC X2 probability: seeded, so two servers with the same seed make the same choices.
    @Test func probabilityIsSeeded() throws {
        func run(seed: Int) throws -> [Int] {
            try withServer(scenario: #"{"seed":\#(seed),"rules":[{"match":{"probability":0.3},"respond":{"status":503}}]}"#) { (server: MockServer) throws in
                let conn = try TestConnection(port: server.port)
                return try (0..<200).map { _ in try Wire.post(server.port, Wire.events(1), on: conn).status }
            }
        }
        let a = try run(seed: 42)
        let b = try run(seed: 42)
        let c = try run(seed: 43)
        #expect(a == b)
        #expect(a != c)
        let failures = a.filter { $0 == 503 }.count
        #expect(failures > 35 && failures < 85, "about 30 % of 200")
    }

    // SPEC X2 install: a rule for one install id only.
    @Test func installMatches() throws {
        let scenario = #"{"rules":[{"match":{"install":"\#(Wire.otherInstall.uppercased())"},"respond":{"status":403}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)
            #expect(try Wire.post(server.port, Wire.events(1), install: Wire.otherInstall).status == 403)
            #expect(server.stats().installs.keys.sorted() == [Wire.install])
        }
    }

    // SPEC X2 path: a rule for one path (a trailing * matches a prefix).
    @Test func pathMatches() throws {
        let scenario = #"{"rules":[{"match":{"path":"/v1/*"},"respond":{"status":200,"body":"{\"status\":1}"}},"#
            + #"{"match":{"path":"/logs"},"respond":{"status":503}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let conn = try TestConnection(port: server.port)
            let other = try conn.request("POST", "/v1/batch", headers: Wire.headers(), body: Array("{}".utf8))
            #expect(other.status == 200)
            #expect(other.text == #"{"status":1}"#)
            #expect(try Wire.post(server.port, Wire.events(1), on: conn).status == 503)
            #expect(try conn.request("POST", "/elsewhere", headers: Wire.headers(), body: []).status == 404)
        }
    }

    // SPEC X2 log_name: a poison log is refused while batches without it pass.
    @Test func logNameMatches() throws {
        try withServer(.init(scenario: try Scenario.fixture("poison"), threads: 2)) { (server: MockServer) throws in
            #expect(try Wire.post(server.port, Wire.events(3)).status == 200)
            let poisoned = try Wire.post(server.port, Wire.events(2) + [Wire.event(name: "poison")])
            #expect(poisoned.status == 400)
            #expect(poisoned.json["reason"] as? String == "poison log in batch")
            #expect(server.stats().logsUnique == 3)
        }
    }

    // SPEC X2 min_logs: batches of at least N logs.
    @Test func minLogsMatches() throws {
        try withServer(.init(scenario: try Scenario.fixture("too-large"), threads: 2)) { (server: MockServer) throws in
            #expect(try Wire.post(server.port, Wire.events(10)).status == 200)
            #expect(try Wire.post(server.port, Wire.events(11)).status == 413)
            #expect(try Wire.post(server.port, Wire.events(11), gzip: true).status == 413)
            #expect(server.stats().logsUnique == 10)
        }
    }

    // SPEC X2: the first matching rule decides; no match answers 200.
    @Test func firstMatchingRuleDecides() throws {
        let scenario = #"{"rules":[{"match":{"min_logs":5},"respond":{"status":500}},"#
            + #"{"match":{"min_logs":2},"respond":{"status":502}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            #expect(try Wire.post(server.port, Wire.events(6)).status == 500)
            #expect(try Wire.post(server.port, Wire.events(3)).status == 502)
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)
        }
    }

    // SPEC M3, X2 clock_skew_s: the Date header (and received_at) use the skewed clock.
    @Test func clockSkewMovesTheDateHeader() throws {
        try withServer(.init(scenario: try Scenario.fixture("skewed-clock"), threads: 2)) { (server: MockServer) throws in
            let response = try Wire.post(server.port, Wire.events(1))
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
            let date = try #require(formatter.date(from: response.header("Date") ?? ""))
            #expect(abs(date.timeIntervalSinceNow - 3600) < 5)
            let log = try #require(server.uniqueLogs().first)
            #expect(abs(log.receivedAt.timeIntervalSinceNow - 3600) < 5)
            #expect(server.stats().delayMs.p50 > 3_590_000)
            // The control API's Date is skewed too.
            let control = try HTTP.get(server.port, "/_mock/stats")
            #expect(abs((formatter.date(from: control.header("Date") ?? "") ?? .distantPast).timeIntervalSinceNow - 3600) < 5)
        }
    }

    // SPEC M3: a scenario swapped while requests are running takes effect for the next requests,
    // and no request is lost or answered twice.
    @Test func scenarioSwappedWhileRequestsRun() throws {
        try withServer { (server: MockServer) throws in
            let port = server.port
            let statuses = concurrently(4) { _ -> [Int] in
                guard let conn = try? TestConnection(port: port) else { return [] }
                return (0..<150).map { _ in (try? Wire.post(port, Wire.events(2), on: conn).status) ?? -1 }
            }
            let swapper = concurrently(1) { _ in
                for i in 0..<20 {
                    let status = i % 2 == 0 ? 503 : 200
                    _ = try? HTTP.send(port, "PUT", "/_mock/scenario",
                                       body: #"{"rules":[{"respond":{"status":\#(status)}}]}"#)
                }
                return true
            }
            _ = swapper
            let all = statuses.flatMap { $0 }
            #expect(all.count == 600)
            #expect(Set(all).isSubset(of: [200, 503]))
            let stats = server.stats()
            #expect(stats.requests == 600)
            #expect(stats.statusCounts.values.reduce(0, +) == 600)
            #expect(stats.logsUnique == 2 * all.filter { $0 == 200 }.count)
            // After the swaps, the last scenario (200) holds.
            server.setScenario(try Scenario.decode(from: Data(#"{"rules":[{"respond":{"status":503}}]}"#.utf8)))
            #expect(try Wire.post(port, Wire.events(1)).status == 503)
        }
    }

    // SPEC M3: every fixture in Fixtures/scenarios loads.
    @Test func everyFixtureLoads() throws {
        let dir = try #require(MockServer.scenariosDirectory())
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".json") }.sorted()
        #expect(Set(files).isSuperset(of: ["ok.json", "flaky.json", "outage.json", "throttle.json", "lost-ack.json",
                                           "poison.json", "unauthorized.json", "too-large.json", "skewed-clock.json",
                                           "slow-network.json", "drop-before-body.json"]))
        for file in files {
            #expect(throws: Never.self) { try Scenario.load(path: dir + "/" + file) }
        }
        let outage = try Scenario.fixture("outage")
        #expect(ScenarioEngine(scenario: outage).scheduledOutages.map { $0.until - $0.from } == [10])
    }

    // SPEC M3: the fixtures do what their names say.
    @Test func fixturesBehave() throws {
        try withServer(.init(scenario: try Scenario.fixture("throttle"), threads: 2)) { (server: MockServer) throws in
            let statuses = try (0..<4).map { _ in try Wire.post(server.port, Wire.events(1)) }
            #expect(statuses.map(\.status) == [429, 429, 429, 200])
            #expect(statuses[0].header("Retry-After") == "2")
        }
        try withServer(.init(scenario: try Scenario.fixture("unauthorized"), threads: 2)) { (server: MockServer) throws in
            #expect(try Wire.post(server.port, Wire.events(1)).status == 401)
        }
        try withServer(.init(scenario: try Scenario.fixture("lost-ack"), threads: 2)) { (server: MockServer) throws in
            let logs = Wire.events(3)
            let seen = (0..<3).map { _ in outcome { try Wire.post(server.port, logs) } }
            #expect(seen == ["closed", "closed", "200"])
            #expect(server.stats().logsDuplicate == 6)
        }
        // SPEC M8: dropped before the body, so nothing was recorded and nothing is a duplicate.
        try withServer(.init(scenario: try Scenario.fixture("drop-before-body"), threads: 2)) { (server: MockServer) throws in
            let logs = Wire.events(3)
            let seen = (0..<4).map { _ in outcome { try Wire.post(server.port, logs) } }
            #expect(seen.prefix(3).allSatisfy { $0 == "closed" || $0 == "reset" })
            #expect(seen.last == "200")
            #expect(server.stats().logsDuplicate == 0)
            #expect(server.stats().logsUnique == 3)
        }
        try withServer(.init(scenario: try Scenario.fixture("flaky"), threads: 2)) { (server: MockServer) throws in
            let conn = try TestConnection(port: server.port)
            let statuses = try (0..<100).map { _ in try Wire.post(server.port, Wire.events(1), on: conn).status }
            #expect(Set(statuses) == [200, 503])
        }
    }

    // SPEC X2: scenario files are checked strictly.
    @Test(arguments: [
        (#"{"rules":[{"match":{"request":"1"},"respond":{"status":500}}]}"#, #"unknown key "request""#),
        (#"{"rules":[{"respond":{"status":500},"action":"reset"}]}"#, "exactly one of"),
        (#"{"rules":[{"match":{}}]}"#, "exactly one of"),
        (#"{"rules":[{"action":"explode"}]}"#, #"unknown action "explode""#),
        (#"{"rules":[{"action":"refuse"}]}"#, "refuse needs duration_s"),
        (#"{"rules":[{"match":{"probability":1.5},"action":"reset"}]}"#, "probability"),
        (#"{"rules":[{"match":{"requests":"5-2"},"action":"reset"}]}"#, "requests must look like"),
        (#"{"rules":[{"respond":{"status":99}}]}"#, "status must be"),
        (#"{"rules":[{"respond":{"status":200,"headers":{"X":"a\r\nb"}}}]}"#, "not a valid HTTP header"),
        (#"{"rules":[{"action":"hang","duration_s":3}]}"#, "duration_s only applies"),
        (#"{"seed":-1}"#, "seed"),
        ("not json", "not valid JSON at line 1, column 1"),
        // Strict, as docs/MOCK.md says: a trailing comma is named with its place, not accepted.
        ("{\"rules\": [\n  {\"action\": \"reset\"},\n]}", "not valid JSON at line 3, column 1"),
        ("{\"seed\": 1,}", "not valid JSON at line 1, column 12"),
        (#"{"rules":[{"match":{"requests":"1,,3"},"action":"reset"}]}"#, #"a list of those such as "1,4,7-9""#),
    ])
    func invalidScenariosAreRefused(_ json: String, _ expected: String) {
        do {
            _ = try Scenario.decode(from: Data(json.utf8))
            Issue.record("accepted \(json)")
        } catch {
            #expect("\(error)".contains(expected), "\(error)")
        }
    }
}

extension ScenarioTests {
    // A scenario or recording file that cannot be read says why (errno's text), not only which file.
    @Test func anUnreadableScenarioFileSaysWhy() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        do {
            _ = try Scenario.load(path: dir.file("missing.json"))
            Issue.record("a missing file was loaded")
        } catch {
            #expect("\(error)" == "cannot read scenario file \(dir.file("missing.json")): No such file or directory")
        }
        do {
            _ = try Scenario.load(path: dir.path)
            Issue.record("a directory was loaded")
        } catch {
            #expect("\(error)".contains("Is a directory"), "\(error)")
        }
        do {
            _ = try RecordedExchange.load(path: dir.file("missing.jsonl"))
            Issue.record("a missing recording was loaded")
        } catch {
            #expect("\(error)".contains("No such file or directory"), "\(error)")
        }
    }

    // A recording's broken line is named with its line and column.
    @Test func aMalformedRecordingLineIsNamedWithLineAndColumn() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let path = dir.file("replay.jsonl")
        try Data("{\"status\": 200,}\n".utf8).write(to: URL(fileURLWithPath: path))
        do {
            _ = try RecordedExchange.load(path: path)
            Issue.record("a malformed recording was loaded")
        } catch {
            #expect("\(error)".contains("line 1, column 16"), "\(error)")
        }
    }
}
