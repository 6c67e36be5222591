import Synchronization
import Testing
@testable import Outbox

/// The engine's transport used from a thread that waits (the fleet reads a mock's control API with it, SPEC F2):
/// GET on a handle that also POSTs, bodies streamed past the transport's response cap, failures said.
@Suite("Blocking HTTP client")
struct BlockingHTTPClientTests {
    // SPEC F2: `/_mock/logs` can be hundreds of megabytes: the body reaches the sink whole, in order, in pieces,
    // beyond the cap the engine keeps of an answer's body.
    @Test func aLargeBodyIsStreamedWholeToTheSink() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let client = try BlockingHTTPClient()
        defer { client.close() }
        let size = TransportOptions().maxResponseBodyBytes * 4 + 12_345
        let received = Mutex<(bytes: Int, pieces: Int, allX: Bool)>((0, 0, true))
        let status = try client.get(server.baseURL + "/big?size=\(size)") { piece in
            received.withLock { r in
                r.bytes += piece.count
                r.pieces += 1
                if piece.contains(where: { $0 != UInt8(ascii: "x") }) { r.allX = false }
            }
        }
        let got = received.withLock { $0 }
        #expect(status == 200 && got.bytes == size && got.allX && got.pieces > 1)
        #expect(server.requests.map(\.method) == ["GET"])
    }

    // A small answer whole, its status, and a request after it on the same client.
    @Test func statusAndBodyOfSmallAnswers() throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let client = try BlockingHTTPClient()
        defer { client.close() }
        let ok = try client.get(server.baseURL + "/ok")
        #expect(ok.status == 200 && ok.body == Array("ok".utf8))
        #expect(try client.get(server.baseURL + "/ok?status=404").status == 404)
    }

    // Nothing listening, a URL the transport refuses, a closed client: errors that say so, never a hang.
    @Test func failuresAreSaid() throws {
        let client = try BlockingHTTPClient()
        #expect(throws: BlockingHTTPClient.Failure.self) { try client.get("http://127.0.0.1:9/_mock/stats") }
        #expect(throws: BlockingHTTPClient.Failure.invalid("ftp://x: URL must start with http:// or https://")) {
            try client.get("ftp://x")
        }
        client.close()
        #expect(throws: BlockingHTTPClient.Failure.transport("the client is closed")) { try client.get("http://127.0.0.1:9/") }
    }
}
