import Foundation
import Testing
@testable import OutboxMock

/// Amplitude's HTTP V2 API on the mock (SPEC D13, V1–V4): strict validation with the events named by index, the
/// request-level refusals, the throttle's shape, de-duplication by `insert_id`.
@Suite("Amplitude vendor over HTTP (SPEC D13, V1–V4)")
struct AmplitudeVendorTests {
    static func post(_ port: Int, _ body: String, install: String = "inst-1") throws -> TestResponse {
        try TestConnection(port: port).request("POST", "/2/httpapi", headers: [("Content-Type", "application/json"),
                                                                              ("Install-ID", install)],
                                               body: Array(body.utf8))
    }

    static let good = #"{"event_type":"Played","device_id":"device-1","time":1795000000000,"insert_id":"id-1"}"#

    @Test func validEventsAreIngestedOnceByInsertID() throws {
        try withServer { (server: MockServer) throws in
            let body = #"{"api_key":"k","events":[\#(Self.good)]}"#
            let first = try Self.post(server.port, body)
            #expect(first.status == 200 && first.json["events_ingested"] as? Int == 1)
            #expect(try Self.post(server.port, body).status == 200)
            #expect(server.stats().vendor(.amplitude).tuple == [2, 2, 1, 1, 0])
        }
    }

    // A request with invalid events is refused whole, naming them by index and field; the others are not ingested.
    @Test func invalidEventsAreNamedByIndex() throws {
        try withServer { (server: MockServer) throws in
            let short = #"{"event_type":"Played","device_id":"device-1","user_id":"abc","insert_id":"id-2"}"#
            let untyped = #"{"device_id":"device-1","insert_id":"id-3"}"#
            let response = try Self.post(server.port, #"{"api_key":"k","events":[\#(Self.good),\#(short),\#(untyped)]}"#)
            #expect(response.status == 400)
            #expect((response.json["events_with_invalid_fields"] as? [String: [Int]])?["user_id"] == [1])
            #expect((response.json["events_with_missing_fields"] as? [String: [Int]])?["event_type"] == [2])
            #expect(server.vendorEvents().isEmpty)
        }
    }

    @Test func aMissingKeyIsNamedAtTheTop() throws {
        try withServer { (server: MockServer) throws in
            let response = try Self.post(server.port, #"{"events":[\#(Self.good)]}"#)
            #expect(response.status == 400 && response.json["missing_field"] as? String == "api_key")
        }
    }

    // SPEC D13: a 429 the scenario injects carries Amplitude's throttle shape, the request's device throttled.
    @Test func anInjected429NamesTheThrottledDevice() throws {
        try withServer(scenario: #"{"rules":[{"match":{"vendor":"amplitude"},"respond":{"status":429}}]}"#) {
            (server: MockServer) throws in
            let response = try Self.post(server.port, #"{"api_key":"k","events":[\#(Self.good)]}"#, install: "inst-9")
            #expect(response.status == 429)
            #expect(response.json["eps_threshold"] as? Int == 30)
            #expect((response.json["throttled_devices"] as? [String: Int])?["inst-9"] != nil)
        }
    }
}
