import NIOHTTP1
import Testing
@testable import OutboxMock

/// A request's fate as a pure function of the scenario's decision and the request (SPEC M2, M3, M8, V2): what the
/// client gets and whether its logs count as delivered, without a server, a lock or a recording.
@Suite("Request fate")
struct FateTests {
    static func request(logs: Int = 2, normal: HTTPResponse = .success) -> PreparedRequest {
        var batch = VendorBatch(vendor: .appcenter, normal: normal, injected: AppCenterWire.response(status:))
        batch.eventCount = logs
        if normal.status == 200 {
            batch.events = (0..<logs).map {
                VendorEvent(ValidatedLog(id: UUIDKey(high: 1, low: UInt64($0)), timestampMs: 0, type: .event, name: "e",
                                         span: 0..<1))
            }
        }
        return PreparedRequest(method: .POST, uri: "/logs?api-version=1.0.0", path: "/logs", install: nil, batch: batch,
                               cutoffs: [], wireBytes: 0, contentEncoding: nil, startNs: 0, vendor: .appcenter)
    }

    static func decision(_ outcome: Scenario.Outcome?, latencyMs: Int = 0) -> MockCore.Decision {
        MockCore.Decision(outcome: outcome, fault: outcome?.kind, latencyMs: latencyMs, refuseSeconds: 2,
                          nowNs: 1_000_000_000, atMs: 0, skewMs: 0)
    }

    static func status(_ fate: MockCore.Fate) -> Int? {
        if case .respond(let answer) = fate.action { return answer.response.status }
        return nil
    }

    // SPEC M2: the healthy answer records what it accepted; a refused batch records nothing.
    @Test func theHealthyAnswerRecordsWhatItAccepted() {
        let fate = MockCore.fate(of: Self.request(), Self.decision(nil))
        #expect(Self.status(fate) == 200 && fate.records && fate.normalHandling)
        let refused = MockCore.fate(of: Self.request(normal: .json(400, "Invalid", reason: "x")), Self.decision(nil))
        #expect(Self.status(refused) == 400 && !refused.records && refused.normalHandling)
    }

    // SPEC M3, V2: an injected status records only when the client takes it as delivered, in the wire's shape, with
    // the rule's latency added to its delay.
    @Test func anInjectedStatusRecordsOnlyWhenTakenAsDelivered() {
        let failed = MockCore.fate(of: Self.request(), Self.decision(.respond(.init(status: 503, delayMs: 10)), latencyMs: 5))
        guard case .respond(let answer) = failed.action else { Issue.record("no answer"); return }
        #expect(answer.response.status == 503 && answer.delayMs == 15 && !failed.records && !failed.normalHandling)
        #expect(String(decoding: answer.response.body, as: UTF8.self).contains(#""status":"Error""#))
        let accepted = MockCore.fate(of: Self.request(), Self.decision(.respond(.init(status: 202))))
        #expect(Self.status(accepted) == 202 && accepted.records)
        let slow = MockCore.fate(of: Self.request(), Self.decision(.respond(.init(delayMs: 100))))
        #expect(Self.status(slow) == 200 && slow.records && slow.normalHandling)
    }

    // SPEC M3: a lost acknowledgement records; a reset, a hang, malformed bytes and a refused port do not.
    @Test func faultsRecordOnlyALostAcknowledgement() {
        #expect(MockCore.fate(of: Self.request(), Self.decision(.dropAfterBody)).records)
        for outcome: Scenario.Outcome in [.reset, .hang, .malformed, .dropBeforeBody] {
            let fate = MockCore.fate(of: Self.request(), Self.decision(outcome))
            #expect(!fate.records && fate.action.kind == outcome.kind)
        }
        let refused = MockCore.fate(of: Self.request(), Self.decision(.refuse(durationSeconds: nil)))
        guard case .refuse(let outage) = refused.action else { Issue.record("not refused"); return }
        #expect(outage.untilNs == 3_000_000_000 && outage.durationSeconds == 2 && !refused.records)
    }

    // One vocabulary: every outcome's kind is a fault kind, named as the stats, requests and recordings name it.
    @Test func faultKindsKeepTheirNames() {
        #expect(Scenario.Outcome.dropAfterBody.kind.rawValue == "drop_after_body")
        #expect(FaultKind.allCases.filter(\.isAction).map(\.rawValue).sorted()
                == ["drop_after_body", "drop_before_body", "hang", "malformed", "refuse", "reset"])
        #expect(Vendor.allCases.allSatisfy { $0.wire.vendor == $0 })
        #expect(Vendor.route(path: "/logs") == .appcenter && Vendor.route(path: "/v1/batch") == .segment)
        #expect(Vendor.route(path: "/nowhere") == nil)
    }
}
