import Foundation
import Logging
import OutboxMock
import Testing
@testable import Outbox

/// Collects every log line with its metadata.
final class CollectingLogHandler: LogHandler, @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        lock.withLock { lines.append("\(event.level) \(event.message) \(all)") }
    }

    var text: String { lock.withLock { lines.joined(separator: "\n") } }
    var count: Int { lock.withLock { lines.count } }
}

@Suite("Secrets never reach the logs")
struct SecretHygieneTests {
    // DEVELOPERS "Standards": the app secret appears in no log line, at any level, on success or refusal.
    @Test func theAppSecretNeverAppearsInLogs() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario: Scenario(seed: 1, rules: [
            .init(match: .init(requests: try .init("2")), outcome: .respond(.init(status: 401, body: "bad secret"))),
        ]))
        defer { try? server.stop() }
        let handler = CollectingLogHandler()
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        let secret = "s3cr3t-\(UUID().uuidString)"
        configuration.appSecret = secret
        configuration.logger = Logger(label: "test") { _ in handler }
        let engine = try OutboxEngine(configuration: configuration)
        for index in 0..<120 { try engine.trackEvent("e", properties: ["i": .int(Int64(index))]) }
        _ = await engine.waitUntilDelivered(timeout: .seconds(3))
        engine.shutdown()
        #expect(handler.count > 0)
        #expect(handler.text.contains("401"))   // the refusal was logged…
        #expect(!handler.text.contains(secret)) // …without the secret
    }
}
