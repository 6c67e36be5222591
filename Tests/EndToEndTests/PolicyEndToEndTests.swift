import Foundation
import Outbox
import OutboxMock
import OutboxTestSupport
import Testing

/// BEHAVIOUR H2–H4 end to end: two destinations from one store, one with a policy; the real engine, the real mock.
@Suite("Per-destination policies end to end (BEHAVIOUR H2–H4, D18)")
struct PolicyEndToEndTests {
    static func configuration(_ dir: TempDirectory, ops: String, product: String) -> Configuration {
        var configuration = SeveralDestinationsTests.configuration(dir, ops: ops, product: product)
        configuration.destinations[1].exclude = ["debug*", "$screen"]
        configuration.destinations[1].redact = ["email", "card_*"]
        configuration.destinations[1].sample = ["noisy": 0.5]
        return configuration
    }

    static func trackTheMix(_ engine: OutboxEngine, round: Int) throws {
        for index in 0..<20 {
            try engine.trackEvent("checkout", properties: ["email": "ada@example.com", "card_number": "card-4111-secret", "plan": "pro",
                                                           "i": .int(Int64(round * 100 + index))])
        }
        for index in 0..<10 { try engine.trackEvent("debug_tick", properties: ["i": .int(Int64(index))]) }
        for index in 0..<40 { try engine.trackEvent("noisy", properties: ["i": .int(Int64(index))]) }
        try engine.trackScreen(title: "Cart", properties: ["email": "ada@example.com"])
    }

    // BEHAVIOUR H2–H4, D17–D18: the destination without a policy receives everything; the one with a policy receives
    // neither the excluded logs nor the redacted properties, about half of the sampled events, and the same ones
    // after a restart (its sampling goes by the log id). Every log is accounted for per destination (tracked =
    // delivered + skipped), and leaves the store once both settled it, a skipped log included.
    @Test func aPolicyShapesOneDestinationAndNotTheOtherAcrossARestart() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let ops = try startMock(); defer { try? ops.stop() }
        let product = try startMock(); defer { try? product.stop() }
        var skipped = 0, delivered = 0
        // The first run: product is down, so its logs wait; ops receives everything.
        do {
            let engine = try OutboxEngine(configuration: Self.configuration(dir, ops: ops.baseURL, product: "http://127.0.0.1:1"))
            try Self.trackTheMix(engine, round: 0)
            await engine.persisted()
            #expect(await SeveralDestinationsTests.until(30) { SeveralDestinationsTests.otlp(ops)?.eventsUnique == 71 })
            let status = try await engine.status()
            skipped += status.store.destinations?["product"]?.skipped ?? -1
            delivered += status.store.destinations?["product"]?.delivered ?? -1
            engine.shutdown()
        }
        let engine = try OutboxEngine(configuration: Self.configuration(dir, ops: ops.baseURL, product: product.baseURL))
        try Self.trackTheMix(engine, round: 1)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(30)))
        let status = try await engine.status()
        engine.shutdown()
        let product1 = try #require(status.store.destinations?["product"])
        skipped += product1.skipped ?? -1
        delivered += product1.delivered ?? -1

        #expect(SeveralDestinationsTests.otlp(ops)?.eventsUnique == 142, "ops has no policy: every log, once")
        let events = vendorEvents(product, .posthog)
        let names = events.compactMap { $0["event"] as? String }
        #expect(Set(names) == ["checkout", "noisy"], "excluded: debug_tick and the screens — got \(Set(names))")
        #expect(names.filter { $0 == "checkout" }.count == 40)
        let noisy = names.filter { $0 == "noisy" }.count
        #expect(noisy > 20 && noisy < 60, "sampled at 0.5: \(noisy) of 80")
        let texts = product.vendorEvents().map(\.json)
        #expect(!texts.contains { $0.contains("ada@example.com") || $0.contains("card-4111-secret") }, "redacted for product (a bare 4111 also turns up inside ids and times)")
        #expect(texts.filter { $0.contains("\"plan\"") }.count == 40, "what is not redacted stays")
        #expect(delivered == events.count && skipped == 142 - events.count,
                "tracked = delivered + skipped for product: \(delivered) + \(skipped)")
        let report = try StoreReport.read(path: dir.file("store.sqlite"))
        #expect(report.pendingNormal + report.inFlight == 0, "a log skipped by one and delivered by the other leaves the store")

        // The same store and ids decide the same again: the noisy events product received are exactly those whose id
        // samples in (the ids ops received, through the same policy).
        let opsIDs = ops.vendorEvents().compactMap { event -> String? in
            event.json.contains("\"noisy\"") ? Self.logID(inOTLP: event.json) : nil
        }
        #expect(opsIDs.count == 80, "\(ops.vendorEvents().first?.json ?? "none")")
        let productIDs = Set(events.filter { $0["event"] as? String == "noisy" }.compactMap { $0["uuid"] as? String })
        let expected = Set(opsIDs.filter { id in
            guard let uuid = UUID(uuidString: id) else { return false }
            return samplesIn(uuid, rate: 0.5)
        })
        #expect(productIDs == expected, "sampling goes by the log id: the same decision in both runs")
    }

    // BEHAVIOUR H2, C7: a dispatch whose logs the policy all skips is answered (it has nothing left to wait for), and
    // nothing reaches the server.
    @Test func aDispatchOfOnlySkippedLogsIsAnswered() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.exclude = ["debug*"]
        configuration.dispatchInterval = .zero
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        for index in 0..<120 { try engine.trackEvent("debug_tick", properties: ["i": .int(Int64(index))]) }
        await engine.persisted()
        let result = await dispatchResult(engine)
        #expect(result == .good || result == .noData, "\(result)")
        let status = try await engine.status()
        #expect(status.skipped == 120 && status.delivered == 0 && status.pendingNormal == 0)
        #expect(server.stats().logsReceived == 0)
    }

    // BEHAVIOUR H, R8: `update` changes a running destination's policy: what is claimed afterwards is skipped by the
    // new one, and its redaction reaches the requests from then on.
    @Test func updateChangesAPolicyOnARunningEngine() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.dispatchInterval = .zero
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        try engine.trackEvent("debug_before", properties: ["email": "a@example.com"])
        #expect(await dispatchResult(engine) == .good)
        try engine.update { $0.exclude = ["debug*"]; $0.redact = ["email"] }
        for index in 0..<5 { try engine.trackEvent("debug_after", properties: ["i": .int(Int64(index))]) }
        try engine.trackEvent("kept", properties: ["email": "b@example.com", "plan": "pro"])
        await engine.persisted()
        #expect(await dispatchResult(engine) == .good)
        let status = try await engine.status()
        #expect(status.skipped == 5 && status.delivered == 2)
        let logs = server.uniqueLogs()
        #expect(logs.map(\.name) == ["debug_before", "kept"])
        #expect(logs.first?.json.contains("a@example.com") == true, "sent before the update, whole")
        #expect(logs.last.map { !$0.json.contains("b@example.com") && $0.json.contains("plan") } == true)
    }

    /// The log id an OTLP record carries (its `log.record.uid` attribute), from the record as the mock renders it.
    static func logID(inOTLP json: String) -> String? {
        let pattern = #"log\.record\.uid"\s*,\s*"value"\s*:\s*\{\s*"stringValue"\s*:\s*"([0-9a-f-]{36})""#
        guard let regex = try? NSRegularExpression(pattern: pattern),
              let match = regex.firstMatch(in: json, range: NSRange(json.startIndex..., in: json)),
              let range = Range(match.range(at: 1), in: json) else { return nil }
        return String(json[range])
    }

    // BEHAVIOUR H2, D18: `outbox emit --to` with a policy item: the JSON counts the skipped per destination and in
    // total, and tracked = delivered + skipped for the destination with the policy.
    @Test func emitCountsWhatAPolicySkipped() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let ops = try startMock(); defer { try? ops.stop() }
        let product = try startMock(); defer { try? product.stop() }
        let key = dir.file("key")
        try "phc_test\n".write(toFile: key, atomically: true, encoding: .utf8)
        let result = try await runOutboxAwaiting([
            "emit", "--store", dir.file(), "--count", "60", "--critical-every", "3", "--wait-delivered", "--timeout", "30",
            "--to", "ops=otlp,endpoint=\(ops.baseURL)",
            "--to", "product=posthog,endpoint=\(product.baseURL),api-key-file=\(key),exclude=emit-critical,redact=i",
        ] + OTLPDestinationTests.fast, in: dir)
        #expect(result.status == 0, "\(result.errors)")
        let summary = try #require(jsonLines(result.output).first)
        let destinations = try #require(summary["destinations"] as? [String: [String: Any]])
        #expect(destinations["product"]?["skipped"] as? Int == 20 && destinations["product"]?["delivered"] as? Int == 40)
        #expect(destinations["ops"]?["skipped"] as? Int == 0 && destinations["ops"]?["delivered"] as? Int == 60)
        #expect(summary["skipped"] as? Int == 20)
        #expect(vendorEvents(product, .posthog).allSatisfy { ($0["properties"] as? [String: Any])?["i"] == nil })
        #expect(vendorEvents(product, .posthog).count == 40)
    }
}

/// BEHAVIOUR H4's decision for a log id, computed here from its published definition (splitmix64's finaliser over
/// the id's two halves, the top 53 bits as a fraction) rather than through the engine's code.
func samplesIn(_ uuid: UUID, rate: Double) -> Bool {
    let bytes = withUnsafeBytes(of: uuid.uuid) { Array($0) }
    let high = bytes[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    let low = bytes[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    var z = high ^ (low &* 0x9E37_79B9_7F4A_7C15)
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    z ^= z >> 31
    return Double(z >> 11) * 0x1p-53 < rate
}
