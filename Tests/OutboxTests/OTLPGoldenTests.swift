import Foundation
import OutboxTestSupport
import Testing
@testable import Outbox

/// The golden OTLP bodies (SPEC D2, D4): one batch of the six log types of Fixtures/payloads/, stored as the engine
/// stores them, encoded as protobuf and OTLP/JSON, must be byte for byte Fixtures/destinations/otlp/batch.pb and
/// batch.json; and OpenTelemetry's own Python classes read those files (scripts/otlp-golden-check.py). After a
/// deliberate change of the mapping: `OUTBOX_UPDATE_GOLDEN=1 swift test --filter OTLPGoldenTests`, then review the diff.
@Suite("OTLP golden bodies (SPEC D2, D4)")
struct OTLPGoldenTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let golden = root.appendingPathComponent("Fixtures/destinations/otlp")
    static let python = root.path + "/.build/vendor-venv/bin/python"
    static var hasPython: Bool {
        FileManager.default.isExecutableFile(atPath: python)
            && (try? run(python, ["-c", "import opentelemetry.proto"]).status) == 0
    }

    static let types = ["event", "startSession", "endSession", "screen", "userProperties", "location"]

    /// A golden payload as the store keeps it: the log's members in the fixture's order (the engine's: `type`
    /// first), without `timestamp` and `device`; and the device context.
    static func stored(_ type: String, seq: Int64) throws -> (log: StoredLog, device: [UInt8]) {
        let bytes = try [UInt8](Data(contentsOf: root.appendingPathComponent("Fixtures/payloads/\(type).json")))
        let document = try bytes.withUnsafeBufferPointer { buffer in
            var scanner = JSONScanner(buffer)
            return try scanner.document()
        }
        guard case .object(let batch) = document, case .array(let logs)? = batch.first(where: { $0.key == "logs" })?.value,
              case .object(let members)? = logs.first else { throw OutboxError.invalidConfiguration("no log in \(type)") }
        var payload = JSONWriter(capacity: 512), device = JSONWriter(capacity: 512)
        write(.object(members.filter { $0.key != "timestamp" && $0.key != "device" }), into: &payload)
        if let context = members.first(where: { $0.key == "device" })?.value { write(context, into: &device) }
        guard case .string(let text)? = members.first(where: { $0.key == "id" })?.value,
              let id = UUIDBytes(string: text) else { throw OutboxError.invalidConfiguration("no id in \(type)") }
        return (StoredLog(seq: seq, id: id, priority: .normal, wallMs: 1_795_000_000_000 + seq, monoNs: 0, boot: 7,
                          context: 1, payload: payload.bytes), device.bytes)
    }

    private static func write(_ value: JSONValue, into w: inout JSONWriter) {
        switch value {
        case .string(let text): w.string(text)
        case .integer(let number): w.int(number)
        case .double(let number): w.double(number)
        case .bool(let flag): w.bool(flag)
        case .null: w.raw("null")
        case .array(let items):
            w.raw("[")
            for (index, item) in items.enumerated() {
                if index > 0 { w.raw(",") }
                write(item, into: &w)
            }
            w.raw("]")
        case .object(let members):
            w.raw("{")
            for (index, member) in members.enumerated() {
                if index > 0 { w.raw(",") }
                w.string(member.key)
                w.raw(":")
                write(member.value, into: &w)
            }
            w.raw("}")
        }
    }

    static func body(_ encoding: OTLPEncoding) throws -> [UInt8] {
        let stored = try types.enumerated().map { try Self.stored($1, seq: Int64($0 + 1)) }
        let install = try #require(UUID(uuidString: "5a1f0c3e-8b2d-4e6f-9a7c-1d3e5f7a9b0c"))
        let wire = OTLPWire(encoding: encoding, installID: install)
        return wire.encode(stored.map(\.log), contexts: [1: stored[0].device],
                           times: WireTimes(sentAtMs: 1_795_000_060_000) { $0.wallMs + 1_500 })
    }

    // SPEC D2, D4: the engine's bytes are the golden ones (a change to the mapping shows as a diff to review).
    @Test(arguments: [(OTLPEncoding.protobuf, "batch.pb"), (.json, "batch.json")])
    func encodingMatchesTheGoldenBody(encoding: OTLPEncoding, file: String) throws {
        let bytes = try Self.body(encoding)
        let url = Self.golden.appendingPathComponent(file)
        if ProcessInfo.processInfo.environment["OUTBOX_UPDATE_GOLDEN"] == "1" {
            try Data(bytes).write(to: url)
        }
        let golden = try [UInt8](Data(contentsOf: url))
        #expect(bytes == golden, "\(file) differs from the encoder's output (\(bytes.count) vs \(golden.count) bytes)")
    }

    // SPEC D4: OpenTelemetry's Python classes read the golden bodies: the same request in both encodings, six
    // records named as D4 maps them, each with its own log.record.uid.
    @Test(.enabled(if: hasPython, "needs .build/vendor-venv with opentelemetry-proto (make vendor-venv; PyPI)"))
    func openTelemetrysPythonClassesReadTheGoldenBodies() throws {
        let result = try Self.run(Self.python, [Self.root.path + "/scripts/otlp-golden-check.py", Self.golden.path])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains(#""records": 6"#), "\(result.output)")
    }

    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self))
    }
}
