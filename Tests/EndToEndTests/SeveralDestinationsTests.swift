import Foundation
import Outbox
import OutboxMock
import OutboxTestSupport
import Testing

/// SPEC D15–D18 end to end: one engine, one store, an OTLP destination and a PostHog one, each on a mock of its own
/// so that a fault injected at one reaches only it.
@Suite("Several destinations from one store (SPEC D15–D18)")
struct SeveralDestinationsTests {
    static func configuration(_ dir: TempDirectory, ops: String, product: String) -> Configuration {
        var configuration = fastConfiguration(store: dir.file("store.sqlite"), endpoint: ops)
        configuration.endpoint = nil
        configuration.appSecret = ""
        configuration.batchSize = 25
        var analytics = NamedDestination(name: "product", destination: .posthog, endpoint: product)
        analytics.apiKey = "phc_test"
        configuration.destinations = [NamedDestination(name: "ops", destination: .otlp, endpoint: ops), analytics]
        return configuration
    }

    static func otlp(_ server: MockServer) -> MockStats.VendorStats? { server.stats().vendors["otlp"] }
    static func posthog(_ server: MockServer) -> MockStats.VendorStats? { server.stats().vendors["posthog"] }

    /// Polls `condition` until it holds or `seconds` pass: the mock has no callback for "this many arrived".
    static func until(_ seconds: Double, _ condition: () -> Bool) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    // SPEC D16: whatever happens at one destination — faults it recovers from, lost answers, a stop (401), a server
    // that is down — the other receives every log once, without waiting for it; a destination that recovers receives
    // every log once too, and each destination's figures say where its logs are (D18).
    @Test(arguments: ["ok", "flaky", "lost-ack", "unauthorized", "down"])
    func aFaultAtOneDestinationNeverHoldsUpTheOther(scenario: String) async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let healthy = try startMock(); defer { try? healthy.stop() }
        let faulty = scenario == "down" ? nil : try startMock(scenario)
        defer { try? faulty?.stop() }
        let engine = try OutboxEngine(configuration: Self.configuration(dir, ops: healthy.baseURL,
                                                                         product: faulty?.baseURL ?? "http://127.0.0.1:1"))
        let count = 300
        for index in 0..<count { try engine.trackEvent("viewed", properties: ["i": .int(Int64(index))]) }
        await engine.persisted()
        #expect(await Self.until(30) { Self.otlp(healthy)?.eventsUnique == count }, "\(scenario): ops received every log")
        #expect(Self.otlp(healthy)?.eventsDuplicate == 0)
        let recovers = ["ok", "flaky", "lost-ack"].contains(scenario)
        if recovers {
            #expect(await engine.waitUntilDelivered(timeout: .seconds(30)), "\(scenario)")
            #expect(faulty.map { Self.posthog($0)?.eventsUnique } == count, "\(scenario): product received every log once")
        }
        let status = try await engine.status()
        let ops = try #require(status.store.destinations?["ops"])
        let product = try #require(status.store.destinations?["product"])
        #expect(ops.pending == 0 && ops.inFlight == 0 && ops.delivered == count)
        if recovers {
            #expect(product.pending == 0 && product.delivered == count)
            #expect(status.pendingNormal + status.inFlight == 0, "\(scenario): every log left the store once both settled it")
        } else {
            #expect(product.pending + product.inFlight == count, "\(scenario): product still holds every log")
            #expect(status.pendingNormal + status.inFlight == count, "\(scenario): one copy of each log stays")
        }
        if scenario == "unauthorized" { #expect(product.disabledReason?.contains("401") == true) }
        engine.shutdown()
    }

    // SPEC D17: what one destination has not sent waits for it across a restart, while what the other sent is not
    // sent to it again; the store written by two destinations reads with each one's figures (D18).
    @Test func whatOneDestinationHasNotSentWaitsForItAcrossARestart() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let ops = try startMock(); defer { try? ops.stop() }
        let count = 120
        do {
            let engine = try OutboxEngine(configuration: Self.configuration(dir, ops: ops.baseURL, product: "http://127.0.0.1:1"))
            for index in 0..<count { try engine.trackEvent("viewed", properties: ["i": .int(Int64(index))]) }
            #expect(await Self.until(30) { Self.otlp(ops)?.eventsUnique == count })
            engine.shutdown()
        }
        let report = try StoreReport.read(path: dir.file("store.sqlite"))
        #expect(report.destinations?["ops"]?.pending == 0)
        #expect(report.destinations?["product"]?.pending == count)
        #expect(report.pendingNormal == count)

        let product = try startMock(); defer { try? product.stop() }
        let engine = try OutboxEngine(configuration: Self.configuration(dir, ops: ops.baseURL, product: product.baseURL))
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        engine.shutdown()
        #expect(Self.posthog(product)?.eventsUnique == count)
        #expect(Self.otlp(ops)?.eventsReceived == count, "nothing ops had settled went to it again")
        let after = try StoreReport.read(path: dir.file("store.sqlite"))
        #expect(after.pendingNormal == 0 && after.destinations?["product"]?.pending == 0)
    }

    // SPEC D18: a store written with one destination keeps its logs for `default` when it grows a list whose first
    // element has no name; the added destination receives the logs stored from then on.
    @Test func aSingleDestinationStoreGrowsAListWithoutLosingItsLogs() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let first = try startMock(); defer { try? first.stop() }
        let second = try startMock(); defer { try? second.stop() }
        do {
            var single = fastConfiguration(store: dir.file("store.sqlite"), endpoint: "http://127.0.0.1:1")
            single.destination = .otlp
            let engine = try OutboxEngine(configuration: single)
            for index in 0..<40 { try engine.trackEvent("before", properties: ["i": .int(Int64(index))]) }
            await engine.persisted()
            engine.shutdown()
        }
        var configuration = Self.configuration(dir, ops: first.baseURL, product: second.baseURL)
        configuration.destinations[0].name = nil
        let engine = try OutboxEngine(configuration: configuration)
        for index in 0..<10 { try engine.trackEvent("after", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(Self.otlp(first)?.eventsUnique == 50, "default kept the 40 stored before the list, and got the 10 after")
        #expect(Self.posthog(second)?.eventsUnique == 10, "the added destination received what was stored from then on")
        #expect(status.store.destinations.map { Set($0.keys) } == ["default", "product"])
    }

    // SPEC D18: the list changes on a running engine by name — an added destination receives the logs stored from
    // then on, a removed one's logs leave (and its count is logged), a kept one keeps its progress; going back to one
    // destination named `default` returns the store to one destination.
    @Test func theListChangesOnARunningEngine() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let ops = try startMock(); defer { try? ops.stop() }
        let product = try startMock(); defer { try? product.stop() }
        var single = fastConfiguration(store: dir.file("store.sqlite"), endpoint: ops.baseURL)
        single.destination = .otlp
        single.appSecret = ""
        let engine = try OutboxEngine(configuration: single)
        for index in 0..<30 { try engine.trackEvent("first", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))

        // One destination becomes a list of two: `default` goes on; `product` starts with what is stored from now on.
        try engine.update { configuration in
            configuration.endpoint = nil
            configuration.destination = .appCenter
            var analytics = NamedDestination(name: "product", destination: .posthog, endpoint: product.baseURL)
            analytics.apiKey = "phc_test"
            configuration.destinations = [NamedDestination(name: nil, destination: .otlp, endpoint: ops.baseURL), analytics]
        }
        for index in 0..<20 { try engine.trackEvent("second", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        #expect(Self.otlp(ops)?.eventsUnique == 50)
        #expect(Self.posthog(product)?.eventsUnique == 20)
        #expect(try await engine.status().store.destinations.map { Set($0.keys) } == ["default", "product"])

        // `default` is removed while it cannot send: the logs only it held leave; `product` delivers what it holds.
        try engine.update { configuration in
            var analytics = NamedDestination(name: "product", destination: .posthog, endpoint: product.baseURL)
            analytics.apiKey = "phc_test"
            configuration.destinations = [NamedDestination(name: nil, destination: .otlp, endpoint: "http://127.0.0.1:1"), analytics]
        }
        for index in 0..<10 { try engine.trackEvent("third", properties: ["i": .int(Int64(index))]) }
        #expect(await Self.until(20) { Self.posthog(product)?.eventsUnique == 30 })
        try engine.update { configuration in
            var analytics = NamedDestination(name: "product", destination: .posthog, endpoint: product.baseURL)
            analytics.apiKey = "phc_test"
            configuration.destinations = [analytics]
        }
        let status = try await engine.status()
        #expect(status.pendingNormal + status.inFlight == 0, "the logs only default held left with it")
        #expect(status.store.destinations.map { Set($0.keys) } == ["product"])
        for index in 0..<5 { try engine.trackEvent("fourth", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        #expect(Self.posthog(product)?.eventsUnique == 35)
        #expect(Self.otlp(ops)?.eventsUnique == 50, "nothing went to the removed destination")
        engine.shutdown()
    }

    // BEHAVIOUR D18: names match, so renaming a destination on a running engine is removing one and adding another:
    // the old name's progress is dropped — the logs only it held leave, and how many is logged at warning level — and
    // the new name receives the logs stored from then on only, though it speaks the same wire to the same server.
    @Test func aRenamedDestinationIsAnotherOne() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let ops = try startMock(); defer { try? ops.stop() }
        let product = try startMock(); defer { try? product.stop() }
        var configuration = Self.configuration(dir, ops: ops.baseURL, product: "http://127.0.0.1:1")
        let (logger, records) = RecordingLogHandler.make()
        configuration.logger = logger
        let engine = try OutboxEngine(configuration: configuration)
        let held = 10
        for index in 0..<held { try engine.trackEvent("before", properties: ["i": .int(Int64(index))]) }
        #expect(await Self.until(20) { Self.otlp(ops)?.eventsUnique == held })
        #expect(try await engine.status().store.destinations?["product"]?.pending == held, "nothing listens for product")

        try engine.update { configuration in
            var renamed = NamedDestination(name: "analytics", destination: .posthog, endpoint: product.baseURL)
            renamed.apiKey = "phc_test"
            configuration.destinations = [configuration.destinations[0], renamed]
        }
        for index in 0..<5 { try engine.trackEvent("after", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let status = try await engine.status()
        engine.shutdown()
        #expect(status.store.destinations.map { Set($0.keys) } == ["ops", "analytics"])
        #expect(status.pendingNormal + status.pendingCritical + status.inFlight == 0, "what only product held left")
        #expect(Self.posthog(product)?.eventsUnique == 5, "the new name got only what was stored after the rename")
        #expect(Self.otlp(ops)?.eventsUnique == held + 5)
        let removed = records.all.filter { $0.message.hasPrefix("destination removed") }
        #expect(removed.count == 1 && removed.first?.level == .warning, "\(removed.map(\.message))")
        #expect(removed.first?.metadata["outbox.destination"] == "product")
        #expect(removed.first?.metadata["outbox.logs_held"] == "\(held)")
    }

    // SPEC D15, D18 through the command line: `emit --to` twice delivers every log to each, waits for both, and
    // reports each destination; `outbox status` reads the store's figures per destination; the credential comes from
    // the destination's own variable.
    @Test func emitWithTwoDestinationsReportsEach() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let ops = try startMock(); defer { try? ops.stop() }
        let product = try startMock("flaky"); defer { try? product.stop() }
        let store = dir.file("store.sqlite")
        let result = try runOutbox(["emit", "--store", store, "--count", "200", "--to", "ops=otlp,endpoint=\(ops.baseURL)",
                                    "--to", "product=posthog,endpoint=\(product.baseURL)", "--wait-delivered", "--timeout", "60"]
                                   + OTLPDestinationTests.fast, environment: ["OUTBOX_PRODUCT_API_KEY": "phc_from_env"], in: dir)
        #expect(result.status == 0, "\(result.errors)")
        let summary = try #require(jsonLines(result.output).first)
        #expect(summary["delivered"] as? Int == 400, "both destinations' deliveries are counted")
        #expect(summary["pending"] as? Int == 0)
        let destinations = try #require(summary["destinations"] as? [String: [String: Any]])
        #expect(destinations["ops"]?["delivered"] as? Int == 200)
        #expect(destinations["product"]?["delivered"] as? Int == 200)
        #expect(destinations["product"]?["pending"] as? Int == 0)
        #expect(Self.otlp(ops)?.eventsUnique == 200 && Self.posthog(product)?.eventsUnique == 200)
        #expect(!result.errors.contains("phc_from_env"))

        let status = try runOutbox(["status", "--store", store], in: dir)
        let report = try #require(jsonLines(status.output).first)
        let perDestination = try #require(report["destinations"] as? [String: [String: Any]])
        #expect(Set(perDestination.keys) == ["ops", "product"])
        #expect(perDestination["ops"]?["pending"] as? Int == 0 && perDestination["ops"]?["delivered"] == nil)
    }

    // SPEC R2, D18: a log one destination refuses is its dead letter alone — the other delivers it — and
    // `outbox dead-letters` lists it with its destination, narrows by `--destination`, and refuses an unknown name.
    @Test func deadLettersArePerDestination() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let ops = try startMock(); defer { try? ops.stop() }
        let product = try startMock("poison"); defer { try? product.stop() }
        let engine = try OutboxEngine(configuration: Self.configuration(dir, ops: ops.baseURL, product: product.baseURL))
        for index in 0..<20 { try engine.trackEvent(index == 7 ? "poison" : "viewed", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let letters = try await engine.deadLetters()
        engine.shutdown()
        #expect(letters.map(\.destination) == ["product"])
        #expect(Self.otlp(ops)?.eventsUnique == 20, "ops delivered the log product refused")
        #expect(Self.posthog(product)?.eventsUnique == 19)

        let store = dir.file("store.sqlite")
        let listed = try runOutbox(["dead-letters", "--store", store], in: dir)
        #expect(jsonLines(listed.output).map { $0["destination"] as? String } == ["product"])
        #expect(jsonLines(try runOutbox(["dead-letters", "--store", store, "--destination", "ops"], in: dir).output).isEmpty)
        let unknown = try runOutbox(["dead-letters", "--store", store, "--destination", "nope"], in: dir)
        #expect(unknown.status != 0 && unknown.errors.contains("no destination named 'nope'"))
    }

    // SPEC D16: `emit --wait-delivered` returns once every destination is drained or stopped — here one delivers
    // everything and the other is refused with 401 — and says which stopped, long before its timeout.
    @Test func waitDeliveredEndsOnceEachIsDrainedOrStopped() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let ops = try startMock(); defer { try? ops.stop() }
        let product = try startMock("unauthorized"); defer { try? product.stop() }
        let started = Date()
        let result = try runOutbox(["emit", "--store", dir.file("store.sqlite"), "--count", "100",
                                    "--to", "ops=otlp,endpoint=\(ops.baseURL)", "--to", "product=posthog,endpoint=\(product.baseURL)",
                                    "--wait-delivered", "--timeout", "120"] + OTLPDestinationTests.fast,
                                   environment: ["OUTBOX_PRODUCT_API_KEY": "phc_x"], in: dir)
        #expect(result.status != 0)
        #expect(result.errors.contains("sending stopped (product:"), "\(result.errors)")
        #expect(Date().timeIntervalSince(started) < 60, "it did not wait for the timeout")
        #expect(Self.otlp(ops)?.eventsUnique == 100)
        let summary = try #require(jsonLines(result.output).first)
        let destinations = try #require(summary["destinations"] as? [String: [String: Any]])
        #expect(destinations["ops"]?["pending"] as? Int == 0 && destinations["product"]?["pending"] as? Int == 100)
    }

    // SPEC D16, C3: two destinations on one server never have more than three requests on the wire between them,
    // and both have requests there at once: with every answer 150 ms late, both receive every log.
    @Test func twoDestinationsShareThreeRequests() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let scenario = try Scenario.decode(from: Data(#"{"description": "late answers", "rules": [{"network": {"latency_ms": 150}}]}"#.utf8))
        let server = try startMock(scenario: scenario); defer { try? server.stop() }
        var configuration = Self.configuration(dir, ops: server.baseURL, product: server.baseURL)
        configuration.batchSize = 10
        let engine = try OutboxEngine(configuration: configuration)
        for index in 0..<300 { try engine.trackEvent("viewed", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(60)))
        engine.shutdown()
        let stats = server.stats()
        #expect(Self.otlp(server)?.eventsUnique == 300 && Self.posthog(server)?.eventsUnique == 300)
        #expect(stats.maxInFlight <= 3, "C3's three requests are the engine's total: \(stats.maxInFlight)")
        #expect(stats.maxInFlight >= 2, "both destinations had requests on the wire at once")
    }

    // SPEC D16: a destination whose server answers slowly (no failure, so no fault) never holds the request the other
    // would need: with two, at most two each. It held all three while the other had nothing to send, and the other's
    // next batches then waited out those answers (a p99 of 20 s instead of 0.14 s, scripts/destinations-scenarios.py).
    @Test func aSlowDestinationLeavesTheOtherARequest() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let slow = try Scenario.decode(from: Data(#"{"description": "slow answers", "rules": [{"network": {"latency_ms": 400}}]}"#.utf8))
        let ops = try startMock(scenario: slow); defer { try? ops.stop() }
        let product = try startMock(); defer { try? product.stop() }
        var configuration = Self.configuration(dir, ops: ops.baseURL, product: product.baseURL)
        configuration.batchSize = 10
        let engine = try OutboxEngine(configuration: configuration)
        for index in 0..<200 { try engine.trackEvent("viewed", properties: ["i": .int(Int64(index))]) }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(60)))
        engine.shutdown()
        #expect(Self.otlp(ops)?.eventsUnique == 200 && Self.posthog(product)?.eventsUnique == 200)
        #expect(ops.stats().maxInFlight == 2, "the slow destination used two requests, never the third")
    }
}
