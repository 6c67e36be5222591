import Foundation
import Glibc
import OutboxMock
import Testing

/// Posts a body to the server over a plain HTTP/1.1 connection and returns the status code (or nil).
/// Small on purpose: the golden bodies must reach the mock exactly as they are in the fixture files.
private func post(_ body: [UInt8], to port: Int, installID: String) -> Int? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { return nil }
    let head = "POST /logs?api-version=1.0.0 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + "App-Secret: golden\r\nInstall-ID: \(installID)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n"
    let request = Array(head.utf8) + body
    var sent = 0
    while sent < request.count {
        let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return nil }
        sent += n
    }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        response += buffer[0..<n]
    }
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
