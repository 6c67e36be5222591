import Foundation
import OutboxTestSupport
import Testing
@testable import OutboxMock

@Suite("Record and replay (SPEC M5)")
struct RecordReplayTests {
    private func temporaryFile(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("outbox-mock-\(UUID().uuidString)-\(name)").path
    }

    /// The client's view of a sequence of requests, each on a new connection. Only the request that hangs gets
    /// a short timeout (it can only time out); the others have the default 5 s, so that a slow answer on a
    /// loaded machine is not mistaken for a hang.
    private func drive(_ port: Int, batches: [[[String: Any]]], hanging: Int) -> [String] {
        batches.indices.map { i in outcome { try Wire.post(port, batches[i], timeout: i == hanging ? 0.3 : 5) } }
    }

    // SPEC M5: --record writes each exchange; --replay answers with the recorded responses in order.
    @Test func replayReproducesARecording() throws {
        let recording = temporaryFile("exchanges.jsonl")
        defer { try? FileManager.default.removeItem(atPath: recording) }
        let scenario = try Scenario.decode(from: Data(#"""
            {"seed": 9, "rules": [
              {"match": {"requests": "2"}, "action": "reset"},
              {"match": {"requests": "3"}, "action": "drop_after_body"},
              {"match": {"requests": "4"}, "respond": {"status": 429, "headers": {"Retry-After": "7"}, "body": "later"}},
              {"match": {"requests": "5"}, "action": "malformed"},
              {"match": {"requests": "6"}, "action": "hang"},
              {"match": {"probability": 0.5}, "respond": {"status": 503}}
            ]}
            """#.utf8))
        let batches = (0..<14).map { i in Wire.events(i % 3 + 1) }
        let recorded = try withServer(.init(scenario: scenario, recordPath: recording, threads: 2)) { server in
            (drive(server.port, batches: batches, hanging: 5), server.stats())
        }
        #expect(recorded.0.prefix(6) == ["200", "reset", "closed", "429", "malformed", "timeout"])
        #expect(Set(recorded.0.dropFirst(6)) == ["200", "503"])

        let lines = try RecordedExchange.load(path: recording)
        #expect(lines.count == 14)
        #expect(lines[0].logIds == batches[0].compactMap { $0["id"] as? String })
        #expect(lines[0].install == Wire.install)
        #expect(lines[0].path == Wire.logsPath)
        #expect(lines[0].response?.status == 200)
        #expect(lines[1].action == "reset")
        #expect(lines[3].response == Scenario.Response(status: 429, headers: ["Retry-After": "7", "Content-Type": "text/plain; charset=utf-8"],
                                                       body: "later"))
        #expect(lines[3].fault == "respond")
        #expect(lines[0].fault == nil)

        // Replay, with no scenario at all: the same answers in the same order, then normal handling.
        let replayed = try withServer(.init(replayPath: recording, threads: 2)) { server in
            let seen = drive(server.port, batches: batches, hanging: 5)
            let extra = outcome { try Wire.post(server.port, Wire.events(1)) }
            return (seen, extra, server.stats())
        }
        #expect(replayed.0 == recorded.0)
        #expect(replayed.1 == "200")
        #expect(replayed.2.faults == recorded.1.faults)
        #expect(replayed.2.logsUnique == recorded.1.logsUnique + 1)
    }

    // SPEC M5, M8: network faults and drop_before_body are recorded and replayed: the client sees the same bytes,
    // and the faults are counted alike.
    @Test func networkFaultsReplay() throws {
        let recording = temporaryFile("network.jsonl")
        defer { try? FileManager.default.removeItem(atPath: recording) }
        let scenario = try Scenario.decode(from: Data(#"""
            {"seed": 4, "rules": [
              {"match": {"requests": "1"}, "action": "drop_before_body"},
              {"match": {"requests": "2"}, "network": {"limit_bytes": 12}},
              {"match": {"requests": "3"}, "respond": {"status": 503}, "network": {"latency_ms": 5, "slice_bytes": 30}},
              {"match": {"requests": "4"}, "network": {"slice_bytes": 50, "slow_close_ms": 1}}
            ]}
            """#.utf8))
        func drive(_ port: Int) -> [String] { (0..<5).map { _ in outcome { try Wire.post(port, Wire.events(1)) } } }
        let recorded = try withServer(.init(scenario: scenario, recordPath: recording, threads: 2)) { server in
            (drive(server.port), server.stats().faults)
        }
        #expect(recorded.0 == ["closed", "malformed", "503", "200", "200"])
        let lines = try RecordedExchange.load(path: recording)
        #expect(lines.map(\.action) == ["drop_before_body", nil, nil, nil, nil])
        #expect(lines[1].network == Scenario.Network(limitBytes: 12))
        #expect(lines[2].network == Scenario.Network(latencyMs: 5, sliceBytes: 30))
        #expect((lines[2].response?.delayMs ?? 0) == 5)
        let replayed = try withServer(.init(replayPath: recording, threads: 2)) { server in
            (drive(server.port), server.stats().faults)
        }
        #expect(replayed.0 == recorded.0)
        #expect(replayed.1 == recorded.1)
        #expect(recorded.1 == ["drop_before_body": 1, "limit_bytes": 1, "respond": 1, "latency": 1, "slice": 2,
                               "slow_close": 1])
    }

    // SPEC M5: the recording in Fixtures/recordings replays: 503, 429, lost ack, 200, then normal handling.
    @Test func fixtureRecordingReplays() throws {
        let dir = fixturesPath("recordings")
        let path = dir + "/outage-then-ok.jsonl"
        try withServer(.init(replayPath: path, threads: 2)) { (server: MockServer) throws in
            let logs = Wire.events(2)
            let first = try Wire.post(server.port, logs)
            #expect(first.status == 503)
            #expect(first.json["reason"] as? String == "recorded outage")
            #expect(try Wire.post(server.port, logs).header("Retry-After") == "1")
            #expect(outcome { try Wire.post(server.port, logs) } == "closed")
            #expect(try Wire.post(server.port, logs).status == 200)
            #expect(try Wire.post(server.port, Wire.events(1)).status == 200)
            let stats = server.stats()
            #expect(stats.logsUnique == 3)
            #expect(stats.logsDuplicate == 2)
            #expect(stats.faults == ["respond": 2, "drop_after_body": 1])
        }
    }

    // SPEC M5: a broken recording is refused at start with the line that is wrong.
    @Test func brokenRecordingIsRefused() throws {
        let recording = temporaryFile("broken.jsonl")
        defer { try? FileManager.default.removeItem(atPath: recording) }
        try Data("{\"at\":1}\nnot json\n".utf8).write(to: URL(fileURLWithPath: recording))
        #expect(throws: MockServerError.self) { try MockServer(configuration: .init(replayPath: recording)) }
        #expect(throws: MockServerError.self) {
            try MockServer(configuration: .init(replayPath: "/nonexistent/outbox-mock.jsonl"))
        }
    }
}

@Suite("outbox-mock executable (SPEC X1)")
struct ExecutableTests {
    static var binary: String? {
        // The test bundle sits in .build/<config>/ next to the executables.
        let dir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let candidates = [dir, dir.deletingLastPathComponent()].map { $0.appendingPathComponent("outbox-mock").path }
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    // SPEC X1: prints `listening on http://HOST:PORT`, serves, and exits 0 on SIGTERM and SIGINT.
    @Test(.enabled(if: binary != nil), arguments: [SIGTERM, SIGINT])
    func printsListeningAndStopsOnSignal(_ signal: Int32) throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: try #require(Self.binary))
        process.arguments = ["--port", "0", "--scenario", try MockServer.scenarioPath("throttle"), "--app-secret", "x"]
        let stdout = Pipe()
        process.standardOutput = stdout
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = stdout.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let match = try #require(text.wholeMatch(of: /listening on http:\/\/127\.0\.0\.1:(\d+)/))
        let port = try #require(Int(match.1))
        let conn = try TestConnection(port: port)
        let response = try conn.request("POST", Wire.logsPath, headers: Wire.headers(secret: "x"),
                                        body: Wire.body(Wire.events(1)))
        #expect(response.status == 429)
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
    }
}
