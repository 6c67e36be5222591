import Foundation
import Testing
@testable import Outbox

/// Inputs that crashed a `make fuzz` target (Fuzz/outbox-fuzz), replayed from Fixtures/fuzz/<target>/ as the target
/// reads them; each must now pass without trapping and give the answer named in its test.
@Suite("Fuzz regressions: the engine's response handling")
struct EngineResponseFuzzRegressionTests {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/fuzz/engine-response").path

    static let nowWallMs: Int64 = 1_763_100_000_000

    /// As the `engine-response` target: header lines through the transfer's header callback (CRLF-terminated, as
    /// curl hands them) up to the first empty line, the rest through the body callback; then the response the
    /// transfer kept.
    static func replay(_ input: [UInt8]) -> HTTPResponse {
        let transfer = CurlTransfer(id: TransferID(rawValue: 1), request: HTTPRequest(url: "http://127.0.0.1/logs"),
                                    bodyCap: 256, completion: { _ in })
        var line: [UInt8] = []
        var bodyStart = input.count
        for (position, byte) in input.enumerated() {
            if byte != 0x0A { line.append(byte); continue }
            if line.last == 0x0D { line.removeLast() }
            line += [0x0D, 0x0A]
            _ = line.withUnsafeMutableBufferPointer { bytes in
                bytes.withMemoryRebound(to: CChar.self) { transfer.received(header: $0.baseAddress, count: $0.count) }
            }
            if line.count == 2 { bodyStart = position + 1; break }
            line = []
        }
        var body = Array(input[bodyStart...])
        _ = body.withUnsafeMutableBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { transfer.received(body: $0.baseAddress, count: $0.count) }
        }
        return HTTPResponse(status: transfer.blockStatus ?? 0, headers: transfer.responseHeaders,
                            body: transfer.responseBody, bodyBytesReceived: transfer.responseBytes,
                            timing: TransferTiming(queued: .zero, connect: .zero, firstByte: .zero, total: .zero),
                            reusedConnection: false)
    }

    static func input(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name)))
    }

    // SPEC R4: `Retry-After: 99999999999999999` (seconds) trapped multiplying into milliseconds. A wait beyond 64-bit
    // milliseconds is as long as any: the pipeline pauses for the cap, `maxRetryAfterMs`.
    @Test func retryAfterSecondsBeyondMillisecondsIsCapped() throws {
        let response = Self.replay(try Self.input("retry-after-seconds-overflow.txt"))
        #expect(response.status == 503)
        let outcome = DeliveryMachine.classify(.response(response), nowWallMs: Self.nowWallMs)
        guard case .retryable(_, let retryAfterMs?) = outcome else {
            Issue.record("a 503 with Retry-After is retryable with a wait, got \(outcome)")
            return
        }
        let policy = RetryPolicy()
        #expect(policy.pipelinePause(retryAfterMs: retryAfterMs, scheduledMs: 10_000) == policy.maxRetryAfterMs)
    }

    // SPEC A9, R4: a `Date` (or `Retry-After` date) with the year 99999999999999999 trapped counting days. A year
    // that is not four digits is not an HTTP date: the header is ignored, as any unreadable one.
    @Test func dateWithAnAbsurdYearIsIgnored() throws {
        let response = Self.replay(try Self.input("date-year-overflow.txt"))
        let date = try #require(response.headers["Date"])
        #expect(HTTPDate.parse(date) == nil)
        #expect(RetryPolicy.retryAfterMs(retryAfter: date, msRetryAfter: nil, nowMs: Self.nowWallMs) == nil)
        #expect(DeliveryMachine.classify(.response(response), nowWallMs: Self.nowWallMs) == .delivered)
        // The four-digit years around it still parse.
        #expect(HTTPDate.parse("Fri, 31 Dec 9999 23:59:59 GMT") == 253_402_300_799_000)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777_000)
    }

    // Every input kept in the directory replays without trapping (new ones need no new code to be covered).
    @Test func everyKeptInputReplays() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.directory).sorted()
        #expect(names.count >= 2)
        for name in names {
            let response = Self.replay(try Self.input(name))
            _ = DeliveryMachine.classify(.response(response), nowWallMs: Self.nowWallMs)
            if let date = response.headers["Date"] { _ = HTTPDate.parse(date) }
        }
    }
}
