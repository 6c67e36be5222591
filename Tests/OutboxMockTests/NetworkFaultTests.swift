import Foundation
import Testing
@testable import OutboxMock

#if canImport(Glibc)
import Glibc
#endif

/// SPEC M8's proxy faults on the wire: a real POSIX client socket against the real mock on loopback, checking
/// which bytes arrive and when. The exact timings are proven on the mock's own timers in
/// `ConnectionHandlerTests`; here real delays stay in tens of milliseconds and only lower bounds are asserted.
@Suite("Network faults on the wire (SPEC M8)")
struct NetworkFaultTests {
    // SPEC M8 drop_before_body: the connection closes after the head, before any body byte was sent, with no
    // answer; nothing is recorded, and the fault is counted.
    @Test func dropBeforeBodyClosesAfterTheHead() throws {
        let scenario = #"{"rules":[{"match":{"requests":"1"},"action":"drop_before_body"}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let body = Wire.body(Wire.events(2))
            let connection = try TestConnection(port: server.port)
            try connection.sendRaw(head(bodyLength: body.count))
            // The body is never sent: the close can only come from the head.
            let (bytes, end) = readToEnd(connection)
            #expect(bytes.isEmpty)
            #expect(end == .closed)
            // Sending the body now fails or goes nowhere; the next request is handled normally.
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)
            let stats = server.stats()
            #expect(stats.faults == ["drop_before_body": 1])
            #expect(stats.logsReceived == 1)
            #expect(stats.requests == 2)
            let actions = try requestLines(server.port).map { $0["action"] as? String ?? "-" }
            #expect(actions == ["drop_before_body", "-"])
        }
    }

    // SPEC M8 latency_ms/jitter_ms: the answer waits at least latency − jitter.
    @Test func latencyDelaysTheAnswer() throws {
        let scenario = #"{"seed":7,"rules":[{"network":{"latency_ms":60,"jitter_ms":20}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let start = Date()
            let response = try Wire.post(server.port, Wire.events(2))
            #expect(Date().timeIntervalSince(start) >= 0.040)
            #expect(response.status == 200)
            let stats = server.stats()
            #expect(stats.logsUnique == 2)
            // A network object alone shapes the normal answer: counted as latency, not as a respond fault.
            #expect(stats.faults == ["latency": 1])
        }
    }

    // SPEC M8 kbps: the request is read and the answer written at the rate (1 kbps = 1000 bit/s).
    @Test func bandwidthPacesTheRequestAndTheAnswer() throws {
        let answer = String(repeating: "a", count: 400)
        let scenario = #"{"rules":[{"respond":{"status":200,"body":"\#(answer)"},"network":{"kbps":100}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let body = Wire.body(Wire.events(3))
            let start = Date()
            let response = try Wire.post(server.port, Wire.events(3))
            let elapsed = Date().timeIntervalSince(start)
            // body bits / 100 000 bit/s for the request, plus 400 bytes of answer body at the same rate.
            let floor = Double(body.count + answer.utf8.count) * 8 / 100_000
            #expect(elapsed >= floor)
            #expect(response.status == 200)
            #expect(response.text == answer)
            #expect(server.stats().faults == ["respond": 1, "bandwidth": 1])
        }
    }

    // SPEC M8 slice_bytes/slice_delay_ms: the answer arrives in pieces of that size, that far apart.
    @Test func slicesArriveInPieces() throws {
        let scenario = #"{"rules":[{"network":{"slice_bytes":40,"slice_delay_ms":40}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let connection = try TestConnection(port: server.port)
            let body = Wire.body(Wire.events(1))
            let start = Date()
            try connection.sendRaw(head(bodyLength: body.count) + body)
            let first = recvOnce(connection)
            // The first piece is all there is until the next one is due.
            #expect(first.count == 40)
            #expect(String(decoding: first, as: UTF8.self).hasPrefix("HTTP/1.1 200 OK\r\n"))
            var all = first
            var pieces = 1
            while !answerIsComplete(all) {
                let more = recvOnce(connection)
                guard !more.isEmpty else { break }
                all += more
                pieces += 1
            }
            let elapsed = Date().timeIntervalSince(start)
            let expectedPieces = (all.count + 39) / 40
            #expect(elapsed >= Double(expectedPieces - 1) * 0.040)
            #expect(pieces >= 2)
            #expect(HTTPBytes.responses(in: all).first?.status == 200)
            #expect(server.stats().faults == ["slice": 1])
        }
    }

    // SPEC M8 limit_bytes: exactly that many bytes of the answer, then the connection closes. The logs were
    // recorded (the server answered 200), so the client's retry is a duplicate.
    @Test func limitBytesCutsTheAnswer() throws {
        let scenario = #"{"rules":[{"match":{"requests":"1"},"network":{"limit_bytes":12}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let logs = Wire.events(2)
            let body = Wire.body(logs)
            let connection = try TestConnection(port: server.port)
            try connection.sendRaw(head(bodyLength: body.count) + body)
            let (bytes, end) = readToEnd(connection)
            #expect(String(decoding: bytes, as: UTF8.self) == "HTTP/1.1 200")
            #expect(end == .closed)
            #expect(outcome { try Wire.post(server.port, logs) } == "200")
            let stats = server.stats()
            #expect(stats.logsUnique == 2)
            #expect(stats.logsDuplicate == 2)
            #expect(stats.faults == ["limit_bytes": 1])
        }
    }

    // SPEC M8 slow_close_ms: the whole answer (with `Connection: close`), then the connection stays open that
    // long before the server closes it.
    @Test func slowCloseHoldsTheConnection() throws {
        let scenario = #"{"rules":[{"network":{"slow_close_ms":80}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let connection = try TestConnection(port: server.port)
            let response = try Wire.post(server.port, Wire.events(1), on: connection)
            let answered = Date()
            #expect(response.status == 200)
            #expect(response.header("Connection") == "close")
            let (bytes, end) = readToEnd(connection)
            #expect(bytes.isEmpty)
            #expect(end == .closed)
            #expect(Date().timeIntervalSince(answered) >= 0.070)
            #expect(server.stats().faults == ["slow_close": 1])
        }
    }

    // SPEC M8, M1: the strictness is what the client sees — 400 with the reason, for an unknown key and for a
    // legacy `properties` map over T3's 20 entries.
    @Test(arguments: [
        ("foo", "logs[0].foo: unknown key (not defined for event logs)"),
        ("properties", "logs[0].properties: more than 20 properties"),
    ])
    func strictValidationAnswers400(_ key: String, _ reason: String) throws {
        try withServer { (server: MockServer) throws in
            var log = Wire.event()
            log[key] = key == "foo" ? "bar" as Any : Dictionary(uniqueKeysWithValues: (0..<21).map { ("k\($0)", "v") })
            let response = try Wire.post(server.port, [log])
            #expect(response.status == 400)
            #expect(response.json["reason"] as? String == reason)
            #expect(server.stats().logsReceived == 0)
        }
    }

    // MARK: - Helpers

    private func head(bodyLength: Int) -> [UInt8] {
        var text = "POST \(Wire.logsPath) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in Wire.headers() { text += "\(name): \(value)\r\n" }
        text += "Content-Length: \(bodyLength)\r\n\r\n"
        return Array(text.utf8)
    }

    enum End: Equatable { case closed, reset, timeout }

    /// Reads until the server closes (or resets, or the socket's 5 s timeout passes).
    private func readToEnd(_ connection: TestConnection) -> ([UInt8], End) {
        var all: [UInt8] = []
        while true {
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { recv(connection.fdForTests, $0.baseAddress, $0.count, 0) }
            if n > 0 { all += chunk[0..<n]; continue }
            if n == 0 { return (all, .closed) }
            return (all, errno == ECONNRESET ? .reset : .timeout)
        }
    }

    /// One recv(): what has arrived so far (blocks until something does).
    private func recvOnce(_ connection: TestConnection) -> [UInt8] {
        var chunk = [UInt8](repeating: 0, count: 4096)
        let n = chunk.withUnsafeMutableBytes { recv(connection.fdForTests, $0.baseAddress, $0.count, 0) }
        return n > 0 ? Array(chunk[0..<n]) : []
    }

    private func answerIsComplete(_ bytes: [UInt8]) -> Bool { !HTTPBytes.responses(in: bytes).isEmpty }
}

/// SPEC M8: the `network` object and `drop_before_body` are decoded strictly, with errors that name the key.
@Suite("Network fault scenarios (SPEC M8)")
struct NetworkScenarioDecodingTests {
    private func error(_ json: String) -> String? {
        do {
            _ = try Scenario.decode(from: Data(json.utf8))
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func everyKeyDecodes() throws {
        let json = #"{"rules":[{"respond":{"status":503},"network":{"latency_ms":800,"jitter_ms":100,"kbps":64,"#
            + #""slice_bytes":1,"slice_delay_ms":20,"limit_bytes":10,"slow_close_ms":500}},"#
            + #"{"action":"drop_before_body"}]}"#
        let scenario = try Scenario.decode(from: Data(json.utf8))
        #expect(scenario.rules[0].network == Scenario.Network(latencyMs: 800, jitterMs: 100, kbps: 64, sliceBytes: 1,
                                                              sliceDelayMs: 20, limitBytes: 10, slowCloseMs: 500))
        #expect(scenario.rules[1].outcome == .dropBeforeBody)
        // What GET /_mock/scenario shows decodes to the same scenario.
        #expect(try Scenario.decode(from: scenario.jsonData()) == scenario)
    }

    @Test(arguments: [
        (#"{"network":{"latency":5}}"#, #"rules[0].network.latency: unknown key "latency""#),
        (#"{"network":{"latency_ms":"5"}}"#, "rules[0].network.latency_ms: must be an integer ≥ 0"),
        (#"{"network":{"latency_ms":-1}}"#, "rules[0].network.latency_ms: must be an integer ≥ 0"),
        (#"{"network":{"kbps":0}}"#, "rules[0].network.kbps: must be a number > 0"),
        (#"{"network":{}}"#, "rules[0]: network: needs at least one of"),
        (#"{"network":{"jitter_ms":5}}"#, "rules[0]: network.jitter_ms needs latency_ms"),
        (#"{"network":{"slice_delay_ms":5}}"#, "rules[0]: network.slice_delay_ms needs slice_bytes"),
        (#"{"network":{"slice_bytes":0}}"#, "rules[0]: network.slice_bytes must be ≥ 1"),
        (#"{"action":"reset","network":{"latency_ms":5}}"#, #"rules[0]: network combines with respond"#),
        (#"{"match":{"log_name":"x"},"action":"drop_before_body"}"#, "rules[0]: drop_before_body is decided when"),
        (#"{"match":{"min_logs":2},"network":{"kbps":8}}"#, "rules[0]: network.kbps is decided when"),
    ])
    func badNetworkIsRefusedByName(_ rule: String, _ message: String) {
        let got = error(#"{"rules":[\#(rule)]}"#) ?? "accepted"
        #expect(got.contains(message), "\(got)")
    }

    // SPEC M8: a head rule after a rule that needs the body could never be decided in time.
    @Test func dropBeforeBodyCannotFollowABodyRule() {
        let json = #"{"rules":[{"match":{"log_name":"poison"},"respond":{"status":400}},{"action":"drop_before_body"}]}"#
        let got = error(json) ?? "accepted"
        #expect(got.contains("rules[1]: drop_before_body is decided when the request head arrives: it cannot follow rules[0]"),
                "\(got)")
    }

    // SPEC M8: jitter is drawn from the scenario's seeded source — a seed repeats its latencies, within bounds.
    @Test func jitterIsSeeded() {
        let network = Scenario.Network(latencyMs: 100, jitterMs: 30)
        func draws(_ seed: UInt64) -> [Int] {
            var engine = ScenarioEngine(scenario: Scenario(seed: seed))
            return (0..<50).map { _ in engine.latencyMs(network) }
        }
        #expect(draws(42) == draws(42))
        #expect(draws(42) != draws(43))
        #expect(draws(42).allSatisfy { (70...130).contains($0) })
        #expect(Set(draws(42)).count > 10)
    }
}
