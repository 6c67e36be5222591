import Foundation
import NIOConcurrencyHelpers

/// One request–response exchange, as `--record` writes it (one JSON object per line) and `--replay`
/// reads it back (SPEC M5).
///
/// ```json
/// {"at":12,"method":"POST","path":"/logs?api-version=1.0.0","install":"6f1d…","bytes":5120,
///  "content_encoding":"gzip","logs":50,"log_ids":["9f1e…",…],
///  "response":{"status":503,"headers":{"Retry-After":"2"},"body":"…","delay_ms":0},"fault":"respond"}
/// {"at":40,…,"action":"refuse","duration_s":10,"fault":"refuse"}
/// ```
public struct RecordedExchange: Codable, Sendable, Equatable {
    /// ms since start or reset when the request head arrived.
    public var at: Int64
    public var method: String
    /// Path and query as sent.
    public var path: String
    public var install: String?
    /// Body bytes on the wire (before decompression).
    public var bytes: Int
    public var contentEncoding: String?
    /// Logs in the body, and the ids of those that were valid.
    public var logs: Int
    public var logIds: [String]
    /// What was answered (status, extra headers, body, delay) — absent for a fault action.
    public var response: Scenario.Response?
    /// A `FaultKind` that answers nothing usable (`refuse`, `reset`, `drop_before_body`, `drop_after_body`, `hang`,
    /// `malformed`) — absent when a response was written.
    public var action: String?
    /// For `refuse`: how long the port stayed closed.
    public var durationSeconds: Double?
    /// The `FaultKind` of the scenario outcome when a rule (not the normal handling) decided.
    public var fault: String?
    /// The deciding rule's network faults (SPEC M8). A replay shapes the answer with them, except for the latency:
    /// the one drawn is already in `response.delay_ms`.
    public var network: Scenario.Network? = nil

    enum CodingKeys: String, CodingKey {
        case at, method, path, install, bytes, contentEncoding = "content_encoding", logs, logIds = "log_ids",
             response, action, durationSeconds = "duration_s", fault, network
    }

    /// The outcome to reproduce when replaying this exchange.
    var replayOutcome: Scenario.Outcome? {
        guard let action else { return response.map { .respond($0) } }
        return FaultKind(rawValue: action).flatMap { Scenario.Outcome(action: $0, durationSeconds: durationSeconds ?? 1) }
    }

    /// Reads a recording: one exchange per non-empty line.
    public static func load(path: String) throws -> [RecordedExchange] {
        let data = try readFile(path) { MockServerError.unreadableFile(path: path, reason: $0) }
        let decoder = JSONDecoder()
        var out: [RecordedExchange] = []
        for (n, line) in data.split(separator: UInt8(ascii: "\n")).enumerated()
        where !line.allSatisfy({ $0 == 0x20 || $0 == 0x0D }) {
            if let problem = strictJSONProblem(Data(line)) {
                throw MockServerError.invalidRecording("\(path): line \(n + 1), column \(problem.column): not valid JSON: \(problem.message)")
            }
            do {
                out.append(try decoder.decode(RecordedExchange.self, from: Data(line)))
            } catch {
                throw MockServerError.invalidRecording("\(path): line \(n + 1): \(error)")
            }
        }
        return out
    }
}

/// Appends exchanges to the `--record` file, one line each, in the order they were decided. Plain POSIX file
/// calls, not `FileHandle`: the release `outbox` (which runs this mock for its demo) must not link Foundation
/// proper (CoreFoundation and ICU: megabytes of start-up memory).
final class ExchangeRecorder: Sendable {
    private let fd: NIOLockedValueBox<Int32?>
    private let encoder: JSONEncoder

    init(path: String) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw MockServerError.unwritableFile(path) }
        self.fd = NIOLockedValueBox(fd)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        self.encoder = encoder
    }

    func append(_ exchange: RecordedExchange) {
        guard var line = try? encoder.encode(exchange) else { return }
        line.append(UInt8(ascii: "\n"))
        fd.withLockedValue { fd in
            guard let fd else { return }
            line.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                    if n < 0 && errno == EINTR { continue }
                    guard n > 0 else { return }
                    offset += n
                }
            }
        }
    }

    func close() {
        fd.withLockedValue {
            if let fd = $0 { _ = Glibc.close(fd) }
            $0 = nil
        }
    }
}
