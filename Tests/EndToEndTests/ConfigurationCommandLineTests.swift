import Foundation
import Testing
@testable import Outbox
@testable import outbox

/// SPEC E3, X3: a configuration row set by its command-line flag ends as the same field as the same value given in
/// C JSON: the command line and the C configuration are two spellings of the one table (`Configuration.schema`).
@Suite("Configuration rows through the command line and C JSON (SPEC E3, X3)")
struct ConfigurationCommandLineTests {
    /// The rows `outbox emit` sets: the flags that set each, and the same value in C JSON. A row listed here that the
    /// command line no longer sets as C does fails.
    static let rows: [(field: String, flags: [String], json: JSONValue)] = [
        ("maxStorageSize", ["--max-storage-bytes", "1048576"], .integer(1 << 20)),
        ("batchSize", ["--batch-size", "42"], .integer(42)),
        ("transmissionInterval", ["--interval", "7"], .integer(7000)),
        ("retryIntervals", ["--retry-intervals", "2,4"], .array([.integer(2000), .integer(4000)])),
        ("recoveryProbe", ["--no-recovery-probe"], .null),
        ("bodyCompression", ["--compression", "zlib:6"], .string("zlib:6")),
        ("endpoint", [], .string("http://127.0.0.1:9")),
        ("appSecret", [], .string("k")),
        ("destination", ["--destination", "otlp"], .string("otlp")),
        ("otlpEncoding", ["--destination", "otlp", "--otlp-encoding", "json"], .string("json")),
        ("apiKey", ["--destination", "posthog", "--api-key", "phc_2"], .string("phc_2")),
        ("writeKey", ["--destination", "segment", "--write-key", "wk2"], .string("wk2")),
        ("segmentProfile", ["--destination", "segment", "--write-key", "wk2", "--segment-profile", "rudderstack"],
         .string("rudderstack")),
        ("headers", ["--header", "X-Tenant: t1"], .object([(key: "X-Tenant", value: .string("t1"))])),
        ("pinnedPublicKey", ["--pinned-public-key", "sha256//" + Data(repeating: 7, count: 32).base64EncodedString()],
         .string("sha256//" + Data(repeating: 7, count: 32).base64EncodedString())),
        ("appVersion", ["--app-version", "2.0"], .string("2.0")),
        ("appBuild", ["--app-build", "42"], .string("42")),
        ("appNamespace", ["--app-namespace", "com.example"], .string("com.example")),
    ]

    @Test(arguments: rows.indices)
    func aRowSetByItsFlagIsTheSameAsInCJSON(index: Int) throws {
        let (field, flags, json) = Self.rows[index]
        let row = try #require(Configuration.schema.first { $0.name == field }, "no row \(field)")
        let key = try #require(row.cKey, "\(field) has no C key")
        let store = "/tmp/outbox-cli-rows.sqlite"
        let emit = try Emit.parse(["--store", store, "--count", "1", "--endpoint", "http://127.0.0.1:9", "--app-secret", "k"]
                                  + flags)
        let viaCommandLine = try emit.engineConfiguration()
        var viaC = Configuration(storePath: store)
        #expect(try viaC.decode(key, json), "\(key)")
        #expect(!row.differs(viaCommandLine, viaC), "\(field): \(flags) and C's \(key) disagree")
        #expect(row.differs(viaCommandLine, Configuration(storePath: store)), "\(field): \(flags) changed nothing")
    }
}
