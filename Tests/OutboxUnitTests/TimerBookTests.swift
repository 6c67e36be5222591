import Testing
@testable import Outbox

private let second: Int64 = 1_000_000_000

@Suite("Duration timers, pure (SPEC A4)")
struct TimerBookTests {
    // SPEC A4: a timer's duration is the monotonic time it ran.
    @Test func aTimerMeasuresTheMonotonicTimeBetweenStartAndEnd() {
        var book = TimerBook()
        let (handle, _) = book.start("video", nowNs: 10 * second)
        let ended = book.end(.handle(handle), nowNs: 13 * second + 250_000)
        #expect(ended == TimerBook.Ended(name: "video", durationNs: 3 * second + 250_000))
        #expect(TimerBook.milliseconds(ended.durationNs ?? -1) == 3000.25)
        #expect(book.count == 0)
    }

    // SPEC A4: paused time is excluded; pausing a paused timer and resuming a running one are no-ops.
    @Test func pausedTimeIsExcludedAndRepeatedPauseOrResumeChangesNothing() {
        var book = TimerBook()
        _ = book.start("read", nowNs: 0)
        book.resume(.name("read"), nowNs: 1 * second)       // running already: no-op
        book.pause(.name("read"), nowNs: 2 * second)        // ran 2 s
        book.pause(.name("read"), nowNs: 5 * second)        // paused already: no-op
        book.resume(.name("read"), nowNs: 10 * second)
        #expect(book.end(.name("read"), nowNs: 13 * second).durationNs == 5 * second)
    }

    // SPEC A4: background time is excluded.
    @Test func backgroundTimeIsExcluded() {
        var book = TimerBook()
        _ = book.start("session-timer", nowNs: 0)
        book.enterBackground(nowNs: 4 * second)
        book.enterForeground(nowNs: 100 * second)
        #expect(book.end(.name("session-timer"), nowNs: 101 * second).durationNs == 5 * second)
    }

    // SPEC A4: a timer the user paused stays paused across background and foreground.
    @Test func aTimerTheUserPausedStaysPausedAcrossBackgroundAndForeground() {
        var book = TimerBook()
        let (paused, _) = book.start("t", nowNs: 0)
        let (running, _) = book.start("t", nowNs: 0)
        book.pause(.handle(paused), nowNs: 1 * second)
        book.enterBackground(nowNs: 2 * second)
        book.enterForeground(nowNs: 50 * second)
        #expect(book.entry(.handle(paused))?.state == .pausedByUser)
        #expect(book.entry(.handle(running))?.state == .running(sinceNs: 50 * second))
        #expect(book.end(.handle(paused), nowNs: 60 * second).durationNs == 1 * second)
        #expect(book.end(.handle(running), nowNs: 60 * second).durationNs == 12 * second)
    }

    // SPEC A4: pausing in the background keeps the timer paused at the foreground; a user's resume in the
    // background, or a start there, counts from the next foreground.
    @Test func callsMadeInTheBackgroundTakeEffectAtTheForeground() {
        var book = TimerBook()
        let (a, _) = book.start("a", nowNs: 0)
        let (b, _) = book.start("b", nowNs: 0)
        book.pause(.handle(b), nowNs: 1 * second)
        book.enterBackground(nowNs: 2 * second)
        book.pause(.handle(a), nowNs: 3 * second)          // paused for the background → paused by the user
        book.resume(.handle(b), nowNs: 4 * second)         // resumed by the user → counts from the foreground
        let (c, _) = book.start("c", nowNs: 5 * second)    // started in the background → counts from the foreground
        book.enterForeground(nowNs: 10 * second)
        #expect(book.end(.handle(a), nowNs: 20 * second).durationNs == 2 * second)
        #expect(book.end(.handle(b), nowNs: 20 * second).durationNs == 11 * second)
        #expect(book.end(.handle(c), nowNs: 20 * second).durationNs == 10 * second)
    }

    // SPEC A4: two timers of the same name started by id end independently.
    @Test func twoTimersOfOneNameEndIndependentlyById() {
        var book = TimerBook()
        let (first, _) = book.start("download", nowNs: 0)
        let (second_, _) = book.start("download", nowNs: 2 * second)
        #expect(book.end(.handle(first), nowNs: 5 * second).durationNs == 5 * second)
        #expect(book.end(.handle(second_), nowNs: 9 * second).durationNs == 7 * second)
        // Each ends once: a second end finds nothing and gives no duration.
        #expect(book.end(.handle(first), nowNs: 10 * second) == TimerBook.Ended(name: "download"))
    }

    // SPEC A4: ending by name ends the most recent timer of that name; the older one stays open.
    @Test func endingByNameEndsTheMostRecent() {
        var book = TimerBook()
        let (older, _) = book.start("upload", nowNs: 0)
        _ = book.start("upload", nowNs: 3 * second)
        #expect(book.end(.name("upload"), nowNs: 4 * second).durationNs == 1 * second)
        #expect(book.elapsedNs(.handle(older), nowNs: 4 * second) == 4 * second)
        #expect(book.end(.name("upload"), nowNs: 6 * second).durationNs == 6 * second)
    }

    // SPEC A4: ending a timer that never started gives the event without a duration.
    @Test func endingATimerThatNeverStartedGivesNoDuration() {
        var book = TimerBook()
        #expect(book.end(.name("ghost"), nowNs: 1) == TimerBook.Ended(name: "ghost", durationNs: nil))
    }

    // SPEC A4: a segment ≤ 0 or ≥ 24 h counts 0.
    @Test(arguments: [(Int64(24 * 3600) * second, Int64(0)), (Int64(24 * 3600) * second - 1, Int64(24 * 3600) * second - 1),
                      (Int64(0), Int64(0)), (Int64(-5) * second, Int64(0))])
    func aSegmentOf24HoursOrMoreOrOfNoTimeCountsZero(delta: Int64, counted: Int64) {
        var book = TimerBook()
        _ = book.start("long", nowNs: 100 * second)
        #expect(book.end(.name("long"), nowNs: 100 * second + delta).durationNs == counted)
    }

    // SPEC A4: the clamp applies per segment: a 25 h segment counts 0, the other segments still count.
    @Test func theClampAppliesToEachSegmentAlone() {
        var book = TimerBook()
        _ = book.start("x", nowNs: 0)
        book.pause(.name("x"), nowNs: 25 * 3600 * second)   // counts 0
        book.resume(.name("x"), nowNs: 25 * 3600 * second)
        #expect(book.end(.name("x"), nowNs: 25 * 3600 * second + 3 * second).durationNs == 3 * second)
    }

    // SPEC A4: milliseconds with 3 decimals.
    @Test func durationsAreMillisecondsWithThreeDecimals() {
        #expect(TimerBook.milliseconds(1_234_567_891) == 1234.568)
        #expect(TimerBook.milliseconds(999) == 0.001)
        #expect(TimerBook.milliseconds(0) == 0)
        #expect(TimerBook.milliseconds(86_399_999_999_999) == 86_400_000)
    }

    // Ended timers leave nothing behind; beyond the capacity the oldest open timer is forgotten.
    @Test func theBookHoldsAtMostItsCapacityAndForgetsTheOldest() {
        var book = TimerBook(capacity: 2)
        let (a, _) = book.start("a", nowNs: 0)
        _ = book.start("b", nowNs: 0)
        let (_, forgotten) = book.start("c", nowNs: 0)
        #expect(forgotten == a)
        #expect(book.count == 2)
        #expect(book.entry(.name("a")) == nil)
    }
}
