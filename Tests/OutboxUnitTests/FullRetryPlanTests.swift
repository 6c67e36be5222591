import Testing
@testable import Outbox

/// Every SQLITE_FULL retry of the store, decided without SQLite or a full disk (SPEC S2, S3, S7, R2).
@Suite("Full retry plan")
struct FullRetryPlanTests {
    /// Runs `plan` through failures, with `relief` saying whether each relief tried succeeds; returns the margins
    /// the attempts asked for, and how many attempts ran before the plan gave up.
    static func run(_ plan: FullRetryPlan, relief: (Int) -> Bool = { _ in false }) -> (margins: [Int], attempts: Int, reliefs: Int) {
        var plan = plan
        var margins = [plan.margin]
        var attempts = 1
        var reliefs = 0
        while plan.mayRetry {
            var relieved = false
            if plan.triesRelief {
                reliefs += 1
                relieved = relief(reliefs)
            }
            guard plan.retry(diskRelieved: relieved) else { break }
            margins.append(plan.margin)
            attempts += 1
        }
        return (margins, attempts, reliefs)
    }

    // SPEC S2, S7: an append asks, after each failure, for what the file could not grow into plus a margin that
    // doubles; six attempts in all, the disk relieved before each retry.
    @Test func anAppendAsksForMoreRoomEachTime() {
        let plan = FullRetryPlan.appending(pageSize: 4096, batchBytes: 8000)
        #expect(plan.extraBytes(usedBytes: 10, budgetBytes: 1000) == 0, "the first attempt asks for its own room only")
        let run = Self.run(plan)
        #expect(run.attempts == 6 && run.reliefs == 5)
        let first = 8 * 4096 + 1000
        #expect(run.margins == [0, first, 2 * first, 4 * first, 8 * first, 16 * first])

        var retried = plan
        let again = retried.retry(diskRelieved: false)
        #expect(again)
        #expect(retried.checkpointsWithoutRelief(diskRelieved: false), "a disk not relieved gets its WAL checkpointed")
        #expect(!retried.checkpointsWithoutRelief(diskRelieved: true))
        #expect(retried.extraBytes(usedBytes: 600, budgetBytes: 1000) == 400 + first)
        #expect(retried.extraBytes(usedBytes: 1600, budgetBytes: 1000) == first, "a store over its budget asks the margin")
    }

    // SPEC S7: a write that frees room is retried only on a relieved disk, twice at most.
    @Test func aDeleteIsRetriedOnlyWhenTheDiskWasRelieved() {
        #expect(Self.run(.freeingRoom, relief: { _ in false }).attempts == 1)
        let relieved = Self.run(.freeingRoom, relief: { _ in true })
        #expect(relieved.attempts == 3 && relieved.margins == [0, 0, 0], "retries ask for no room")
        #expect(Self.run(.freeingRoom, relief: { $0 == 1 }).attempts == 2)
        #expect(!FullRetryPlan.freeingRoom.checkpointsWithoutRelief(diskRelieved: false))
    }

    // SPEC S7: a small write's first relief is a retry of its own that asks for no room; after it, each failure
    // evicts for twice the write and the slack, doubling, and the relief is not tried again.
    @Test func aSmallWriteIsRelievedOnceThenEvicts() {
        let plan = FullRetryPlan.smallWrite(bytes: 100, slackBytes: 50)
        let relievedFirst = Self.run(plan, relief: { _ in true })
        #expect(relievedFirst.reliefs == 1)
        #expect(relievedFirst.margins == [0, 0, 300, 600, 1200, 2400, 4800], "the relief's retry is not an attempt")
        let neverRelieved = Self.run(plan, relief: { _ in false })
        #expect(neverRelieved.reliefs == 5 && neverRelieved.margins == [0, 300, 600, 1200, 2400, 4800],
                "tried at each failure until it succeeds")
        let relievedLater = Self.run(plan, relief: { $0 == 2 })
        #expect(relievedLater.margins == [0, 300, 300, 600, 1200, 2400, 4800] && relievedLater.reliefs == 2)
    }

    // SPEC R2: requeued letters ask for room as an append, without relieving the disk; dead-lettering falls back
    // twice (drop old letters, then the new ones) and asks for no room.
    @Test func deadLettersRetryWithoutRelief() {
        let requeue = Self.run(.requeueing(pageSize: 1024))
        #expect(requeue.reliefs == 0 && requeue.margins == [0, 8192, 16384, 32768, 65536, 131072])
        let letters = Self.run(.deadLettering)
        #expect(letters.attempts == 3 && letters.reliefs == 0 && letters.margins == [0, 0, 0])
    }
}
