import Foundation
import Testing
@testable import Outbox

/// The destinations' specs and the configuration's table drive what used to be written once per place (SPEC D1, E3,
/// R8): validation, the C JSON, the reserved headers and `update`'s reconfiguration read them.
@Suite("Destination specs and the configuration table (SPEC D1, E3, R8)")
struct ConfigurationTableTests {
    /// Every destination with every Segment profile and OTLP encoding.
    static let variants: [(Destination, SegmentProfile, OTLPEncoding)] = Destination.allCases.flatMap { destination in
        SegmentProfile.allCases.flatMap { profile in OTLPEncoding.allCases.map { (destination, profile, $0) } }
    }

    static func configured(_ destination: Destination, _ profile: SegmentProfile = .segment,
                           _ encoding: OTLPEncoding = .protobuf) -> Configuration {
        var configuration = testConfiguration("/tmp/outbox-table.sqlite")
        configuration.endpoint = destination.spec.endpointAtBase.map { $0("http://127.0.0.1:9") } ?? "http://127.0.0.1:9"
        configuration.destination = destination
        if destination == .ga4 { configuration.measurementId = "G-TEST1" }
        configuration.segmentProfile = profile
        configuration.otlpEncoding = encoding
        if let credential = destination.spec.credential { configuration[keyPath: credential.keyPath] = "k" }
        return configuration
    }

    /// The fields two destinations own: PostHog's and Amplitude's project API key (SPEC D13).
    static let sharedFields: [String: Set<Destination>] = ["apiKey": [.posthog, .amplitude]]

    // SPEC D1: each destination's spec is its own (the case it describes), its fields are rows of the table with a
    // C key, and no field belongs to two destinations but those `sharedFields` names.
    @Test func theSpecsDescribeTheirDestinationsAndOwnDistinctFields() {
        var owners: [String: Destination] = [:]
        for destination in Destination.allCases {
            #expect(destination.spec.destination == destination)
            #expect((try? Destination(name: destination.name)) == destination)
            for field in destination.spec.fields {
                #expect(Configuration.schema.first { $0.name == field }?.cKey != nil, "\(destination) owns \(field)")
                if Self.sharedFields[field]?.contains(destination) != true {
                    #expect(owners.updateValue(destination, forKey: field) == nil, "\(field) owned twice")
                }
                #expect(Configuration.schema.first { $0.name == field }?.applies.contains(.wire) == true, "\(field)")
            }
            if let credential = destination.spec.credential { #expect(destination.spec.fields.contains(credential.field)) }
        }
    }

    // SPEC D1: every variant validates with its credential and makes the wire of its destination; without the
    // credential, the spec's message names it; a header the wire sets is refused for it, naming the destination.
    @Test(arguments: variants.indices)
    func everyVariantValidatesFromItsSpec(index: Int) throws {
        let (destination, profile, encoding) = Self.variants[index]
        let configuration = Self.configured(destination, profile, encoding)
        try configuration.validate()
        #expect(configuration.wire(installID: UUID()).destination == destination)
        if let credential = destination.spec.credential, let missing = credential.missing {
            var without = configuration
            without[keyPath: credential.keyPath] = ""
            #expect(throws: OutboxError.invalidConfiguration(missing)) { try without.validate() }
            #expect(missing.contains(credential.field) && missing.contains(destination.name))
        }
        for header in destination.spec.headers {
            var with = configuration
            with.headers = [HeaderField(header.uppercased(), "x")]
            #expect(throws: OutboxError.self) { try with.validate() }
        }
        // A header only another destination's wire sets is this one's to give.
        for other in Destination.allCases where other != destination {
            for header in other.spec.headers where !destination.spec.headers.contains(header) {
                var with = configuration
                with.headers = [HeaderField(header, "x")]
                try with.validate()
            }
        }
    }

    /// A sample value for every C key: adding a row with a C key and no sample fails `everyRowDecodesValidatesAndRoundTrips`.
    static func samples(_ dir: TempDirectory) throws -> [String: JSONValue] {
        let keyFile = dir.file("key.hex")
        try (String(repeating: "ab", count: 32) + "\n").write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        return [
            "storePath": .string(dir.file("other.sqlite")), "maxStorageSize": .integer(1 << 20), "maxLogCount": .integer(100),
            "maxLogAgeMs": .integer(7_200_000), "maxDistinctEventNames": .integer(50), "groupCommitWindowMs": .integer(20),
            "intakeCapacity": .integer(5000), "storeKeyFile": .string(keyFile), "endpoint": .string("http://127.0.0.1:10"),
            "appSecret": .string("s2"), "destination": .string("otlp"), "apiKey": .string("phc_2"), "writeKey": .string("wk2"),
            "segmentProfile": .string("rudderstack"), "otlpEncoding": .string("json"),
            "projectToken": .string("t2"), "serviceAccountUser": .string("u2"), "serviceAccountSecret": .string("s2"),
            "projectId": .integer(2),
            "measurementId": .string("G-ABC123"), "apiSecret": .string("s3"),
            "headers": .object([(key: "X-Tenant", value: .string("t1"))]), "batchSize": .integer(20),
            "transmissionIntervalMs": .integer(7000), "criticalTransmissionIntervalMs": .integer(2000),
            "retryIntervalsMs": .array([.integer(2000), .integer(4000)]), "maxRetryAfterMs": .integer(60_000),
            "probeIntervalMs": .integer(120_000), "recoveryProbe": .object([(key: "initialIntervalMs", value: .integer(500)),
                                                                           (key: "maxIntervalMs", value: .integer(5000))]),
            "dispatchIntervalMs": .integer(2000), "requestTimeoutMs": .integer(5000), "caFile": .string(keyFile),
            "clientCertificate": .string(dir.file("cert.pem")), "clientKey": .string(dir.file("key.pem")),
            "pinnedPublicKey": .string("sha256//" + Data(repeating: 7, count: 32).base64EncodedString()),
            "bodyCompression": .string("zlib:6"), "clockSkewThresholdMs": .integer(2000), "watchesNetwork": .bool(false),
            "appVersion": .string("2.0"), "appBuild": .string("42"), "appNamespace": .string("com.example"),
            "sessionTimeoutMs": .integer(30_000), "sessionTracking": .string("automatic"), "tracksAppLifecycle": .bool(true),
            "testingAllowsValuesBelowBounds": .bool(false),
            "include": .array([.string("checkout*"), .string("$identify")]), "exclude": .array([.string("debug*")]),
            "redact": .array([.string("email")]), "sample": .object([(key: "noisy*", value: .double(0.25))]),
            "destinations": .array([
                .object([(key: "name", value: .string("ops")), (key: "destination", value: .string("otlp")),
                         (key: "endpoint", value: .string("http://127.0.0.1:10"))]),
                .object([(key: "name", value: .string("product")), (key: "destination", value: .string("posthog")),
                         (key: "endpoint", value: .string("http://127.0.0.1:11")), (key: "apiKey", value: .string("phc_3"))]),
            ]),
        ]
    }

    /// The client certificate and key are a pair checked together (TLSIdentityTests): alone, a sample cannot validate.
    /// A list of destinations beside the single destination's fields is refused (D15): it validates on its own, in
    /// NamedDestinationTests.
    static let validatedApart: Set<String> = ["clientCertificate", "clientKey", "destinations"]

    // SPEC E3: every row with a C key decodes a sample value from C JSON, changes the field, validates, and encodes
    // back to JSON that decodes to the same value.
    @Test func everyRowDecodesValidatesAndRoundTrips() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let samples = try Self.samples(dir)
        for row in Configuration.schema {
            guard let key = row.cKey else {
                #expect(row.decode == nil, "\(row.name) decodes without a C key")
                continue
            }
            let sample = try #require(samples[key], "no sample for C key \(key)")
            var base = Self.configured(.appCenter)
            base.testingAllowsValuesBelowBounds = row.name == "testingAllowsValuesBelowBounds"
            var decoded = base
            #expect(try decoded.decode(key, sample), "\(key)")
            #expect(row.differs(decoded, base), "\(key): the sample changed nothing")
            if !Self.validatedApart.contains(row.name) { try decoded.validate() }
            if let encode = row.encode {
                var again = base
                _ = try again.decode(key, encode(decoded))
                #expect(!row.differs(again, decoded), "\(key) does not round-trip")
            }
            #expect(row.changeable == !row.applies.isEmpty)
        }
        var unknown = Configuration(storePath: "x")
        #expect(try unknown.decode("kafka", .null) == false)
    }

    // SPEC E3: a value of the wrong JSON type is refused naming its key, as the C API always did.
    @Test func aWrongTypeIsRefusedNamingTheKey() {
        var configuration = Configuration(storePath: "x")
        do {
            _ = try configuration.decode("batchSize", .string("many"))
            Issue.record("a string batch size was accepted")
        } catch {
            #expect(error.wrongType)
            #expect(error.message == "configuration key 'batchSize' must be an integer, got a string")
        }
        do {
            _ = try configuration.decode("destination", .string("kafka"))
            Issue.record("an unknown destination was accepted")
        } catch {
            #expect(!error.wrongType)
            #expect(error.message.contains("unknown destination 'kafka': the destinations are appcenter, otlp, posthog, segment, amplitude, mixpanel"))
        }
    }

    static let serviceAccountFields: Set<String> = ["serviceAccountUser", "serviceAccountSecret", "projectId"]

    // SPEC R8: every changeable row has a target, and an update of it alone on a running engine reaches that target:
    // the wire's request or body changes, a new transport is made, the reachability hears the endpoint, the key rotates.
    @Test func everyChangeableRowReachesItsTargetOnUpdate() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let samples = try Self.samples(dir)
        // SPEC H1: the hook has no C key and nothing on the loop to reach (BeforeStoreTests updates it).
        for row in Configuration.schema where row.changeable && !Self.validatedApart.contains(row.name) && row.name != "beforeStore" {
            let key = try #require(row.cKey)
            // The field's own destination, where a change shows on the wire; the destination itself from PostHog's.
            let owner = row.name == "destination" ? .posthog : Destination.allCases.first { $0.spec.fields.contains(row.name) } ?? .appCenter
            var base = Self.configured(owner)
            if Self.serviceAccountFields.contains(row.name) {
                // Mixpanel's service account is whole or absent (SPEC D14): its fields change one at a time from one.
                (base.projectToken, base.serviceAccountUser, base.serviceAccountSecret, base.projectId) = ("", "u", "s", 1)
            }
            base.storePath = dir.file("\(row.name).sqlite")
            base.dispatchInterval = .zero
            base.appSecret = "s"
            let engine = try OutboxEngine(configuration: base)
            defer { engine.shutdown() }
            try engine.update { configuration in _ = try configuration.decode(key, samples[key] ?? .null) }
            var updated = base
            _ = try updated.decode(key, samples[key] ?? .null)
            let applied = try #require(try await CallerPayloadsTests.onLoop(engine) { $0.lastReconfiguration })
            #expect(applied.targets == row.applies, "\(row.name)")
            if row.applies.contains(.wire) {
                let before = base.wire(installID: engine.installID), after = try #require(applied.wire, "\(row.name)")
                let log = Self.sampleLog()
                let old = (before.request(endpoint: base.endpoint ?? "", headers: base.headers), before.encode([log], contexts: [:], times: Self.times))
                let new = (after.request(endpoint: updated.endpoint ?? "", headers: updated.headers), after.encode([log], contexts: [:], times: Self.times))
                #expect(old.0.url != new.0.url || old.0.headers.map { "\($0)" } != new.0.headers.map { "\($0)" } || old.1 != new.1,
                        "\(row.name): the wire did not change")
            }
            if row.applies.contains(.transport) { #expect(applied.transportReplaced, "\(row.name)") }
            if row.applies.contains(.reachability) { #expect(applied.reachabilityEndpoint == updated.endpoint, "\(row.name)") }
            if row.applies.contains(.storeKey) { #expect(applied.storeKeyRotated, "\(row.name)") }
        }
    }

    static var times: WireTimes { WireTimes(sentAtMs: 1_790_000_100_000, timestamp: { $0.wallMs }) }

    /// One tracked event with a session, as the store keeps it.
    static func sampleLog() -> StoredLog {
        let stamp = Stamp.bytes(sid: UUIDBytes(high: 0x0193_0000_0000_7000, low: 0x8000_0000_0000_0001), userID: nil)
        let body = (try? EventValidator.validate(name: "table", properties: ["n": .int(1)]).body) ?? []
        return .made(.event, id: UUIDBytes(high: 1, low: 0x8000_0000_0000_0001), stamp: stamp, body: body, seq: 1,
                     wallMs: 1_790_000_000_000)
    }
}
