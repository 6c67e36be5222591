import Foundation
import Testing
@testable import Outbox

/// A wire for the seam's tests: a path and a body of its own, and small limits.
private struct TestWire: DeliveryWire {
    var destination: Destination { .appCenter }
    var installID = UUID()
    var path = "/test"
    var maxRequestBytes: Int? = nil
    var maxLogBytes: Int? = nil

    func request(endpoint: String, headers: [HeaderField]) -> DeliveryDriver.RequestSettings {
        .init(url: endpoint + path, headers: [("Content-Type", "application/x-test")] + commonHeaders(headers))
    }

    /// `[i,i,…]` of the logs' `i`, each padded by its payload's length.
    func encode(_ logs: [StoredLog], contexts: [Int64: [UInt8]], times: WireTimes) -> [UInt8] {
        Array(("[" + logs.map { String(decoding: $0.payload, as: UTF8.self) }.joined(separator: ",") + "]").utf8)
    }
}

/// The destination seam (SPEC D1, D2, D6, R8): what the driver asks of a wire, with fakes in memory.
@Suite("Destination seam (SPEC D1, D6, R8)")
struct DestinationSeamTests {
    // SPEC D6: a log over the wire's per-log limit is dead-lettered before any request, with the limit in its reason;
    // its neighbours go.
    @Test func aLogOverTheWiresLimitIsDeadLetteredWithoutARequestAndItsNeighboursGo() {
        let rig = DeliveryRig(wire: TestWire(maxLogBytes: 20)) { $0.batchSize = 8 }
        rig.track(3)
        rig.queue.addRaw(Array("{\"i\":99,\"pad\":\"\(String(repeating: "x", count: 40))\"}".utf8))
        rig.track(3)
        rig.driver.dispatch(completion: nil)
        rig.sender.answerAll(200)
        #expect(rig.queue.deadLetters.count == 1)
        #expect(rig.queue.deadLetters.first?.status == 413)
        #expect(rig.queue.deadLetters.first?.reason.contains("limit of 20 bytes per log") == true)
        #expect(rig.sender.all.allSatisfy { !$0.seqs.contains(99) }, "the oversized log never went")
        #expect(Set(rig.sender.all.flatMap(\.seqs)) == [1, 2, 3, 5, 6, 7])
        #expect(rig.queue.stored == 0)
    }

    // SPEC D6: a batch whose body is over the wire's request limit is cut until each part fits; nothing is lost.
    @Test func aBatchOverTheRequestLimitIsCutUntilEachPartFits() {
        let rig = DeliveryRig(wire: TestWire(maxRequestBytes: 40)) { $0.batchSize = 10 }
        rig.track(10)
        rig.driver.dispatch(completion: nil)
        rig.sender.answerAll(200)
        #expect(rig.queue.deadLetters.isEmpty)
        #expect(rig.sender.all.allSatisfy { $0.request.body.count <= 40 })
        #expect(Set(rig.sender.all.flatMap(\.seqs)) == Set(1...10))
        #expect(rig.queue.stored == 0)
    }

    // SPEC R8, D2: a batch waiting for its retry is encoded again by the destination it is sent to next.
    @Test func aBatchWaitingForItsRetryIsEncodedAgainForTheNewWire() {
        let rig = DeliveryRig()
        rig.track(2)
        rig.driver.dispatch(completion: nil)
        #expect(rig.sender.open.first?.request.url.hasSuffix("/logs?api-version=1.0.0") == true)
        rig.sender.answer(503)
        let wire = TestWire(path: "/elsewhere")
        rig.driver.reconfigure(wire.request(endpoint: "http://127.0.0.1:9", headers: []), wire: wire)
        rig.advance(ms: 60_000)
        let resent = rig.sender.open.first
        #expect(resent?.request.url == "http://127.0.0.1:9/elsewhere")
        #expect(resent?.request.headers.contains { $0.0 == "Content-Type" && $0.1 == "application/x-test" } == true)
        #expect(resent?.seqs == [1, 2])
    }

    // SPEC D1: the user's headers go with every request, after Install-ID; App Center's own stay first.
    @Test func theUsersHeadersFollowTheWiresOwn() {
        let id = UUID()
        let request = AppCenterWire(appSecret: "s", installID: id).request(endpoint: "http://h/",
                                                                          headers: [HeaderField("X-Tenant", "t1")])
        #expect(request.url == "http://h/logs?api-version=1.0.0")
        #expect(request.headers.map(\.0) == ["Content-Type", "App-Secret", "Install-ID", "X-Tenant"])
        #expect(request.headers.last?.1 == "t1")
    }

    // SPEC D1: each wire declares the headers it sets, and sets no other of its own: a user header of one of those
    // names would go out twice.
    @Test func eachWireSetsOnlyTheHeadersItDeclares() {
        for destination in Destination.allCases {
            var configuration = Configuration(storePath: "/tmp/x")
            configuration.destination = destination
            configuration.apiKey = "k"
            configuration.writeKey = "k"
            let wire = configuration.wire(installID: UUID())
            let declared = Set(destination.wireHeaders.map { $0.lowercased() })
            let sent = wire.request(endpoint: "http://h", headers: []).headers.map { $0.0.lowercased() }
            #expect(Set(sent).isSubset(of: declared), "\(destination) sends \(sent), declares \(declared)")
            // The driver adds Content-Encoding to compressed bodies on every wire.
            #expect(declared.contains("content-encoding"), "\(destination)")
        }
        #expect(Destination.segment.wireHeaders.contains("Authorization"))
        #expect(!Destination.otlp.wireHeaders.contains("Authorization"))
    }

    // SPEC D1: a user header the destination's wire sets itself is refused at configuration, in any case, naming the
    // header and the destination; the same header is accepted for a destination whose wire does not set it (OTLP
    // collectors are commonly behind an Authorization).
    @Test func aHeaderTheWireSetsIsRefusedForThatWireOnly() throws {
        for name in ["Authorization", "authorization", "AUTHORIZATION"] {
            var configuration = Configuration(storePath: "/tmp/x")
            configuration.endpoint = "http://127.0.0.1:9"
            configuration.destination = .segment
            configuration.writeKey = "wk"
            configuration.headers = [HeaderField(name, "Bearer hunter2")]
            do {
                try configuration.validate()
                Issue.record("segment accepted a user \(name) header")
            } catch {
                #expect("\(error)".contains(name), "\(error)")
                #expect("\(error)".contains("segment"), "\(error)")
                #expect(!"\(error)".contains("hunter2"))
            }
            configuration.destination = .otlp
            try configuration.validate()
            configuration.destination = .posthog
            configuration.apiKey = "k"
            try configuration.validate()
        }
        // App Center's own credential header is refused for App Center, accepted for a wire that does not set it.
        var configuration = Configuration(storePath: "/tmp/x")
        configuration.endpoint = "http://127.0.0.1:9"
        configuration.headers = [HeaderField("app-secret", "x")]
        #expect(throws: OutboxError.self) { try configuration.validate() }
        configuration.destination = .otlp
        try configuration.validate()
        // What the transport or every wire sets stays refused everywhere, even before a destination is known.
        #expect(throws: OutboxError.self) { try HeaderField(line: "Content-Length: 3") }
        #expect(throws: OutboxError.self) { try HeaderField(line: "install-id: 3") }
        _ = try HeaderField(line: "Authorization: Bearer t")
    }

    // SPEC D1: an endpoint that already ends in the wire's path is the URL itself (OpenTelemetry's convention for
    // OTEL_EXPORTER_OTLP_LOGS_ENDPOINT); a base URL gets the path appended.
    @Test func anEndpointEndingInTheWiresPathIsUsedAsItIs() {
        let cases: [(Destination, String, String)] = [
            (.otlp, "http://h:4318", "http://h:4318/v1/logs"),
            (.otlp, "http://h:4318/", "http://h:4318/v1/logs"),
            (.otlp, "http://h:4318/v1/logs", "http://h:4318/v1/logs"),
            (.otlp, "http://h:4318/tenant/v1/logs", "http://h:4318/tenant/v1/logs"),
            (.otlp, "http://h:4318/v1/logs/", "http://h:4318/v1/logs/"),
            (.otlp, "http://h:4318/mylogs", "http://h:4318/mylogs/v1/logs"),
            (.posthog, "https://us.i.posthog.com", "https://us.i.posthog.com/batch/"),
            (.posthog, "https://us.i.posthog.com/batch/", "https://us.i.posthog.com/batch/"),
            (.posthog, "https://us.i.posthog.com/batch", "https://us.i.posthog.com/batch"),
            (.segment, "https://api.segment.io", "https://api.segment.io/v1/batch"),
            (.segment, "https://api.segment.io/v1/batch", "https://api.segment.io/v1/batch"),
            (.appCenter, "https://in.appcenter.ms", "https://in.appcenter.ms/logs?api-version=1.0.0"),
            (.appCenter, "https://in.appcenter.ms/logs?api-version=1.0.0", "https://in.appcenter.ms/logs?api-version=1.0.0"),
            (.appCenter, "https://in.appcenter.ms/logs", "https://in.appcenter.ms/logs?api-version=1.0.0"),
            (.appCenter, "https://proxy.example/catalogs", "https://proxy.example/catalogs/logs?api-version=1.0.0"),
        ]
        for (destination, endpoint, expected) in cases {
            var configuration = Configuration(storePath: "/tmp/x")
            configuration.destination = destination
            let url = configuration.wire(installID: UUID()).request(endpoint: endpoint, headers: []).url
            #expect(url == expected, "\(destination) \(endpoint)")
        }
    }

    // SPEC R1: a stop names the URL actually requested, its userinfo and secret query values masked.
    @Test func aStopNamesTheURLRequestedWithItsCredentialsMasked() {
        let rig = DeliveryRig(wire: OTLPWire(encoding: .protobuf, installID: UUID()))
        rig.driver.reconfigure(OTLPWire(encoding: .protobuf, installID: UUID()).request(
            endpoint: "http://user:hunter2@127.0.0.1:9/v1/logs?token=hunter3&api-version=1",
            headers: []))
        rig.track(3)
        rig.driver.dispatch(completion: nil)
        rig.sender.answer(404, body: "no such path")
        let reason = rig.driver.disabledReason ?? ""
        #expect(reason.contains("http://***@127.0.0.1:9/v1/logs?token=***&api-version=1"), "\(reason)")
        #expect(reason.contains("no such path"), "\(reason)")
        #expect(reason.hasPrefix("server answered 404"), "\(reason)")
        #expect(!reason.contains("hunter"), "\(reason)")
    }

    // Bad input is refused by name at configuration time: an unknown destination lists the known ones; a header
    // without a colon, with a bad name or a reserved one is named — never with its value.
    @Test func badDestinationsAndHeadersAreRefusedByName() throws {
        #expect(throws: OutboxError.invalidConfiguration("unknown destination 'kafka': the destinations are appcenter, otlp, posthog, segment, amplitude, mixpanel, sensors, ga4")) {
            try Destination(name: "kafka")
        }
        #expect(try Destination(name: "appcenter") == .appCenter)
        do {
            _ = try HeaderField(line: "Bearer hunter2")
            Issue.record("a header without a colon was accepted")
        } catch {
            #expect("\(error)".contains("no colon"))
            #expect(!"\(error)".contains("hunter2"))
        }
        let parsed = try HeaderField(line: "  X-Tenant :  acme ")
        #expect(parsed == HeaderField("X-Tenant", "acme"))
        for (header, named) in [(HeaderField("Bad Name", "v"), "HTTP token"), (HeaderField("Content-Type", "x"), "set by the engine"),
                                (HeaderField("X-A", "a\r\nInjected: 1"), "control character")] {
            var configuration = Configuration(storePath: "/tmp/x")
            configuration.headers = [header]
            do {
                try configuration.validate()
                Issue.record("accepted \(header)")
            } catch {
                #expect("\(error)".contains(named), "\(error)")
                #expect(!"\(error)".contains("Injected"))
            }
        }
    }
}
