import Foundation
import Testing
import OutboxTestSupport
@testable import Outbox

/// Encodes as App Center's wire (the fake sender reads each log's `i` from the body) and reads answers as `reader`
/// does: the machine and a real wire's reading of its vendor's partial answers, together.
struct ReadingWire: DeliveryWire {
    var reader: any DeliveryWire
    var installID = UUID()
    var destination: Destination { reader.destination }
    func request(endpoint: String, headers: [HeaderField]) -> DeliveryDriver.RequestSettings {
        AppCenterWire(appSecret: "s", installID: installID).request(endpoint: endpoint, headers: headers)
    }
    func encode(_ logs: [StoredLog], contexts: [Int64: [UInt8]], times: WireTimes) -> [UInt8] {
        AppCenterWire(appSecret: "s", installID: installID).encode(logs, contexts: contexts, times: times)
    }
    func outcome(of result: TransferResult, nowWallMs: Int64) -> DeliveryMachine.Outcome {
        reader.outcome(of: result, nowWallMs: nowWallMs)
    }
}

@Suite("Logs a server refuses by name (SPEC D13, D14, D5)")
struct NamedRefusalTests {
    static let amplitude = ReadingWire(reader: AmplitudeWire(apiKey: "k", installID: UUID()))
    static let mixpanel = ReadingWire(reader: MixpanelWire(projectToken: "t", serviceAccountUser: "", serviceAccountSecret: "",
                                                           projectID: nil, installID: UUID()))

    private func rig(_ wire: ReadingWire, logs: Int) -> (DeliveryRig, [Int64]) {
        let rig = DeliveryRig(wire: wire) { $0.batchSize = logs }
        let seqs = rig.track(logs)
        #expect(rig.sender.open.count == 1)
        return (rig, seqs)
    }

    /// D5's identity over what the rig tracked: every log in exactly one term.
    private func expectIdentity(_ rig: DeliveryRig, tracked: Int) {
        let counters = rig.driver.counters
        #expect(rig.queue.stored + counters.delivered + counters.serverRejected + rig.queue.deadLetters.count == tracked)
    }

    // SPEC D13: the indices Amplitude names are dead-lettered with the field; the others go again at once, alone
    // (no bisection, no timer), and are delivered.
    @Test func amplitudeDeadLettersTheNamedEventsAndResendsTheRestAtOnce() {
        let (rig, seqs) = rig(Self.amplitude, logs: 5)
        rig.sender.answer(400, body: #"{"code":400,"error":"Request missing required field","events_with_invalid_fields":{"user_id":[1,3]},"events_with_missing_fields":{"event_type":[3]}}"#)
        #expect(rig.queue.deadLetters.map(\.seq) == [seqs[1], seqs[3]])
        #expect(rig.queue.deadLetters.allSatisfy { $0.status == 400 && $0.reason.contains("user_id") })
        #expect(rig.sender.open.count == 1)
        #expect(rig.sender.open.first?.seqs == [seqs[0], seqs[2], seqs[4]])
        rig.sender.answer(200)
        #expect(rig.sender.all.count == 2)
        #expect(rig.queue.stored == 0)
        #expect(rig.driver.counters.delivered == 3)
        #expect(rig.driver.counters.serverRejected == 0)
        expectIdentity(rig, tracked: 5)
    }

    // SPEC D13: a batch whose every event is named is all dead-lettered and nothing is sent again.
    @Test func amplitudeNamingEveryEventLeavesNothingToResend() {
        let (rig, _) = rig(Self.amplitude, logs: 2)
        rig.sender.answer(400, body: #"{"code":400,"events_with_invalid_fields":{"time":[0,1]}}"#)
        #expect(rig.queue.deadLetters.count == 2)
        #expect(rig.sender.open.isEmpty && rig.sender.all.count == 1)
        #expect(rig.queue.stored == 0)
        expectIdentity(rig, tracked: 2)
    }

    // SPEC D13: a 400 about the key, or naming no event, stops like 401: nothing dead-lettered, everything kept.
    @Test(arguments: [
        #"{"code":400,"error":"Invalid API key: k"}"#,
        #"{"code":400,"error":"Request missing required field","missing_field":"api_key"}"#,
    ])
    func amplitudesRefusalOfTheRequestStopsAndKeepsTheBatch(body: String) {
        let (rig, _) = rig(Self.amplitude, logs: 4)
        rig.sender.answer(400, body: body)
        #expect(rig.queue.deadLetters.isEmpty)
        #expect(rig.queue.stored == 4)
        #expect(rig.driver.disabledReason?.contains("400") == true)
        rig.advance(ms: 3_600_000)
        #expect(rig.sender.all.count == 1)
    }

    // SPEC D13: the field Amplitude names is the server's text: a dead letter's reason and a stop's reason keep at
    // most 300 characters of it, however long it is (the amplitude-response fuzz target's bound).
    @Test func amplitudesFieldNamesAreBoundedInTheReasons() {
        let long = String(repeating: "f", count: 10_000)
        let (rig, seqs) = rig(Self.amplitude, logs: 2)
        rig.sender.answer(400, body: #"{"code":400,"events_with_invalid_fields":{"\#(long)":[1]}}"#)
        #expect(rig.queue.deadLetters.map(\.seq) == [seqs[1]])
        #expect(rig.queue.deadLetters.first.map { $0.reason.count == 300 && $0.reason.hasPrefix("Amplitude: invalid field fff") } == true)
        let (stopped, _) = self.rig(Self.amplitude, logs: 2)
        stopped.sender.answer(400, body: #"{"code":400,"error":"Request missing required field","missing_field":"\#(long)"}"#)
        #expect(stopped.queue.deadLetters.isEmpty && stopped.queue.stored == 2)
        #expect(stopped.driver.disabledReason.map { $0.contains("fff") && $0.count < 400 } == true)
    }

    // SPEC D13: Amplitude's per-device throttle is retried and loses nothing.
    @Test func amplitudesThrottleIsRetriedAndLosesNothing() {
        let (rig, seqs) = rig(Self.amplitude, logs: 3)
        rig.sender.answer(429, body: #"{"code":429,"error":"Too many requests for some devices and users","eps_threshold":30,"throttled_devices":{"d":31}}"#)
        #expect(rig.queue.deadLetters.isEmpty && rig.queue.stored == 3)
        rig.advance(ms: 10_000)
        #expect(rig.sender.open.first?.seqs == seqs)
        rig.sender.answer(200)
        #expect(rig.queue.stored == 0 && rig.driver.counters.delivered == 3)
    }

    // SPEC D13, R1: a 400 whose indices name none of the batch's events (or none at all) is R1's: bisected down to the
    // refused log.
    @Test(arguments: [#"{"code":400,"error":"bad"}"#, #"{"code":400,"events_with_invalid_fields":{"x":[7]}}"#])
    func amplitudes400NamingNoneOfTheBatchIsBisected(body: String) {
        let (rig, _) = rig(Self.amplitude, logs: 4)
        rig.sender.answer(400, body: body)
        #expect(rig.sender.open.count == 2)
        #expect(rig.queue.deadLetters.isEmpty)
    }

    // SPEC D14: Mixpanel's 400 is a partial success: the named records are dead-lettered with its field and message,
    // the batch is settled (the others imported), nothing is sent again, nothing counted as server_rejected.
    @Test func mixpanelDeadLettersTheFailedRecordsAndSettlesTheRest() {
        let (rig, seqs) = rig(Self.mixpanel, logs: 4)
        rig.sender.answer(400, body: #"{"code":400,"error":"some data points in the request failed validation","num_records_imported":3,"status":"Bad Request","failed_records":[{"index":2,"insert_id":"x","field":"properties.distinct_id","message":"'properties.distinct_id' is invalid"}]}"#)
        #expect(rig.queue.deadLetters.map(\.seq) == [seqs[2]])
        #expect(rig.queue.deadLetters.first?.reason == "Mixpanel: properties.distinct_id: 'properties.distinct_id' is invalid")
        rig.advance(ms: 3_600_000)
        #expect(rig.sender.all.count == 1)
        #expect(rig.queue.stored == 0)
        #expect(rig.driver.counters.delivered == 3)
        #expect(rig.driver.counters.serverRejected == 0)
        expectIdentity(rig, tracked: 4)
    }

    // SPEC D14: a 400 without a readable `failed_records` is R1's: bisected, never settled.
    @Test(arguments: [#"{"error":"bad"}"#, "not json", #"{"failed_records":"no"}"#, #"{"failed_records":[{"index":"a"}]}"#])
    func mixpanels400WithoutFailedRecordsIsBisected(body: String) {
        let (rig, _) = rig(Self.mixpanel, logs: 4)
        rig.sender.answer(400, body: body)
        #expect(rig.sender.open.count == 2)
        #expect(rig.queue.stored == 4)
        #expect(rig.driver.counters.delivered == 0)
    }
}
