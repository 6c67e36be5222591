import Foundation
import OutboxTestSupport
import OutboxMock
import Testing
@testable import Outbox

@Suite("Crash during delivery (SPEC S6, C9, T7)", .serialized)
struct DeliveryCrashTests {
    /// `outbox emit` drains a stored backlog to the mock and is killed with SIGKILL at random moments, at least
    /// 10 times; a last run finishes. Every log must arrive, and duplicates may only come from batches whose
    /// answer was lost (the server's drop_after_body, or a kill between the server's answer and the delete).
    @Test(arguments: ["lost-ack", "flaky"]) func killingTheSenderLosesNothing(scenario: String) async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario); defer { try? server.stop() }
        let outbox = builtProduct("outbox")
        try #require(FileManager.default.isExecutableFile(atPath: outbox), "build the package first: \(outbox)")
        let total = 20_000
        let stored = try run(outbox, ["emit", "--store", dir.file(), "--count", "\(total)", "--critical-every", "7"])
        #expect(stored.status == 0)
        #expect(jsonObject(stored.output)["tracked"] as? Int == total)

        let drain = ["emit", "--store", dir.file(), "--count", "0", "--endpoint", server.baseURL, "--app-secret", "k",
                     "--wait-delivered", "--timeout", "60", "--testing", "--batch-size", "20", "--interval", "0.02",
                     "--retry-intervals", "0.02,0.02,0.02,0.02,0.02,0.02,0.02,0.02,0.02,0.02"]
        var random = SystemRandomNumberGenerator()
        var kills = 0
        while kills < 10 {
            let before = server.stats().requests
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: outbox)
            process.arguments = drain
            process.standardOutput = FileHandle.nullDevice
            let errors = Pipe()
            process.standardError = errors
            try process.run()
            // Kill once the child has sent something: a random number of requests into its run.
            let target = before + Int.random(in: 1...6, using: &random)
            // The child offers nothing to await: watch the server. A blocking sleep, because Task.sleep resumes late
            // when the 2-thread cooperative pool is busy with other tests.
            var waited = 0
            while server.stats().requests < target && process.isRunning && waited < 20_000 {
                usleep(500)
                waited += 1
            }
            guard process.isRunning else {
                // It finished the backlog (nothing left to interrupt) — or failed: say which.
                process.waitUntilExit()
                let message = String(decoding: readToEnd(errors.fileHandleForReading), as: UTF8.self)
                #expect(process.terminationStatus == 0, "emit failed: \(message)")
                break
            }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            kills += 1
        }
        // The last run only has to finish: larger batches and a generous timeout, since a loaded machine (the
        // whole suite runs in parallel) can slow ~800 small requests of a debug build past a minute.
        var finish = drain
        if let index = finish.firstIndex(of: "--batch-size") { finish[index + 1] = "200" }
        if let index = finish.firstIndex(of: "--timeout") { finish[index + 1] = "240" }
        let last = try run(outbox, finish)
        #expect(last.status == 0)
        // The whole report on failure: `disabled` and `retries` tell a stall from a slow machine.
        #expect(jsonObject(last.output)["pending"] as? Int == 0, "final drain: \(last.output)")
        #expect(kills >= 10, "the backlog drained before 10 kills (\(kills))")

        let stats = server.stats()
        #expect(stats.logsUnique == total)
        let lostAnswers = server.requests().filter { $0.action == "drop_after_body" }.reduce(0) { $0 + $1.logs }
        // A kill can lose the answers of at most the 3 requests in flight (20 logs each).
        #expect(stats.logsDuplicate <= lostAnswers + kills * 3 * 20)
        let report = try StoreReport.read(path: dir.file())
        #expect(report.pendingNormal + report.pendingCritical + report.inFlight == 0)
    }

    /// SPEC D17, S6: the same with two destinations from one store, each on a mock of its own: killed while both
    /// deliver, neither loses a log, and the store is empty once both have every one.
    @Test func killingTheSenderOfTwoDestinationsLosesNothingForEither() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let first = try startMock("lost-ack"); defer { try? first.stop() }
        let second = try startMock("flaky"); defer { try? second.stop() }
        let outbox = builtProduct("outbox")
        let secrets = ["OUTBOX_OPS_APP_SECRET": "k1", "OUTBOX_PRODUCT_APP_SECRET": "k2"]
        let total = 5000
        // Stored while both destinations are unreachable: the logs are both destinations' from the start.
        let stored = try runOutbox(["emit", "--store", dir.file(), "--count", "\(total)", "--critical-every", "7",
                                    "--to", "ops=appcenter,endpoint=http://127.0.0.1:1",
                                    "--to", "product=appcenter,endpoint=http://127.0.0.1:1"], environment: secrets, in: dir)
        #expect(stored.status == 0, "\(stored.errors)")
        let drain = ["emit", "--store", dir.file(), "--count", "0", "--to", "ops=appcenter,endpoint=\(first.baseURL)",
                     "--to", "product=appcenter,endpoint=\(second.baseURL)", "--wait-delivered", "--timeout", "60",
                     "--testing", "--batch-size", "20", "--interval", "0.02",
                     "--retry-intervals", "0.02,0.02,0.02,0.02,0.02,0.02,0.02,0.02,0.02,0.02"]
        var random = SystemRandomNumberGenerator()
        var kills = 0
        while kills < 6 {
            let before = first.stats().requests + second.stats().requests
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: outbox)
            process.arguments = drain
            process.environment = ProcessInfo.processInfo.environment.merging(secrets) { $1 }
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let target = before + Int.random(in: 2...10, using: &random)
            var waited = 0
            // The child offers nothing to await: watch the servers (a blocking sleep, as above).
            while first.stats().requests + second.stats().requests < target && process.isRunning && waited < 20_000 {
                usleep(500)
                waited += 1
            }
            guard process.isRunning else { break }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            kills += 1
        }
        var finish = drain
        if let index = finish.firstIndex(of: "--batch-size") { finish[index + 1] = "200" }
        if let index = finish.firstIndex(of: "--timeout") { finish[index + 1] = "240" }
        let last = try runOutbox(finish, environment: secrets, in: dir)
        #expect(last.status == 0, "\(last.errors)")
        #expect(jsonObject(last.output)["pending"] as? Int == 0, "final drain: \(last.output)")
        #expect(kills >= 3, "the backlog drained before 3 kills (\(kills))")
        #expect(first.stats().logsUnique == total, "ops lost nothing")
        #expect(second.stats().logsUnique == total, "product lost nothing")
        let report = try StoreReport.read(path: dir.file())
        #expect(report.pendingNormal + report.pendingCritical + report.inFlight == 0)
        #expect(report.destinations?.values.allSatisfy { $0.pending == 0 && $0.inFlight == 0 } == true)
    }
}
