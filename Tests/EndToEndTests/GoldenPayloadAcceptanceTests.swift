import Foundation
import Glibc
import OutboxMock
import OutboxTestSupport
import Testing

/// Posts a body to the server over a plain HTTP/1.1 connection and returns the status code (or nil).
/// Small on purpose: the golden bodies must reach the mock exactly as they are in the fixture files.
private func post(_ body: [UInt8], to port: Int, installID: String) -> Int? {
    let head = "POST /logs?api-version=1.0.0 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + "App-Secret: golden\r\nInstall-ID: \(installID)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
    guard let response = LoopbackHTTP.exchange(port: port, request: Array(head.utf8) + body) else { return nil }
    // "HTTP/1.1 200 OK"
    let statusLine = String(decoding: response.prefix { $0 != UInt8(ascii: "\r") }, as: UTF8.self)
    let parts = statusLine.split(separator: " ")
    return parts.count >= 2 ? Int(parts[1]) : nil
}

@Suite("Golden payloads against the mock server (SPEC W2, M1)")
struct GoldenPayloadAcceptanceTests {
    static let payloads = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/payloads").path

    // SPEC W2, M1: the mock server's strict validation accepts the golden payload of every log type.
    @Test(arguments: LogType.allCases)
    func theMockServerAcceptsTheGoldenPayload(of type: LogType) throws {
        let server = try startMock()
        defer { try? server.stop() }
        let path = Self.payloads + "/\(type.rawValue).json"
        let body = try #require(FileManager.default.contents(atPath: path), "missing fixture \(path)")
        let status = post(Array(body), to: server.port, installID: "6f1d2a0e-3c51-4f7a-9b43-5a2f0e6f9d10")
        #expect(status == 200, "\(type.rawValue).json: \(server.requests().last.map { "\($0)" } ?? "no request")")
        let logs = server.uniqueLogs()
        #expect(logs.map(\.type) == [type])
        #expect(server.stats().logsUnique == 1)
    }

    // The validator is strict: a golden payload with its required field removed is refused (400).
    @Test func aPayloadMissingARequiredFieldIsRefused() throws {
        let server = try startMock()
        defer { try? server.stop() }
        let body = try #require(FileManager.default.contents(atPath: Self.payloads + "/endSession.json"))
        let broken = String(decoding: body, as: UTF8.self).replacingOccurrences(of: #","durationMs":67770.0"#, with: "")
        #expect(broken.utf8.count < body.count)
        #expect(post(Array(broken.utf8), to: server.port, installID: "6f1d2a0e-3c51-4f7a-9b43-5a2f0e6f9d10") == 400)
        #expect(server.stats().logsUnique == 0)
    }
}
