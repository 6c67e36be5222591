import Foundation
import OutboxMock
import Testing
@testable import Outbox

/// The real engine against the real mock server over loopback, one scenario of Fixtures/scenarios/ each.
/// Assertions read the server's stats, not the engine's logs.
@Suite("Delivery end to end (SPEC C, R, W)")
struct DeliveryEndToEndTests {
    private func track(_ engine: OutboxEngine, count: Int, criticalEvery: Int = 10, name: String = "e2e") throws {
        for index in 0..<count {
            let critical = (index + 1) % criticalEvery == 0
            try engine.trackEvent(critical ? "\(name)-critical" : name, properties: ["i": .int(Int64(index))],
                                  flags: critical ? .critical : .normal)
        }
    }

    // SPEC C1, C3, W1, W2: everything tracked arrives once, in batches of at most 50, at most 3 in flight.
    @Test func everyLogArrivesOnceWithAtMostThreeRequestsInFlight() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        try track(engine, count: 2000)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let status = try await engine.status()
        engine.shutdown()
        let stats = server.stats()
        #expect(stats.logsUnique == 2000)
        #expect(stats.logsDuplicate == 0)
        #expect(stats.maxInFlight <= 3)
        #expect(server.requests().allSatisfy { $0.logs <= 50 })
        #expect(stats.installs[engine.installID.uuidString.lowercased()]?.logsUnique == 2000)
        #expect(status.pendingNormal + status.pendingCritical + status.inFlight == 0)
        #expect(status.delivered == 2000)
    }

    // SPEC W1: with either body compressor, batches of 1400 bytes and more arrive gzip-encoded, the mock inflates
    // and validates them, and everything tracked arrives once; the fast one's bodies stay within 1.5× of zlib's.
    @Test func bothBodyCompressorsDeliverGzipTheMockReads() async throws {
        var wireBytes: [Int] = []
        for compression in [BodyCompression.fast, .zlib(level: 6)] {
            let dir = TempDirectory(); defer { dir.remove() }
            var mockConfiguration = MockServer.Configuration()
            mockConfiguration.recordPath = dir.path + "/exchanges.jsonl"
            let server = try MockServer(configuration: mockConfiguration)
            try server.start()
            defer { try? server.stop() }
            var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
            configuration.bodyCompression = compression
            configuration.dispatchInterval = .zero  // manual: the batches are the same for both compressors
            let engine = try OutboxEngine(configuration: configuration)
            for index in 0..<400 {
                try engine.trackEvent("compressed", properties: ["i": .int(Int64(index)), "query": .string("q\(index % 7)")])
            }
            engine.dispatch()
            #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
            engine.shutdown()
            try server.stop()
            #expect(server.stats().logsUnique == 400)
            let exchanges = try RecordedExchange.load(path: dir.path + "/exchanges.jsonl")
            #expect(exchanges.count == 8)
            #expect(exchanges.allSatisfy { $0.contentEncoding == "gzip" }, "\(compression)")
            wireBytes.append(exchanges.reduce(0) { $0 + $1.bytes })
        }
        #expect(wireBytes[0] < wireBytes[1] * 3 / 2, "fast \(wireBytes[0]) bytes, zlib 6 \(wireBytes[1])")
    }

    // SPEC C4: critical logs are loaded and sent before normal ones, each priority in ascending sequence.
    // One batch of 500 holds everything, so the order on the wire is the claim order (with 3 requests in
    // flight, arrival order across requests is not defined; the store tests check the claim order across batches).
    @Test func criticalLogsArriveBeforeNormalOnes() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.dispatchInterval = .zero  // manual: everything waits for dispatch()
        configuration.batchSize = 500
        let engine = try OutboxEngine(configuration: configuration)
        for index in 0..<200 { try engine.trackEvent("normal", properties: ["i": .int(Int64(index))]) }
        for index in 0..<30 { try engine.trackEvent("vip", properties: ["i": .int(Int64(index))], flags: .critical) }
        engine.dispatch()
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        engine.shutdown()
        let names = server.uniqueLogs().map { $0.name ?? "" }
        #expect(names.count == 230)
        let lastCritical = names.lastIndex(of: "vip") ?? Int.max
        let firstNormal = names.firstIndex(of: "normal") ?? -1
        #expect(lastCritical < firstNormal)
        #expect(server.requests().count == 1)
    }

    // SPEC R1, R3: 30 % 503s are retried until everything is delivered.
    @Test func aFlakyServerLosesNothing() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("flaky"); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.retryIntervals = Array(repeating: .milliseconds(60), count: 10)
        let engine = try OutboxEngine(configuration: configuration)
        try track(engine, count: 1000)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(server.stats().logsUnique == 1000)
        #expect((server.stats().statusCounts["503"] ?? 0) > 0)
        #expect(status.retries > 0)
        #expect(status.disabledReason == nil)
    }

    // SPEC R1, R3, M3: while the port refuses connections, batches back off as configured, then deliver.
    @Test func anOutageIsRiddenOutWithRetriesSpacedAsConfigured() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario: Scenario(seed: 1, rules: [
            .init(match: .init(untilSeconds: 1.0), outcome: .refuse(durationSeconds: nil)),
        ]))
        defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.retryIntervals = [.milliseconds(400), .milliseconds(800), .milliseconds(1600)]
        let engine = try OutboxEngine(configuration: configuration)
        // The first request triggers the refusal window; the rest wait behind it.
        try track(engine, count: 120)
        let start = wallMs()
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let elapsed = wallMs() - start
        let status = try await engine.status()
        engine.shutdown()
        #expect(server.stats().logsUnique == 120)
        #expect(status.retries >= 1)
        // Down for 1 s with back-off of 200–400 ms then 400–800 ms: delivery cannot finish before the window ends.
        #expect(elapsed >= 900)
        // The port was closed from the start: the first request the server saw came after the window.
        #expect((server.requests().first?.at ?? 0) >= 1000)
    }

    // SPEC R4: Retry-After pauses the pipeline for as long as the server asks.
    @Test func retryAfterIsHonoured() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario: Scenario(seed: 1, rules: [
            .init(match: .init(requests: try .init("1")), outcome: .respond(.init(status: 429, headers: ["Retry-After": "1"]))),
        ]))
        defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        try track(engine, count: 10)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        engine.shutdown()
        let requests = server.requests()
        #expect(requests.count >= 2)
        #expect(requests[0].status == 429)
        // The retry came no sooner than the server asked (1 s), although the configured interval is 100 ms.
        #expect(requests[1].at - requests[0].at >= 950)
        #expect(server.stats().logsUnique == 10)
    }

    // SPEC R1, R3, R7-like outage with the fixture itself (Fixtures/scenarios/outage.json: the port refuses
    // connections from 2 s to 12 s): an app tracking through the whole outage loses nothing, the server hears
    // nothing while it is down, and the backlog is delivered once it is back.
    @Test func theTenSecondOutageFixtureIsRiddenOut() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("outage"); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.retryIntervals = [.milliseconds(500), .seconds(1), .seconds(2), .seconds(2), .seconds(2),
                                        .seconds(2), .seconds(2), .seconds(2), .seconds(2), .seconds(2)]
        let engine = try OutboxEngine(configuration: configuration)
        // The simulated app, on a thread of its own (not one of the test runner's few shared ones): a steady
        // trickle of 10 logs every 100 ms for 13 s, before, during and after the outage. The pause paces the app;
        // it waits for nothing.
        let (tracked, failures) = await withCheckedContinuation { (continuation: CheckedContinuation<(Int, Int), Never>) in
            Thread {
                let start = wallMs()
                var tracked = 0, failures = 0
                while wallMs() - start < 13_000 {
                    for index in 0..<10 {
                        do { try engine.trackEvent("outage", properties: ["i": .int(Int64(tracked + index))]) } catch { failures += 1 }
                    }
                    tracked += 10
                    usleep(100_000)
                }
                continuation.resume(returning: (tracked, failures))
            }.start()
        }
        #expect(failures == 0)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let status = try await engine.status()
        engine.shutdown()
        let requests = server.requests()
        #expect(server.stats().logsUnique == tracked)
        #expect(status.retries >= 1)
        #expect(status.disabledReason == nil)
        // Requests before the outage, none inside it (the port was closed), and the rest after it.
        #expect(requests.contains { $0.at < 2000 })
        #expect(!requests.contains { $0.at > 2100 && $0.at < 12_000 })
        #expect(requests.contains { $0.at >= 12_000 })
    }

    // SPEC R4 with the fixture itself (Fixtures/scenarios/throttle.json: the first 3 requests get 429 with
    // Retry-After: 2). One batch, so one request at a time: each retry waits the 2 s the server asked for,
    // although the configured intervals are 100–400 ms.
    @Test func theThrottleFixtureIsHonoured() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("throttle"); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        try track(engine, count: 10, criticalEvery: 1000)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        engine.shutdown()
        let requests = server.requests().sorted { $0.at < $1.at }
        #expect(requests.map(\.status) == [429, 429, 429, 200])
        for (earlier, later) in zip(requests, requests.dropFirst()) {
            #expect(later.at - earlier.at >= 1950, "a retry \(later.at - earlier.at) ms after a 429 with Retry-After: 2")
        }
        #expect(server.stats().logsUnique == 10)
    }

    // SPEC R1, S6, M2: answers lost after the server recorded the logs cause re-sends the server de-duplicates.
    @Test func lostAcknowledgementsAreResentAndDeduplicated() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("lost-ack"); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        try track(engine, count: 100)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        engine.shutdown()
        let stats = server.stats()
        #expect(stats.logsUnique == 100)
        #expect(stats.logsDuplicate > 0)
        #expect((stats.faults["drop_after_body"] ?? 0) == 2)
    }

    // SPEC R1, R2: a 400 is bisected down to the refused log; only it is dead-lettered, its neighbours arrive.
    @Test func aPoisonLogIsDeadLetteredAndItsNeighboursDelivered() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("poison"); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        for index in 0..<40 { try engine.trackEvent(index == 17 ? "poison" : "fine", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let status = try await engine.status()
        let letters = try await engine.withStore { try $0.deadLetters() }
        engine.shutdown()
        #expect(server.stats().logsUnique == 39)
        #expect(server.uniqueLogs().allSatisfy { $0.name == "fine" })
        #expect(status.deadLettered == 1)
        #expect(letters.count == 1)
        #expect(letters.first?.status == 400)
        #expect(letters.first?.reason.contains("poison") == true)
        #expect(try StoreReport.read(path: dir.file()).deadLetters == 1)
    }

    // SPEC R1: 413 splits the batch until the server takes it; nothing is dead-lettered.
    @Test func tooLargeBatchesAreSplit() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("too-large"); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        try track(engine, count: 150)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(server.stats().logsUnique == 150)
        #expect((server.stats().statusCounts["413"] ?? 0) > 0)
        #expect(status.deadLettered == 0)
    }

    // SPEC R1: 401 stops sending and keeps the data; after the configuration is fixed (restart) it is delivered.
    @Test func unauthorizedStopsAndKeepsTheDataUntilFixed() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("unauthorized"); defer { try? server.stop() }
        var engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        try track(engine, count: 60)
        // The answer to the first request stops sending.
        #expect(await dispatchResult(engine) == .error)
        let status = try await engine.status()
        #expect(status.disabledReason?.contains("401") == true)
        let requestsWhenStopped = server.stats().requests
        #expect(!(await engine.waitUntilDelivered(timeout: .milliseconds(500))))
        #expect(server.stats().requests == requestsWhenStopped)
        #expect(try StoreReport.read(path: dir.file()).disabledReason?.contains("401") == true)
        engine.shutdown()
        #expect(try StoreReport.read(path: dir.file()).pendingNormal + StoreReport.read(path: dir.file()).pendingCritical == 60)

        server.setScenario(nil)  // the credentials are fixed
        engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        engine.shutdown()
        #expect(server.stats().logsUnique == 60)
    }

    // SPEC R5: exhausted retries disable sending (data kept) until retryNow().
    @Test func exhaustedRetriesDisableSendingUntilRetryNow() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario: Scenario(seed: 1, rules: [
            .init(match: .init(requests: try .init("1-4")), outcome: .respond(.init(status: 503))),
        ]))
        defer { try? server.stop() }
        // One batch: with the fast schedule, a loaded machine let the timer send two partial batches before the
        // first dispatch, each with attempts of its own, so four 503s never exhausted one.
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.transmissionInterval = .seconds(60)
        configuration.recoveryProbe = nil  // R5 as App Center has it; RecoveryMachineTests prove R9's probing after R5
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        try track(engine, count: 20)
        // Each dispatch answers with the next request's result: four 503s use the four attempts.
        var status = try await engine.status()
        for _ in 0..<8 where status.disabledReason == nil {
            #expect(await dispatchResult(engine) == .error)
            status = try await engine.status()
        }
        #expect(status.disabledReason?.contains("retries exhausted") == true)
        #expect(server.stats().requests == 4)
        #expect(status.pendingNormal + status.pendingCritical == 20)
        engine.retryNow()
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        #expect(server.stats().logsUnique == 20)
        #expect(try await engine.status().disabledReason == nil)
    }

    // SPEC R5: with three batches failing, the first to exhaust its attempts disables sending; the others hand
    // their rows back, and the probe then delivers everything without a restart or retryNow().
    @Test func theProbeRecoversWhenSeveralBatchesFail() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario: Scenario(seed: 1, rules: [
            .init(match: .init(requests: try .init("1-9")), outcome: .respond(.init(status: 503))),
        ]))
        defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.retryIntervals = [.milliseconds(40)]
        configuration.probeInterval = .milliseconds(300)
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        try track(engine, count: 150, criticalEvery: 1000)
        // Scaled: under ThreadSanitizer (OUTBOX_TIME_SCALE=4) the nine failed requests, retries and probes took over 20 s.
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20 * testTimeScale)))
        #expect(server.stats().logsUnique == 150)
        #expect((server.stats().statusCounts["503"] ?? 0) == 9)
        #expect(try await engine.status().disabledReason == nil)
    }

    // SPEC A9: with the server's clock 1 h ahead, timestamps are sent in the server's time.
    @Test func timestampsFollowTheServersClock() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("skewed-clock"); defer { try? server.stop() }
        let engine = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        try engine.trackEvent("learn")
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        try track(engine, count: 20, name: "skewed")
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        engine.shutdown()
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let skewed = server.uniqueLogs().filter { ($0.name ?? "").hasPrefix("skewed") }
        #expect(skewed.count == 20)
        for log in skewed {
            let object = (try? JSONSerialization.jsonObject(with: Data(log.json.utf8)) as? [String: Any]) ?? [:]
            let sent = (object["timestamp"] as? String).flatMap { formatter.date(from: $0) }
            let gap = abs((sent?.timeIntervalSince1970 ?? 0) * 1000 - Double(log.receivedAtMs))
            #expect(gap < 1000, "timestamp \(object["timestamp"] ?? "?") vs server arrival \(log.receivedAtMs)")
        }
    }

    // SPEC C7: dispatch(completion:) reports each request, and .noData once drained.
    @Test func dispatchWithCompletionDrainsUntilNoData() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.dispatchInterval = .zero
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        for index in 0..<120 { try engine.trackEvent("d", properties: ["i": .int(Int64(index))]) }
        await engine.persisted()
        var results: [DispatchResult] = []
        for _ in 0..<10 {
            let result = await dispatchResult(engine)
            results.append(result)
            if result == .noData { break }
        }
        #expect(results.first == .good)
        #expect(results.last == .noData)
        #expect(server.stats().logsUnique == 120)
    }

    // SPEC C8: shutdown(drainFor:) delivers within the deadline or leaves the rest stored; no handle leaks.
    @Test func shutdownDrainsWithinTheDeadlineOrKeepsTheRest() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario: Scenario(seed: 1, rules: [.init(outcome: .hang)]))
        defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        // The longest timeout there is (10 min), whatever OUTBOX_TIME_SCALE: 300 s scaled by 4 under TSan was refused.
        configuration.requestTimeout = .seconds(600)
        let engine = try OutboxEngine(configuration: configuration)
        try track(engine, count: 30)
        let start = wallMs()
        await engine.shutdown(drainFor: .milliseconds(500))
        // The hung requests were cancelled, not waited for (their timeout is 600 s). The bound stays well below that
        // but is not tight: this task resumes on one of the test runner's 2 shared threads, which the long
        // blocking tests (crash children, namespaces, nginx, the CLI's processes) can hold for many seconds (20.9 s
        // seen under load, 55 s on a fresh clone's first run; 78 s under TSan, hence OUTBOX_TIME_SCALE).
        #expect(wallMs() - start < min(150_000 * testTimeScale, 450_000))
        #expect(engine.dedicatedLoopCloseResult == 0)
        let report = try StoreReport.read(path: dir.file())
        #expect(report.pendingNormal + report.pendingCritical == 30)
        #expect(report.inFlight == 0)

        server.setScenario(nil)
        let again = try OutboxEngine(configuration: fastConfiguration(store: dir.file(), endpoint: server.baseURL))
        await again.shutdown(drainFor: .seconds(10))
        #expect(server.stats().logsUnique == 30)
        #expect(try StoreReport.read(path: dir.file()).pendingNormal == 0)
    }
}
