import Testing
@testable import Outbox

@Suite("Intake: the queue between callers and the loop")
struct IntakeTests {
    private func draft(_ body: String) -> EventDraft {
        EventDraft(priority: .normal, wallMs: 1, monoNs: 2, body: Array(body.utf8))
    }

    private func admit(_ intake: Intake, _ body: String) throws {
        _ = try Array(body.utf8).withUnsafeBytes { bytes in
            try intake.admit(name: nil, draft: draft(""), body: bytes, onLoopThread: false)
        }
    }

    private func bodies(_ batch: IntakeBatch) -> [String] {
        batch.items.compactMap { item -> String? in
            guard case .event(let draft) = item else { return nil }
            return String(decoding: batch.body(of: draft), as: UTF8.self)
        }
    }

    // SPEC T1, T5: each event's body comes out of the shared byte arena exactly as the caller wrote it, in order,
    // across drains whose buffers are recycled.
    @Test func bodiesSurviveTheArenaAndItsRecycling() throws {
        let intake = Intake(enabled: true, names: [], maxNames: 200, capacity: 1000)
        for round in 0..<3 {
            let expected = (0..<50).map { #""name":"e\#(round)-\#($0)","pad":"\#(String(repeating: "x", count: $0))""# }
            for body in expected { try admit(intake, body) }
            var batch = intake.takeAll()
            #expect(bodies(batch) == expected)
            intake.recycle(&batch)
            #expect(batch.items.isEmpty && batch.bytes.isEmpty)
        }
    }

    // Back-pressure bounds the queue's memory as well as its length: past the byte bound a caller waits for room
    // (the waiting itself is the same as for `intakeCapacity`, see EngineTests).
    @Test func theQueueIsFullOnceItsBodiesReachTheByteBound() throws {
        let intake = Intake(enabled: true, names: [], maxNames: 200, capacity: 1000, byteCapacity: 1000)
        let body = String(repeating: "b", count: 300)
        for _ in 0..<3 { try admit(intake, body) }
        #expect(!intake.peek().full)  // 900 bytes queued
        try admit(intake, body)
        #expect(intake.peek().full)  // 1200 bytes queued: the loop is told to commit now
        let batch = intake.takeAll()
        #expect(batch.items.count == 4 && batch.bytes.count == 1200)
        #expect(!intake.peek().full)
    }
}
