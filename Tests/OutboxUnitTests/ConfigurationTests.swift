import Testing
@testable import Outbox

@Suite("Configuration (STYLE 6)")
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

    // STYLE 6: a duration too large for milliseconds in an Int64 is named as out of range, not an overflow trap.
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
