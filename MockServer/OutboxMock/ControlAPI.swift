import Foundation
import NIOCore
import NIOHTTP1

/// The control and inspection API under `/_mock/` (SPEC M4, X1). Its requests are never counted,
/// never matched by scenario rules and need no App-Secret.
enum ControlAPI {
    static let prefix = "/_mock"

    static func handle(core: MockCore, head: HTTPRequestHead, body: ByteBuffer) -> HTTPResponse {
        let path = ConnectionHandler.path(of: head.uri)
        switch (head.method, path) {
        case (.GET, "/_mock"), (.GET, "/_mock/"):
            return HTTPResponse(status: 200, contentType: "text/html; charset=utf-8", body: LivePage.html)
        case (.GET, "/_mock/stats"):
            return json(core.stats())
        case (.GET, "/_mock/histogram"):
            return json(core.histogram())
        case (.GET, "/_mock/metrics"):
            return HTTPResponse(status: 200, headers: [("Content-Type", PrometheusMetrics.contentType)],
                                body: PrometheusMetrics.render(core.metricsSnapshot()))
        case (.GET, "/_mock/logs"):
            return jsonLines(logs: core.storedLogs())
        case (.GET, "/_mock/requests"):
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            var out: [UInt8] = []
            for entry in core.requestEntries() {
                out.append(contentsOf: (try? encoder.encode(entry)) ?? Data())
                out.append(UInt8(ascii: "\n"))
            }
            return HTTPResponse(status: 200, headers: [("Content-Type", "application/x-ndjson")], body: out)
        case (.GET, "/_mock/scenario"):
            return HTTPResponse(status: 200, headers: [("Content-Type", "application/json")],
                                body: Array(core.scenario.jsonData()))
        case (.PUT, "/_mock/scenario"):
            do {
                let scenario = try Scenario.decode(from: Data(body.readableBytesView))
                core.setScenario(scenario)
                return HTTPResponse(status: 200, body: #"{"status":"ok"}"#)
            } catch {
                return .json(400, "Invalid", reason: "\(error)")
            }
        case (.POST, "/_mock/reset"):
            core.reset()
            return HTTPResponse(status: 200, body: #"{"status":"ok"}"#)
        case (_, "/_mock"), (_, "/_mock/"), (_, "/_mock/stats"), (_, "/_mock/histogram"), (_, "/_mock/logs"),
             (_, "/_mock/metrics"), (_, "/_mock/requests"), (_, "/_mock/scenario"), (_, "/_mock/reset"):
            return .json(405, "MethodNotAllowed", reason: "\(head.method.rawValue) \(path) is not supported")
        default:
            return .json(404, "NotFound", reason: "no such control endpoint \(path): stats, logs, requests, "
                + "histogram, metrics, scenario (GET, PUT), reset (POST)")
        }
    }

    static func json<T: Encodable>(_ value: T) -> HTTPResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(value)) ?? Data("{}".utf8)
        return HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: Array(data))
    }

    /// Unique logs and events of every vendor in arrival order, one JSON object per line: the log or event as
    /// received, with `vendor` and `received_at` added (SPEC X1, V3).
    static func jsonLines(logs: [StoredLog]) -> HTTPResponse {
        var out: [UInt8] = []
        out.reserveCapacity(logs.reduce(0) { $0 + $1.span.count + 64 })
        var reader = StoredLogReader()
        for log in logs {
            let json = reader.json(of: log)
            guard json.last == UInt8(ascii: "}") else { continue }
            out.append(contentsOf: json.dropLast())
            if json.count > 2 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: #""vendor":""#.utf8)
            out.append(contentsOf: log.vendor.rawValue.utf8)
            out.append(contentsOf: #"","received_at":""#.utf8)
            out.append(contentsOf: ISOTimestamp.format(epochMs: log.receivedAtMs).utf8)
            out.append(contentsOf: "\"}\n".utf8)
        }
        return HTTPResponse(status: 200, headers: [("Content-Type", "application/x-ndjson")], body: out)
    }
}
