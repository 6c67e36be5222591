import Foundation
import Testing
@testable import Outbox

/// SPEC W2: each log type, produced by a deterministic engine (manual clock, seeded ids, a fixed device context),
/// encodes byte for byte to its golden request body in Fixtures/payloads/<type>.json. Every fixture is a whole
/// request body `{"sentAt":…,"logs":[one log]}`, so that the end-to-end tests can post it to the mock server as is.
///
/// After a deliberate change of the wire format, regenerate the fixtures and review their diff:
/// `OUTBOX_UPDATE_GOLDEN=1 swift test --skip-build --filter GoldenPayloadTests`.
@Suite("Golden payloads (SPEC W2)", .serialized)
struct GoldenPayloadTests {
    static let payloadsDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/payloads").path

    /// The device context of the fixtures: fixed values, so that they do not depend on the machine.
    static var device: DeviceContext {
        var device = DeviceContext()
        device.sdkVersion = "0.1.0"
        device.osName = "Debian GNU/Linux"
        device.osVersion = "12"
        device.osBuild = "bookworm"
        device.osKernel = "6.1.0-18-amd64"
        device.model = "ThinkPad X1 Carbon Gen 11"
        device.oemName = "LENOVO"
        device.locale = "tr_TR"
        device.timeZoneOffset = 180
        device.appVersion = "2.1"
        device.appBuild = "210"
        device.appNamespace = "com.example.player"
        device.countryCode = "TR"
        device.networkType = "wifi"
        return device
    }

    /// One log of every type, from one session of a deterministic engine; request bodies by type.
    static func produceBodies() async throws -> [LogType: [UInt8]] {
        let dir = TempDirectory("golden"); defer { dir.remove() }
        let clock = ManualClock(wallMs: 1_795_332_826_123, monoNs: 5_000_000_000)   // 2026-11-22T07:33:46.123Z
        var configuration = testConfiguration(dir.file())
        configuration.clock = clock
        configuration.testingIDSeed = 20_261_122
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }

        try engine.setUserId("u-1842")
        try engine.startSession()   // manual sessions (the test configuration): the startSession log carries the user
        let timer = try engine.trackTimerStart("Video>Music>Play")
        clock.advance(ms: 61_500)
        try engine.trackTimerEnd(timer, properties: [
            "Category": "Music", "n": 3, "price": 9.99, "hd": true, "at": .date(Date(timeIntervalSince1970: 1_795_332_000)),
        ])
        let screen = try engine.startScreen(title: "Player", path: "/player/42")
        clock.advance(ms: 5_250)
        try engine.endScreen(screen, properties: ["source": "search"])
        clock.advance(ms: 10)
        try engine.setUserProperties(["plan": "pro", "seats": 3])
        clock.advance(ms: 10)
        try engine.sendLocation(latitude: 41.0082, longitude: 28.9784, accuracy: 12.5)
        clock.advance(ms: 1_000)
        try engine.endSession()
        await engine.persisted()

        let logs = try await engine.withStore { try $0.allLogs() }
        let encoder = BatchEncoder(contexts: [0: device.json()])
        let sentAt = clock.wallMs() + 2_000
        var bodies: [LogType: [UInt8]] = [:]
        for log in logs {
            guard let name = payloadObject(log)["type"] as? String, let type = LogType(rawValue: name), bodies[type] == nil else { continue }
            bodies[type] = encoder.encode([log], sentAtMs: sentAt, timestamp: \.wallMs)
        }
        return bodies
    }

    // SPEC W2, T7: every log type encodes to its fixture.
    @Test func everyLogTypeEncodesToItsGoldenPayload() async throws {
        let bodies = try await Self.produceBodies()
        // W2's types: an identify goes on App Center's wire as a userProperties log (A8a).
        let wireTypes = LogType.allCases.filter { $0 != .identify }
        #expect(Set(bodies.keys) == Set(wireTypes))
        let update = ProcessInfo.processInfo.environment["OUTBOX_UPDATE_GOLDEN"] == "1"
        for type in wireTypes {
            let path = Self.payloadsDirectory + "/\(type.rawValue).json"
            let produced = (bodies[type] ?? []) + [UInt8(ascii: "\n")]
            if update {
                try FileManager.default.createDirectory(atPath: Self.payloadsDirectory, withIntermediateDirectories: true)
                try Data(produced).write(to: URL(fileURLWithPath: path))
            }
            let golden = try #require(FileManager.default.contents(atPath: path), "missing fixture \(path)")
            #expect(String(decoding: produced, as: UTF8.self) == String(decoding: golden, as: UTF8.self), "\(type.rawValue).json")
        }
    }

    // SPEC T7: the fixtures share one session and one user; the ids are UUIDs.
    @Test func theFixturesCarryTheCommonFieldsOfT7() throws {
        var sids = Set<String>()
        for type in LogType.allCases where type != .identify {
            let data = try #require(FileManager.default.contents(atPath: Self.payloadsDirectory + "/\(type.rawValue).json"))
            let body = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            let log = try #require((body["logs"] as? [[String: Any]])?.first)
            #expect(log["type"] as? String == type.rawValue)
            #expect((log["id"] as? String).flatMap(UUID.init(uuidString:)) != nil)
            #expect(log["userId"] as? String == "u-1842")
            #expect(log["device"] is [String: Any])
            if let sid = log["sid"] as? String { sids.insert(sid) }
        }
        #expect(sids.count == 1)
    }
}
