import Foundation
import OutboxMock
import OutboxTestSupport
import Testing
import Outbox

func jsonLines(_ text: String) -> [[String: Any]] {
    text.split(separator: "\n").compactMap { line in
        try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    }
}

@Suite("outbox dead-letters and --log-level (SPEC X6, X7)")
struct DeadLetterCommandTests {
    // SPEC X6: dead letters made by a real refusal are listed as JSON lines, requeued by id (and then delivered
    // with the same id), and purged by id and all at once.
    @Test func deadLettersAreListedRequeuedAndPurgedFromTheCommandLine() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("poison"); defer { try? server.stop() }
        let emitted = try runOutbox(["emit", "--store", dir.file(), "--count", "3", "--name-prefix", "poison",
                                  "--endpoint", server.baseURL, "--app-secret", "k",
                                  "--wait-delivered", "--timeout", "30"], in: dir)
        #expect(emitted.status == 0, "\(emitted.errors)")
        #expect(jsonObject(emitted.output)["dead_lettered"] as? Int == 3, "\(emitted.output)")

        let listed = try runOutbox(["dead-letters", "--store", dir.file()], in: dir)
        #expect(listed.status == 0, "\(listed.errors)")
        let letters = jsonLines(listed.output)
        #expect(letters.count == 3, "\(listed.output)")
        for letter in letters {
            #expect(letter["status"] as? Int == 400)
            #expect((letter["reason"] as? String)?.contains("poison") == true)
            #expect(letter["dead_lettered_at"] is String)
            let log = letter["log"] as? [String: Any]
            #expect(log?["id"] as? String == letter["id"] as? String)
            #expect(log?["name"] as? String == "poison")
            #expect(log?["timestamp"] is String)
        }
        let ids = letters.compactMap { $0["id"] as? String }
        try #require(ids.count == 3)

        let one = try runOutbox(["dead-letters", "--store", dir.file(), "--id", ids[2]], in: dir)
        #expect(jsonLines(one.output).compactMap { $0["id"] as? String } == [ids[2]])

        let requeued = try runOutbox(["dead-letters", "--store", dir.file(), "--id", ids[0], "--requeue"], in: dir)
        #expect(requeued.output == "{\"requeued\":1}\n", "\(requeued.errors)")
        let status = jsonObject(try runOutbox(["status", "--store", dir.file()], in: dir).output)
        #expect(status["pending_normal"] as? Int == 1)
        #expect(status["dead_letters"] as? Int == 2)

        let purged = try runOutbox(["dead-letters", "--store", dir.file(), "--id", ids[1], "--purge"], in: dir)
        #expect(purged.output == "{\"purged\":1}\n", "\(purged.errors)")
        let left = try runOutbox(["dead-letters", "--store", dir.file()], in: dir)
        #expect(jsonLines(left.output).compactMap { $0["id"] as? String } == [ids[2]])

        // The requeued log goes out with the next engine, under its own id, once the server takes it.
        server.setScenario(nil)
        let delivered = try runOutbox(["emit", "--store", dir.file(), "--count", "0", "--endpoint", server.baseURL,
                                    "--app-secret", "k", "--wait-delivered", "--timeout", "30"], in: dir)
        #expect(jsonObject(delivered.output)["delivered"] as? Int == 1, "\(delivered.output) \(delivered.errors)")
        #expect(server.uniqueLogs().map(\.id) == [ids[0]])

        let all = try runOutbox(["dead-letters", "--store", dir.file(), "--purge"], in: dir)
        #expect(all.output == "{\"purged\":1}\n")
        #expect(try runOutbox(["dead-letters", "--store", dir.file()], in: dir).output.isEmpty)
    }

    // SPEC X6: `--requeue` with `--purge`, an id that is not a UUID, a missing store: refused, with a message
    // that names the problem, and no store created.
    @Test(arguments: [
        (["--requeue", "--purge"], "--requeue and --purge"),
        (["--id", "not-a-uuid"], "--id"),
        (["--id", "0f8fad5b-d9cb-469f-a165-70867728950e", "--id", "42", "--purge"], "'42'"),
        (["--requeue"], "no store at this path"),
    ])
    func badDeadLetterArgumentsAreRefusedByName(extra: [String], message: String) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runOutbox(["dead-letters", "--store", dir.file()] + extra, in: dir)
        #expect(result.status != 0)
        #expect(result.status < 128, "killed by a signal: \(result.errors)")
        #expect(result.errors.contains(message), "message: \(result.errors)")
        #expect(!FileManager.default.fileExists(atPath: dir.file()))
    }

    // SPEC X6: listing works beside a running engine; --requeue and --purge are refused with what to do.
    @Test func requeueAndPurgeWaitForTheStoreToBeFree() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        var configuration = Configuration(storePath: dir.file())
        configuration.sessionTracking = .manual
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        #expect(try runOutbox(["dead-letters", "--store", dir.file()], in: dir).status == 0)
        for action in ["--requeue", "--purge"] {
            let result = try runOutbox(["dead-letters", "--store", dir.file(), action], in: dir)
            #expect(result.status != 0)
            #expect(result.errors.contains("in use by a running engine"), "message: \(result.errors)")
        }
    }

    // SPEC X7: every command takes --log-level; an unknown level is refused by name before anything runs.
    @Test(arguments: [["emit", "--count", "1"], ["status"], ["dead-letters"], ["demo"]])
    func anUnknownLogLevelIsRefusedByName(command: [String]) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let place = command[0] == "demo" ? ["--directory", dir.path] : ["--store", dir.file()]
        let result = try runOutbox(command + place + ["--log-level", "loud"], in: dir)
        #expect(result.status != 0)
        #expect(result.status < 128, "killed by a signal: \(result.errors)")
        #expect(result.errors.contains("--log-level"), "message: \(result.errors)")
        #expect(result.errors.contains("loud"), "message: \(result.errors)")
        #expect(!FileManager.default.fileExists(atPath: dir.file()))
    }

    // SPEC X7: --payload-bytes beyond what one event carries is refused with that limit, and nothing is stored.
    @Test func payloadBytesBeyondOneEventAreRefusedWithTheLimit() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "1", "--payload-bytes", "2376"], in: dir)
        #expect(result.status != 0)
        #expect(result.status < 128, "killed by a signal: \(result.errors)")
        #expect(result.errors.contains("2375"), "message: \(result.errors)")
        #expect(result.errors.contains("--payload-bytes"), "message: \(result.errors)")
        #expect(!FileManager.default.fileExists(atPath: dir.file()))
    }

    // SPEC X7: the largest padding one event carries is accepted and stored.
    @Test func payloadBytesAtTheLimitAreStored() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "1", "--payload-bytes", "2375"], in: dir)
        #expect(result.status == 0, "\(result.errors)")
        #expect(jsonObject(result.output)["pending"] as? Int == 1)
    }

    /// `outbox emit` against a server that answers every request with 503, at `level`.
    private func emitAgainstUnavailableServer(level: String?, secret: String, dir: TempDirectory) throws -> (status: Int32, output: String, errors: String) {
        let server = try startMock(scenario: Scenario(seed: 1, rules: [
            .init(outcome: .respond(.init(status: 503, body: "{\"status\":\"Unavailable\"}"))),
        ]))
        defer { try? server.stop() }
        return try runOutbox(["emit", "--store", dir.file(), "--count", "2", "--endpoint", server.baseURL,
                           "--app-secret", secret, "--testing", "--retry-intervals", "0.05,0.05,0.05",
                           "--wait-delivered", "--timeout", "2"] + (level.map { ["--log-level", $0] } ?? []), in: dir)
    }

    // SPEC X7, R3: at `info` the retries reach stderr through swift-log; the app secret never does.
    @Test func retriesAreLoggedAtInfoWithoutTheAppSecret() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let secret = "s3cr3t-\(UUID().uuidString)"
        let result = try emitAgainstUnavailableServer(level: "info", secret: secret, dir: dir)
        #expect(result.status == 1, "logs still pending at the timeout (SPEC X3a): \(result.errors)")
        #expect(result.errors.contains("batch will be retried"), "stderr: \(result.errors)")
        #expect(!result.errors.contains(secret))
        #expect(!result.output.contains(secret))
    }

    // SPEC X7: the default level is `warning`: the retries (info) stay out of stderr.
    @Test func theDefaultLevelLeavesInfoLinesOut() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let secret = "s3cr3t-\(UUID().uuidString)"
        let result = try emitAgainstUnavailableServer(level: nil, secret: secret, dir: dir)
        #expect(result.status == 1, "logs still pending at the timeout (SPEC X3a): \(result.errors)")
        #expect(!result.errors.contains("batch will be retried"), "stderr: \(result.errors)")
        #expect(!result.errors.contains(secret))
    }

    // SPEC X7: the most verbose level writes the delivery's detail too, and still never the app secret.
    @Test func theAppSecretIsAbsentEvenAtTrace() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let secret = "s3cr3t-\(UUID().uuidString)"
        let result = try emitAgainstUnavailableServer(level: "trace", secret: secret, dir: dir)
        #expect(result.status == 1, "logs still pending at the timeout (SPEC X3a): \(result.errors)")
        #expect(result.errors.contains("batch will be retried"), "stderr: \(result.errors)")
        #expect(!result.errors.contains(secret))
    }
}
