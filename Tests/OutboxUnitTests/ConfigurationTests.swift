import Testing
@testable import Outbox

@Suite("Configuration (bounds named in errors)")
struct ConfigurationTests {
    @Test func defaultsAreTheSpecs() throws {
        let configuration = Configuration(storePath: "/tmp/x")
        try configuration.validate()
        #expect(configuration.maxStorageSize == 10 * 1024 * 1024)  // SPEC S2
        #expect(configuration.maxLogCount == nil)                    // SPEC S5
        #expect(configuration.maxLogAge == .seconds(25 * 24 * 3600)) // SPEC S4
        #expect(configuration.maxDistinctEventNames == 200)          // SPEC T4
        #expect(configuration.groupCommitWindow == .milliseconds(50)) // SPEC T5
    }

    @Test func outOfRangeValuesNameTheFieldTheBoundsAndTheValue() {
        var configuration = Configuration(storePath: "/tmp/x")
        configuration.maxStorageSize = 1000
        #expect(throws: OutboxError.invalidConfiguration("maxStorageSize must be between 24576 bytes and 1099511627776 bytes, got 1000 bytes")) {
            try configuration.validate()
        }
        configuration = Configuration(storePath: "/tmp/x")
        configuration.maxLogCount = 4001
        #expect(throws: OutboxError.invalidConfiguration("maxLogCount must be between 1 and 4000, got 4001")) { try configuration.validate() }
        configuration.maxLogCount = 0
        #expect(throws: OutboxError.self) { try configuration.validate() }
        configuration = Configuration(storePath: "")
        #expect(throws: OutboxError.self) { try configuration.validate() }
        configuration = Configuration(storePath: "/tmp/x")
        configuration.groupCommitWindow = .seconds(2)
        #expect(throws: OutboxError.invalidConfiguration("groupCommitWindow must be between 1 ms and 1000 ms, got 2000 ms")) { try configuration.validate() }
    }

    // A duration too large for milliseconds in an Int64 is named as out of range, not an overflow trap.
    @Test func hugeDurationsAreOutOfRangeNotATrap() {
        var configuration = Configuration(storePath: "/tmp/x")
        configuration.transmissionInterval = .seconds(Int64.max)
        #expect(throws: OutboxError.invalidConfiguration("transmissionInterval must be between 6000 ms and 86400000 ms, got 9223372036854775807 ms")) {
            try configuration.validate()
        }
        configuration = Configuration(storePath: "/tmp/x")
        configuration.requestTimeout = .seconds(Int64.min)
        #expect(throws: OutboxError.self) { try configuration.validate() }
        #expect(Duration.seconds(Int64.max).milliseconds == Int64.max)
        #expect(Duration.seconds(Int64.min).milliseconds == Int64.min)
        #expect(Duration.milliseconds(-1500).milliseconds == -1500)
    }

    @Test func onlyTheTestingOptionAllowsValuesBelowTheBounds() throws {
        var configuration = Configuration(storePath: "/tmp/x")
        configuration.maxLogAge = .seconds(1)
        configuration.transmissionInterval = .milliseconds(50)
        configuration.criticalTransmissionInterval = .milliseconds(20)
        #expect(throws: OutboxError.self) { try configuration.validate() }
        configuration.testingAllowsValuesBelowBounds = true
        try configuration.validate()
    }
}

/// The configuration's one table (ConfigurationSchema.swift) against the struct, and the bounds it carries.
@Suite("Configuration schema (SPEC R8, X3a)")
struct ConfigurationSchemaTests {
    // Every stored property has a row, in declaration order: a field added to the struct and forgotten in the table
    // would otherwise be accepted by `update` and applied by nothing.
    @Test func theSchemaNamesEveryStoredProperty() {
        // SPEC H1: the hook's row is named after its public face, `beforeStore`, over the box it is stored in.
        let labels = Mirror(reflecting: Configuration(storePath: "/tmp/x")).children.compactMap(\.label)
            .map { $0 == "beforeStoreHook" ? "beforeStore" : $0 }
        #expect(labels == Configuration.schema.map(\.name))
        #expect(Set(Configuration.schema.compactMap(\.cKey)).count == Configuration.schema.compactMap(\.cKey).count)
    }

    // SPEC R8: a change to any field fixed at start is named; exclusiveStoreLock was once accepted and ignored.
    @Test func everyFixedFieldIsNamedWhenChanged() {
        let base = Configuration(storePath: "/tmp/x")
        var changed = base
        changed.exclusiveStoreLock = true
        changed.batchSize = 10
        changed.clockSkewThreshold = .seconds(5)
        #expect(changed.fixedFieldsChanged(from: base) == ["exclusiveStoreLock", "batchSize", "clockSkewThreshold"])
        var runtime = base
        runtime.endpoint = "http://127.0.0.1:9"
        runtime.appSecret = "s"
        runtime.requestTimeout = .seconds(5)
        #expect(runtime.fixedFieldsChanged(from: base).isEmpty)
        #expect(Configuration.changeableFields == ["storeKey", "endpoint", "appSecret", "destination", "apiKey", "writeKey", "segmentProfile", "otlpEncoding",
                                                  "projectToken", "serviceAccountUser", "serviceAccountSecret", "projectId", "measurementId", "apiSecret", "headers", "include", "exclude", "redact", "sample", "destinations", "requestTimeout", "caFile",
                                                  "clientCertificate", "clientKey", "pinnedPublicKey", "beforeStore"])
    }

    // SPEC X3a: an endpoint must be an absolute http(s) URL with a host (it was accepted when it merely began with
    // http://, and then retried for ever).
    @Test(arguments: ["http://", "http://exa mple.com", "https://", "ftp://example.com", "example.com", "http:/x",
                      " http://example.com", "http://example.com\n"])
    func anEndpointThatIsNotAnAbsoluteHTTPURLIsRefused(endpoint: String) {
        var configuration = Configuration(storePath: "/tmp/x")
        configuration.endpoint = endpoint
        #expect(throws: OutboxError.self) { try configuration.validate() }
        #expect(Configuration.endpointProblem(endpoint) != nil)
    }

    @Test(arguments: ["http://127.0.0.1:9", "https://ingest.example.com/base", "HTTP://[::1]:8080", "http://localhost"])
    func anAbsoluteHTTPURLIsAccepted(endpoint: String) throws {
        var configuration = Configuration(storePath: "/tmp/x")
        configuration.endpoint = endpoint
        try configuration.validate()
    }

    // clockSkewThreshold and dispatchInterval had no bounds; dispatchInterval ≤ 0 stays manual dispatch (SPEC C6).
    @Test func clockSkewThresholdAndDispatchIntervalAreBounded() throws {
        var configuration = Configuration(storePath: "/tmp/x")
        configuration.clockSkewThreshold = .milliseconds(-1)
        #expect(throws: OutboxError.invalidConfiguration("clockSkewThreshold must be between 0 ms and 86400000 ms, got -1 ms")) {
            try configuration.validate()
        }
        configuration = Configuration(storePath: "/tmp/x")
        configuration.dispatchInterval = .seconds(2 * 86_400)
        #expect(throws: OutboxError.invalidConfiguration("dispatchInterval must be between 1000 ms and 86400000 ms, got 172800000 ms")) {
            try configuration.validate()
        }
        configuration.dispatchInterval = .milliseconds(10)
        #expect(throws: OutboxError.self) { try configuration.validate() }
        configuration.dispatchInterval = .zero
        try configuration.validate()
        configuration.dispatchInterval = .seconds(-5)
        try configuration.validate()
    }
}
