import Foundation
import Testing
@testable import OutboxMock

/// One row of the validation table: a change to a valid log, and the reason the server must give
/// (nil: the log stays valid).
struct Rule: CustomTestStringConvertible, Sendable {
    var name: String
    var type: String
    var field: String?
    var message: String?
    var change: @Sendable (inout [String: Any]) -> Void

    var testDescription: String { name }

    init(_ name: String, _ type: String = "event", field: String? = nil, _ message: String? = nil,
         _ change: @escaping @Sendable (inout [String: Any]) -> Void) {
        self.name = name
        self.type = type
        self.field = field
        self.message = message
        self.change = change
    }
}

private func props(_ n: Int) -> [[String: Any]] {
    (0..<n).map { ["type": "long", "name": "p\($0)", "value": $0] }
}

private func device(_ change: @escaping @Sendable (inout [String: Any]) -> Void) -> @Sendable (inout [String: Any]) -> Void {
    { log in
        var d = log["device"] as? [String: Any] ?? [:]
        change(&d)
        log["device"] = d
    }
}

private func property(_ p: [String: Any]) -> @Sendable (inout [String: Any]) -> Void {
    nonisolated(unsafe) let p = p
    return { $0["typedProperties"] = [p] }
}

// SPEC M1, W2, T2, T3: each rule of the README's wire format, valid and invalid, with the reason returned.
let validRows: [Rule] = [
    Rule("every type as built", "event") { _ in },
    Rule("startSession", "startSession") { _ in },
    Rule("endSession", "endSession") { _ in },
    Rule("screen", "screen") { _ in },
    Rule("userProperties", "userProperties") { _ in },
    Rule("location", "location") { _ in },
    Rule("sid absent") { $0["sid"] = nil },
    Rule("sid a UUID") { $0["sid"] = "AB5A1F3E-1111-4222-8333-123456789ABC" },
    Rule("id in upper case") { $0["id"] = UUID().uuidString },
    Rule("userId of 256 characters") { $0["userId"] = String(repeating: "u", count: 256) },
    // SPEC M8: App Center's legacy string map, the one key beyond W that events and screens may carry.
    Rule("event with legacy properties") { $0["properties"] = ["plan": "pro"] },
    Rule("event with 20 legacy properties of 125 characters") {
        $0["properties"] = Dictionary(uniqueKeysWithValues: (0..<20).map {
            (String(repeating: "k", count: 122) + String(100 + $0), String(repeating: "v", count: 125))
        })
    },
    Rule("screen with legacy properties", "screen") { $0["properties"] = ["source": "search", "empty": ""] },
    Rule("name of exactly 256 characters") { $0["name"] = String(repeating: "n", count: 256) },
    Rule("name of 256 non-ASCII characters") { $0["name"] = String(repeating: "é", count: 256) },
    Rule("name with escapes") { $0["name"] = RawJSON(#""caf\u00e9 \"quoted\" \ud83d\ude00""#) },
    Rule("20 typed properties") { $0["typedProperties"] = props(20) },
    Rule("no typed properties") { $0["typedProperties"] = nil },
    Rule("empty typed properties") { $0["typedProperties"] = [[String: Any]]() },
    Rule("property name of 125 characters") {
        $0["typedProperties"] = [["type": "string", "name": String(repeating: "k", count: 125), "value": "v"]]
    },
    Rule("string value of 125 characters, and empty") {
        $0["typedProperties"] = [["type": "string", "name": "a", "value": String(repeating: "v", count: 125)],
                                 ["type": "string", "name": "b", "value": ""]]
    },
    Rule("long at Int64 bounds") {
        $0["typedProperties"] = [["type": "long", "name": "max", "value": RawJSON("9223372036854775807")],
                                 ["type": "long", "name": "min", "value": RawJSON("-9223372036854775808")]]
    },
    Rule("double, boolean, dateTime") {
        $0["typedProperties"] = [["type": "double", "name": "d", "value": RawJSON("-1.5e3")],
                                 ["type": "double", "name": "i", "value": 2],
                                 ["type": "boolean", "name": "b", "value": false],
                                 ["type": "dateTime", "name": "t", "value": "2024-02-29T23:59:59.999Z"]]
    },
    Rule("category of 3 parts") { $0["name"] = "A>B>C"; $0["category"] = ["A", "B", "C"] },
    Rule("device optional strings and networkType") {
        device {
            $0["model"] = "ThinkPad"; $0["oemName"] = "Lenovo"; $0["osBuild"] = "x"; $0["osKernel"] = "6.1"
            $0["appNamespace"] = "com.example"; $0["carrierCountry"] = "fr"; $0["countryCode"] = "FR"
            $0["networkType"] = "wifi"
        }(&$0)
    },
    Rule("device optional field null") { device { $0["model"] = NSNull() }(&$0) },
    Rule("timeZoneOffset at the bounds") { device { $0["timeZoneOffset"] = -840 }(&$0) },
    Rule("osVersion empty (Debian testing has no VERSION_ID)") { device { $0["osVersion"] = "" }(&$0) },
    Rule("screen with durationMs", "screen") { $0["durationMs"] = 0 },
    Rule("location with accuracy", "location") { $0["accuracy"] = 12.5; $0["latitude"] = -90; $0["longitude"] = 180 },
    Rule("userProperties with 20 properties", "userProperties") { $0["properties"] = props(20) },
    Rule("timestamp on a leap day") { $0["timestamp"] = "2028-02-29T00:00:00.000Z" },
]

let invalidRows: [Rule] = [
    Rule("type missing", field: "type", "missing") { $0["type"] = nil },
    Rule("type not a string", field: "type", "must be a string") { $0["type"] = 3 },
    Rule("type unknown", field: "type", #"unknown log type "click""#) { $0["type"] = "click" },
    Rule("id missing", field: "id", "missing") { $0["id"] = nil },
    Rule("id not a UUID", field: "id", "must be a UUID string") { $0["id"] = "1234" },
    Rule("id with bad hex", field: "id", "must be a UUID string") { $0["id"] = "9f1e4c1a-2b3c-4d5e-8f60-718293a4b5cZ" },
    Rule("timestamp missing", field: "timestamp", "missing") { $0["timestamp"] = nil },
    Rule("timestamp without milliseconds", field: "timestamp", LogValidator.timestampHint) {
        $0["timestamp"] = "2026-11-22T07:33:46Z"
    },
    Rule("timestamp with an offset", field: "timestamp", LogValidator.timestampHint) {
        $0["timestamp"] = "2026-11-22T07:33:46.123+01:00"
    },
    Rule("timestamp as a number", field: "timestamp", LogValidator.timestampHint) { $0["timestamp"] = 1_700_000_000 },
    Rule("timestamp 30 February", field: "timestamp", "not a real date") { $0["timestamp"] = "2026-02-30T10:00:00.000Z" },
    Rule("timestamp 29 February of a common year", field: "timestamp", "not a real date") {
        $0["timestamp"] = "2027-02-29T10:00:00.000Z"
    },
    Rule("timestamp hour 24", field: "timestamp", "not a real date") { $0["timestamp"] = "2026-11-22T24:00:00.000Z" },
    Rule("sid not a UUID", field: "sid", "must be a UUID string or null") { $0["sid"] = "session-1" },
    Rule("startSession without sid", "startSession", field: "sid", "required (not null) for startSession") {
        $0["sid"] = NSNull()
    },
    Rule("endSession without sid", "endSession", field: "sid", "required (not null) for endSession") { $0["sid"] = nil },
    Rule("userId empty", field: "userId", "must not be empty") { $0["userId"] = "" },
    Rule("userId too long", field: "userId", "longer than 256 characters") {
        $0["userId"] = String(repeating: "u", count: 257)
    },
    Rule("device missing", field: "device", "missing") { $0["device"] = nil },
    Rule("device not an object", field: "device", "must be an object") { $0["device"] = "linux" },
    Rule("device.sdkName missing", field: "device.sdkName", "missing") { device { $0["sdkName"] = nil }(&$0) },
    Rule("device.appBuild missing", field: "device.appBuild", "missing") { device { $0["appBuild"] = nil }(&$0) },
    Rule("device.locale not a string", field: "device.locale", "must be a string") { device { $0["locale"] = 1 }(&$0) },
    Rule("device.timeZoneOffset missing", field: "device.timeZoneOffset", "missing") {
        device { $0["timeZoneOffset"] = nil }(&$0)
    },
    Rule("device.timeZoneOffset fractional", field: "device.timeZoneOffset", "must be an integer (minutes east of UTC)") {
        device { $0["timeZoneOffset"] = 60.5 }(&$0)
    },
    Rule("device.timeZoneOffset out of range", field: "device.timeZoneOffset", "must be between -840 and 840") {
        device { $0["timeZoneOffset"] = 841 }(&$0)
    },
    Rule("device.networkType unknown", field: "device.networkType", "must be one of wired, wifi, none, unknown") {
        device { $0["networkType"] = "5g" }(&$0)
    },
    Rule("device.model not a string", field: "device.model", "must be a string") { device { $0["model"] = 42 }(&$0) },
    Rule("event name missing", field: "name", "missing") { $0["name"] = nil },
    Rule("event name empty", field: "name", "must not be empty") { $0["name"] = "" },
    Rule("event name of 257 characters", field: "name", "longer than 256 characters") {
        $0["name"] = String(repeating: "n", count: 257)
    },
    Rule("event name of 257 non-ASCII characters", field: "name", "longer than 256 characters") {
        $0["name"] = String(repeating: "日", count: 257)
    },
    Rule("event name not a string", field: "name", "must be a string") { $0["name"] = ["a"] },
    Rule("typedProperties not an array", field: "typedProperties", "must be an array") {
        $0["typedProperties"] = ["a": 1]
    },
    Rule("21 typed properties", field: "typedProperties", "more than 20 properties") {
        $0["typedProperties"] = props(21)
    },
    Rule("typed property not an object", field: "typedProperties[0]", "must be an object") {
        $0["typedProperties"] = ["x"]
    },
    Rule("typed property without type", field: "typedProperties[0].type", "missing",
         property(["name": "a", "value": "b"])),
    Rule("typed property of unknown type", field: "typedProperties[0].type",
         "must be one of string, long, double, boolean, dateTime", property(["type": "int", "name": "a", "value": 1])),
    Rule("typed property without name", field: "typedProperties[0].name", "missing",
         property(["type": "string", "value": "b"])),
    Rule("typed property name empty", field: "typedProperties[0].name", "must not be empty",
         property(["type": "string", "name": "", "value": "b"])),
    Rule("typed property name of 126 characters", field: "typedProperties[0].name", "longer than 125 characters",
         property(["type": "string", "name": String(repeating: "k", count: 126), "value": "b"])),
    Rule("typed property without value", field: "typedProperties[0].value", "missing",
         property(["type": "string", "name": "a"])),
    Rule("string value of 126 characters", field: "typedProperties[0].value", "longer than 125 characters",
         property(["type": "string", "name": "a", "value": String(repeating: "v", count: 126)])),
    Rule("string value not a string", field: "typedProperties[0].value", "must be a string",
         property(["type": "string", "name": "a", "value": 1])),
    Rule("long value fractional", field: "typedProperties[0].value", "must be an integer that fits in 64 bits",
         property(["type": "long", "name": "a", "value": RawJSON("3.0")])),
    Rule("long value beyond Int64", field: "typedProperties[0].value", "must be an integer that fits in 64 bits",
         property(["type": "long", "name": "a", "value": RawJSON("9223372036854775808")])),
    Rule("double value infinite", field: "typedProperties[0].value", "must be a finite number",
         property(["type": "double", "name": "a", "value": RawJSON("1e400")])),
    Rule("double value a string", field: "typedProperties[0].value", "must be a finite number",
         property(["type": "double", "name": "a", "value": "NaN"])),
    Rule("boolean value a number", field: "typedProperties[0].value", "must be true or false",
         property(["type": "boolean", "name": "a", "value": 1])),
    Rule("dateTime value without milliseconds", field: "typedProperties[0].value", LogValidator.timestampHint,
         property(["type": "dateTime", "name": "a", "value": "2026-11-22T07:33:46Z"])),
    Rule("duplicate property names", field: "typedProperties[1].name", #"duplicate name "a""#) {
        $0["typedProperties"] = [["type": "long", "name": "a", "value": 1], ["type": "long", "name": "a", "value": 2]]
    },
    Rule("category empty", field: "category", "must hold 1 to 10 strings") { $0["category"] = [String]() },
    Rule("category of 11 parts", field: "category", "must hold 1 to 10 strings") {
        $0["category"] = (0..<11).map { "c\($0)" }
    },
    Rule("category with an empty part", field: "category[1]", "must be a non-empty string") {
        $0["category"] = ["A", ""]
    },
    Rule("endSession without durationMs", "endSession", field: "durationMs", "missing") { $0["durationMs"] = nil },
    Rule("endSession negative durationMs", "endSession", field: "durationMs", "must not be negative") {
        $0["durationMs"] = -1
    },
    Rule("endSession durationMs a string", "endSession", field: "durationMs", "must be a number") {
        $0["durationMs"] = "12"
    },
    Rule("screen without name", "screen", field: "name", "missing") { $0["name"] = nil },
    Rule("screen path of 1025 characters", "screen", field: "path", "longer than 1024 characters") {
        $0["path"] = String(repeating: "/", count: 1025)
    },
    Rule("screen negative durationMs", "screen", field: "durationMs", "must not be negative") { $0["durationMs"] = -5 },
    Rule("screen with 21 typed properties", "screen", field: "typedProperties", "more than 20 properties") {
        $0["typedProperties"] = props(21)
    },
    Rule("userProperties without properties", "userProperties", field: "properties", "missing") {
        $0["properties"] = nil
    },
    Rule("userProperties with no property", "userProperties", field: "properties", "must hold at least 1 property") {
        $0["properties"] = [[String: Any]]()
    },
    Rule("userProperties with 21 properties", "userProperties", field: "properties", "more than 20 properties") {
        $0["properties"] = props(21)
    },
    Rule("userProperties value too long", "userProperties", field: "properties[0].value", "longer than 125 characters") {
        $0["properties"] = [["type": "string", "name": "a", "value": String(repeating: "v", count: 126)]]
    },
    Rule("location without latitude", "location", field: "latitude", "missing") { $0["latitude"] = nil },
    Rule("location latitude 90.5", "location", field: "latitude", "must be between -90 and 90") { $0["latitude"] = 90.5 },
    Rule("location longitude -181", "location", field: "longitude", "must be between -180 and 180") {
        $0["longitude"] = -181
    },
    Rule("location latitude a string", "location", field: "latitude", "must be a number") { $0["latitude"] = "48" },
    Rule("location negative accuracy", "location", field: "accuracy", "must not be negative") { $0["accuracy"] = -1 },
    Rule("log not an object", field: "", "must be an object") { $0 = ["__replace__": true] },
    // SPEC M8: a key W does not define for the log's type is refused with its path, wherever it is.
    Rule("unknown top-level key", field: "futureField", "unknown key (not defined for event logs)") {
        $0["futureField"] = ["nested": [1, 2, 3]]
    },
    Rule("unknown key set to null", field: "foo", "unknown key (not defined for event logs)") { $0["foo"] = NSNull() },
    Rule("another type's key on an event", field: "latitude", "unknown key (not defined for event logs)") {
        $0["latitude"] = 1
    },
    Rule("durationMs on startSession", "startSession", field: "durationMs",
         "unknown key (not defined for startSession logs)") { $0["durationMs"] = 1 },
    Rule("name on location", "location", field: "name", "unknown key (not defined for location logs)") {
        $0["name"] = "x"
    },
    Rule("typedProperties on userProperties", "userProperties", field: "typedProperties",
         "unknown key (not defined for userProperties logs)") { $0["typedProperties"] = [[String: Any]]() },
    Rule("unknown device key", field: "device.screenSize", "unknown key (not defined for device)") {
        device { $0["screenSize"] = "1920x1080" }(&$0)
    },
    Rule("unknown typed-property key", field: "typedProperties[1].unit", "unknown key (a typed property has type, name, value)") {
        $0["typedProperties"] = [["type": "long", "name": "a", "value": 1],
                                 ["type": "long", "name": "b", "value": 2, "unit": "s"]]
    },
    // SPEC M8, T3: the legacy map within T3's limits.
    Rule("event with 21 legacy properties", field: "properties", "more than 20 properties") {
        $0["properties"] = Dictionary(uniqueKeysWithValues: (0..<21).map { ("k\($0)", "v") })
    },
    Rule("legacy properties not an object", field: "properties", "must be an object of strings") {
        $0["properties"] = [["type": "string", "name": "a", "value": "b"]]
    },
    Rule("legacy property not a string", "screen", field: "properties.n", "must be a string") {
        $0["properties"] = ["n": 3]
    },
    Rule("legacy property value of 126 characters", field: "properties.k", "longer than 125 characters") {
        $0["properties"] = ["k": String(repeating: "v", count: 126)]
    },
    Rule("legacy property key of 126 characters", field: "properties." + String(repeating: "k", count: 126),
         "key longer than 125 characters") {
        $0["properties"] = [String(repeating: "k", count: 126): "v"]
    },
    Rule("legacy property with an empty key", field: "properties.", "key must not be empty") {
        $0["properties"] = ["": "v"]
    },
    Rule("legacy property key twice", field: "properties.a", "duplicate key") {
        $0["properties"] = RawJSON(#"{"a":"1","a":"2"}"#)
    },
]

/// The log as the server reads it back (`GET /_mock/logs`): its span of the body, minified.
private func recorded(_ log: ValidatedLog, in body: String) -> String {
    String(decoding: StoredLogReader.minified(Array(body.utf8)[log.span]), as: UTF8.self)
}

private func validate(_ text: String) -> Result<[ValidatedLog], ValidationFailure> {
    LogValidator.validate(body: Array(text.utf8))
}

@Suite("Validation (SPEC M1, W2, T2–T3)")
struct ValidationTests {
    // SPEC W2, T2, T3
    @Test(arguments: validRows)
    func validLogIsAccepted(_ row: Rule) throws {
        var log = Wire.log(row.type)
        row.change(&log)
        let result = validate(Wire.json(["logs": [log]]))
        if case .failure(let failure) = result { Issue.record("refused: \(failure.reason)") }
    }

    // SPEC M1, W2, T2, T3: the reason names the first bad log's index and field.
    @Test(arguments: invalidRows)
    func invalidLogIsRefusedWithItsReason(_ row: Rule) throws {
        var bad = Wire.log(row.type)
        row.change(&bad)
        let badJSON = bad["__replace__"] != nil ? "[1,2]" : Wire.json(bad)
        let body = #"{"logs":[\#(Wire.json(Wire.log("event"))),\#(badJSON),\#(Wire.json(["oops": 1]))]}"#
        guard case .failure(let failure) = validate(body) else {
            Issue.record("accepted")
            return
        }
        #expect(failure.index == 1)
        #expect(failure.field == row.field)
        #expect(failure.message == row.message)
        let prefix = row.field?.isEmpty == false ? "logs[1].\(row.field ?? ""): " : "logs[1]: "
        #expect(failure.reason == prefix + (row.message ?? ""))
    }

    // SPEC M1: container rules.
    @Test(arguments: [
        ("", "body", "not valid JSON: unexpected end of input at byte 0"),
        ("[]", "body", "must be a JSON object"),
        (#"{"log":[]}"#, "logs", "missing"),
        (#"{"logs":{}}"#, "logs", "must be an array"),
        (#"{"logs":[]}"#, "logs", "must not be empty"),
        (#"{"logs":[1]} x"#, "body", "not valid JSON: unexpected data after the JSON value at byte 13"),
        (#"{"sentAt":"yesterday","logs":[1]}"#, "sentAt", LogValidator.timestampHint),
        // SPEC M8: the container too holds only what W defines.
        (#"{"logs":[1],"batchId":"x"}"#, "batchId", "unknown key (W defines logs, sentAt)"),
        ("{\"logs\":[\"\u{1}\"]}", "", "not valid JSON: control character in a string at byte 10"),
    ])
    func containerIsChecked(_ body: String, _ field: String, _ message: String) {
        guard case .failure(let failure) = validate(body) else {
            Issue.record("accepted \(body)")
            return
        }
        #expect(failure.field == field)
        #expect(failure.message == message)
    }

    // SPEC M1: a JSON syntax error inside a log still names that log.
    @Test func syntaxErrorInsideALogNamesIt() {
        let good = Wire.json(Wire.log("event"))
        let body = #"{"sentAt":"2026-11-22T07:34:00.000Z","logs":[\#(good),\#(good),{"type":"event","id":tru}]}"#
        guard case .failure(let failure) = validate(body) else {
            Issue.record("accepted")
            return
        }
        #expect(failure.index == 2)
        #expect(failure.reason.hasPrefix("logs[2]: not valid JSON: invalid literal"))
    }

    // SPEC M1: strict JSON — the parser refuses what JSONSerialization would refuse.
    @Test(arguments: [#"{"logs":[01]}"#, #"{"logs":[1.]}"#, #"{"logs":[-]}"#, #"{"logs":["\x"]}"#,
                      #"{"logs":["\ud800"]}"#, #"{"logs":[1,]}"#, #"{"logs":[1] "#, #"{"logs" [1]}"#,
                      #"{"logs":[nul]}"#])
    func malformedJSONIsRefused(_ body: String) {
        guard case .failure(let failure) = validate(body) else {
            Issue.record("accepted \(body)")
            return
        }
        #expect(failure.message.hasPrefix("not valid JSON"))
    }

    // SPEC M1: invalid UTF-8 is not JSON.
    @Test func invalidUTF8IsRefused() {
        var bytes = Array(#"{"logs":[""#.utf8)
        bytes += [0xC3, 0x28]
        bytes += Array(#""]}"#.utf8)
        guard case .failure(let failure) = LogValidator.validate(body: bytes) else {
            Issue.record("accepted")
            return
        }
        #expect(failure.message.hasPrefix("not valid JSON: invalid UTF-8"))
    }

    // SPEC M2: what is recorded of a valid log — its id, timestamp and the log on one line.
    @Test func validLogKeepsItsFacts() throws {
        let id = "9F1E4C1A-2B3C-4D5E-8F60-718293A4B5C6"
        let body = "{\"logs\":[\n  {\"type\": \"event\", \"id\": \"\(id)\", \"timestamp\": \"2026-11-22T07:33:46.123Z\",\n"
            + "   \"device\": \(Wire.json(Wire.device)), \"name\": \"a b\"}\n]}"
        let logs = try validate(body).get()
        #expect(logs.count == 1)
        #expect(logs[0].id.uuidString == id.lowercased())
        #expect(logs[0].timestampMs == 1_795_332_826_123)
        #expect(logs[0].name == "a b")
        let json = recorded(logs[0], in: body)
        #expect(!json.contains("\n"))
        #expect(json.contains(#""name":"a b""#))
    }

    // SPEC M1, M8: the parser copies a device whose bytes equal the previous log's (SPEC M10); a later log whose
    // device differs is still validated in full, and each log keeps its own bytes.
    @Test func aDifferentDeviceLaterInTheBatchIsStillValidated() throws {
        var logs = Wire.events(3)
        var body = Wire.json(["logs": logs])
        var ok = try validate(body).get()
        #expect(ok.count == 3)
        #expect(Set(ok.map { recorded($0, in: body) }).count == 3)
        var device = Wire.device
        device["timeZoneOffset"] = 900
        logs[2]["device"] = device
        guard case .failure(let failure) = validate(Wire.json(["logs": logs])) else {
            Issue.record("accepted a device with timeZoneOffset 900")
            return
        }
        #expect(failure.reason == "logs[2].device.timeZoneOffset: must be between -840 and 840")
        // A second device that is valid but different is accepted, and the first one again after it.
        device["timeZoneOffset"] = 120
        logs[1]["device"] = device
        logs[2]["device"] = Wire.device
        body = Wire.json(["logs": logs])
        ok = try validate(body).get()
        #expect(ok.count == 3)
        #expect(recorded(ok[1], in: body).contains(#""timeZoneOffset":120"#))
    }

    // SPEC M1, M10: a device whose bytes repeat one parsed earlier is one token on the tape; when that earlier
    // one was never validated (it was a repeated `device` key, which the first occurrence overrides), the
    // repeat is still validated, through the earlier object's members.
    @Test func aRepeatedDeviceIsValidatedWhenItsTwinWasNot() throws {
        var bad = Wire.device
        bad["timeZoneOffset"] = 900
        var logs = Wire.events(3)
        logs[1]["device"] = RawJSON(Wire.json(Wire.device) + #","device":"# + Wire.json(bad))
        logs[2]["device"] = bad
        guard case .failure(let failure) = validate(Wire.json(["logs": logs])) else {
            Issue.record("accepted a device with timeZoneOffset 900")
            return
        }
        #expect(failure.reason == "logs[2].device.timeZoneOffset: must be between -840 and 840")
        // With the same device in every log, every log past the first carries one token for it.
        let body = Array(Wire.json(["logs": Wire.events(4)]).utf8)
        let (elided, full) = try body.withUnsafeBufferPointer { buffer in
            (try JSONTape.parse(buffer, elidingRepeatedDevices: true).count, try JSONTape.parse(buffer).count)
        }
        let deviceTokens = 1 + 2 * Wire.device.count
        #expect(full - elided == 3 * (deviceTokens - 1))
    }

    // SPEC M1, T3: the string scanner reads sixteen, then eight bytes at a time (SPEC M10); a quote, backslash,
    // control character or non-ASCII byte is found wherever it falls in those chunks.
    @Test func specialBytesAreFoundAtEveryOffsetOfALongString() throws {
        for offset in 0..<33 {
            let pad = String(repeating: "a", count: offset)
            let tail = String(repeating: "b", count: 33 - offset)
            // A control character is refused.
            let control = "{\"logs\":[{\"type\":\"event\",\"name\":\"\(pad)\u{01}\(tail)\"}]}"
            guard case .failure(let failure) = validate(control) else {
                Issue.record("accepted a control character at offset \(offset)")
                continue
            }
            #expect(failure.message.contains("control character"))
            // An escaped quote and a non-ASCII character are kept, and counted as one character each.
            var event = Wire.event(name: pad + "\"é" + tail)
            event["typedProperties"] = [["type": "string", "name": "k", "value": pad + "\\ü" + tail]]
            let logs = try validate(Wire.json(["logs": [event]])).get()
            #expect(logs.first?.name == pad + "\"é" + tail)
            // 125 characters is the limit: the non-ASCII character counts once, not as its two bytes.
            var long = Wire.event()
            long["typedProperties"] = [["type": "string", "name": "k",
                                        "value": String(repeating: "x", count: 124 - offset) + "é" + pad]]
            #expect((try? validate(Wire.json(["logs": [long]])).get()) != nil)
        }
    }

    // SPEC W2: timestamps round-trip and reject impossible dates.
    @Test func timestampsParseAndFormat() {
        #expect(ISOTimestamp.parse("1970-01-01T00:00:00.000Z") == .valid(epochMs: 0))
        #expect(ISOTimestamp.parse("2000-02-29T12:00:00.001Z") == .valid(epochMs: 951_825_600_001))
        #expect(ISOTimestamp.parse("1900-02-29T12:00:00.001Z") == .notARealDate)
        #expect(ISOTimestamp.parse("2026-13-01T00:00:00.000Z") == .notARealDate)
        #expect(ISOTimestamp.parse("2026-1-01T00:00:00.000Z") == .badFormat)
        #expect(ISOTimestamp.format(epochMs: 1_795_332_826_123) == "2026-11-22T07:33:46.123Z")
        #expect(ISOTimestamp.format(epochMs: -1) == "1969-12-31T23:59:59.999Z")
        #expect(HTTPDate.format(epochSeconds: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
    }
}
