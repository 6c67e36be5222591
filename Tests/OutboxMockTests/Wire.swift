import Foundation
@testable import OutboxMock

/// A JSON value written verbatim (numbers such as `1e400`, hand-made escapes, broken JSON).
struct RawJSON {
    var text: String
    init(_ text: String) { self.text = text }
}

/// Builders of W1/W2 bodies for the tests: valid logs of every type, and a JSON writer that keeps
/// full control of what goes on the wire.
enum Wire {
    static let install = "6f1d2a0e-3c51-4f7a-9b43-5a2f0e6f9d10"
    static let otherInstall = "0b7c3e52-9d4a-4c1e-8f2b-1a2b3c4d5e6f"
    static let logsPath = "/logs?api-version=1.0.0"

    static var device: [String: Any] {
        ["sdkName": "outbox.linux", "sdkVersion": "0.1.0", "osName": "Debian GNU/Linux", "osVersion": "12",
         "locale": "en_US", "timeZoneOffset": 60, "appVersion": "1.0", "appBuild": "1"]
    }

    static func newID() -> String { UUID().uuidString.lowercased() }

    static func timestamp(_ date: Date = Date()) -> String {
        ISOTimestamp.format(epochMs: Int64((date.timeIntervalSince1970 * 1000).rounded(.down)))
    }

    /// A valid log of `type` with every required field.
    static func log(_ type: String, id: String = newID(), timestamp: String = Wire.timestamp()) -> [String: Any] {
        var log: [String: Any] = ["type": type, "id": id, "timestamp": timestamp, "sid": NSNull(), "device": device]
        switch type {
        case "event":
            log["name"] = "Video clicked"
            log["typedProperties"] = [["type": "string", "name": "Category", "value": "Music"],
                                      ["type": "long", "name": "n", "value": 3]]
        case "startSession":
            log["sid"] = newID()
        case "endSession":
            log["sid"] = newID()
            log["durationMs"] = 1234.5
        case "screen":
            log["name"] = "Settings"
            log["path"] = "/settings"
        case "userProperties":
            log["properties"] = [["type": "string", "name": "plan", "value": "pro"]]
        case "location":
            log["latitude"] = 48.85
            log["longitude"] = 2.35
        default:
            break
        }
        return log
    }

    static func event(name: String = "Video clicked", id: String = newID(), timestamp: String = Wire.timestamp())
        -> [String: Any] {
        var e = log("event", id: id, timestamp: timestamp)
        e["name"] = name
        return e
    }

    static func events(_ n: Int, name: String = "Video clicked") -> [[String: Any]] {
        (0..<n).map { _ in event(name: name) }
    }

    static func body(_ logs: [[String: Any]]) -> [UInt8] {
        Array(json(["logs": logs]).utf8)
    }

    static func headers(install: String? = Wire.install, secret: String? = "app-secret-1",
                        gzip: Bool = false) -> [(String, String)] {
        var h: [(String, String)] = [("Content-Type", "application/json")]
        if let secret { h.append(("App-Secret", secret)) }
        if let install { h.append(("Install-ID", install)) }
        if gzip { h.append(("Content-Encoding", "gzip")) }
        return h
    }

    /// POST /logs on `connection` (or a new one).
    @discardableResult
    static func post(_ port: Int, _ logs: [[String: Any]], install: String = Wire.install, gzip: Bool = false,
                     on connection: TestConnection? = nil, timeout: Double = 5) throws -> TestResponse {
        let raw = body(logs)
        let conn = try connection ?? TestConnection(port: port, timeout: timeout)
        return try conn.request("POST", logsPath, headers: headers(install: install, gzip: gzip),
                                body: gzip ? TestGzip.compress(raw) : raw)
    }

    /// A small JSON writer (sorted keys) that also emits `RawJSON` verbatim.
    static func json(_ value: Any) -> String {
        switch value {
        case let raw as RawJSON: return raw.text
        case is NSNull: return "null"
        case let b as Bool: return b ? "true" : "false"
        case let i as Int: return String(i)
        case let i as Int64: return String(i)
        case let d as Double: return String(d)
        case let s as String: return jsonString(s)
        case let a as [Any]: return "[" + a.map(json).joined(separator: ",") + "]"
        case let o as [String: Any]:
            return "{" + o.keys.sorted().map { jsonString($0) + ":" + json(o[$0] as Any) }.joined(separator: ",") + "}"
        default: return "null"
        }
    }
}
