import Testing
@testable import OutboxMock

/// The connection's lifecycle without a socket (SPEC M1, M8): answers in request order, requests waiting behind an
/// owed answer, nothing after the end.
@Suite("Connection lifecycle")
struct ConnectionStateTests {
    // SPEC M1: pipelined requests are answered in order: those read while an answer is owed wait, then go one by one.
    @Test func requestsWaitBehindAnOwedAnswer() {
        var state = ConnectionState<Int>()
        #expect(state.isIdle)
        #expect(state.requestRead(1) == 1)
        state.answerDeferred()  // request 1's answer is delayed
        #expect(!state.isIdle && state.mode == .answering)
        #expect(state.requestRead(2) == nil)
        #expect(state.requestRead(3) == nil)
        #expect(state.answered() == nil, "nothing goes before the owed answer")
        state.deferralEnded()
        #expect(state.answered() == 2)
        #expect(state.answered() == 3)
        #expect(state.answered() == nil && state.isIdle)
    }

    // SPEC M8: a fault, a hang or a close ends the connection: what waited is dropped, nothing more is processed.
    @Test func nothingHappensAfterTheEnd() {
        var state = ConnectionState<Int>()
        _ = state.requestRead(1)
        state.answerDeferred()
        _ = state.requestRead(2)
        state.finish()
        #expect(state.isFinished && state.queuedCount == 0)
        #expect(state.requestRead(3) == nil)
        state.deferralEnded()
        #expect(state.answered() == nil && state.isFinished)
        state.answerDeferred()
        #expect(state.mode == .finished)
    }
}
