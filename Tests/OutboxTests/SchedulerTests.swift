import Testing
@testable import Outbox

/// A seeded random source so that randomised intervals are reproducible.
struct SeededRandom: RandomNumberGenerator {
    var generator: IDGenerator
    init(seed: UInt64) { generator = IDGenerator(seed: seed) }
    mutating func next() -> UInt64 { generator.next() }
}

private func scheduler(_ change: (inout DeliveryScheduler.Settings) -> Void = { _ in }) -> DeliveryScheduler {
    var settings = DeliveryScheduler.Settings()
    change(&settings)
    return DeliveryScheduler(settings: settings, nowMs: 0)
}

@Suite("Scheduler (SPEC C1–C7)")
struct SchedulerTests {
    // SPEC C2
    @Test func aFullBatchIsSentAtOnce() {
        var s = scheduler()
        s.stored(normal: 49, critical: 0, nowMs: 100)
        #expect(s.next(nowMs: 100) == .wait(untilMs: 6100))
        s.stored(normal: 1, critical: 0, nowMs: 200)
        #expect(s.next(nowMs: 200) == .sendNewBatch)
    }

    // SPEC C2: the interval counts from the oldest waiting log; a trickle does not postpone it.
    @Test func aSteadyTrickleDoesNotPostponeSending() {
        var s = scheduler()
        for second in 0..<6 {
            s.stored(normal: 1, critical: 0, nowMs: Int64(second) * 1000)
            #expect(s.next(nowMs: Int64(second) * 1000) == .wait(untilMs: 6000))
        }
        #expect(s.next(nowMs: 6000) == .sendNewBatch)
    }

    // SPEC C2: critical logs wait at most 3 s.
    @Test func criticalLogsWaitAtMostThreeSeconds() {
        var s = scheduler()
        s.stored(normal: 1, critical: 0, nowMs: 0)
        s.stored(normal: 0, critical: 1, nowMs: 1000)
        #expect(s.next(nowMs: 1000) == .wait(untilMs: 4000))
        #expect(s.next(nowMs: 4000) == .sendNewBatch)
    }

    // SPEC C3
    @Test func atMostThreeBatchesAreInFlight() {
        var s = scheduler()
        s.stored(normal: 500, critical: 0, nowMs: 0)
        for key in 1...3 {
            #expect(s.next(nowMs: 0) == .sendNewBatch)
            s.claimed(Int64(key), normal: 50, critical: 0, exhausted: false)
        }
        #expect(s.next(nowMs: 0) == .wait(untilMs: nil))
        var random = SeededRandom(seed: 1)
        #expect(s.finished(1, outcome: .delivered, nowMs: 10, random: &random) == .done)
        #expect(s.next(nowMs: 10) == .sendNewBatch)
    }

    // SPEC C5
    @Test func pauseStopsSendingAndResumeSendsWhatAccumulated() {
        var s = scheduler()
        s.pause()
        s.stored(normal: 100, critical: 5, nowMs: 0)
        #expect(s.next(nowMs: 10_000) == .wait(untilMs: nil))
        s.resume()
        #expect(s.next(nowMs: 10_000) == .sendNewBatch)
    }

    // SPEC C6: periodic dispatch.
    @Test func aPositiveDispatchIntervalSendsPeriodically() {
        var s = scheduler { $0.dispatchIntervalMs = 20_000 }
        s.stored(normal: 200, critical: 0, nowMs: 0)
        #expect(s.next(nowMs: 10_000) == .wait(untilMs: 20_000))
        #expect(s.next(nowMs: 20_000) == .sendNewBatch)
        s.claimed(1, normal: 50, critical: 0, exhausted: false)
        #expect(s.next(nowMs: 20_000) == .sendNewBatch)  // everything waiting goes in this dispatch
    }

    // SPEC C6, C7: manual mode sends only on dispatch().
    @Test func manualModeWaitsForDispatch() {
        var s = scheduler { $0.dispatchIntervalMs = 0 }
        s.stored(normal: 500, critical: 3, nowMs: 0)
        #expect(s.next(nowMs: 1_000_000) == .wait(untilMs: nil))
        s.dispatch()
        #expect(s.next(nowMs: 1_000_000) == .sendNewBatch)
        s.claimed(1, normal: 47, critical: 3, exhausted: false)
        #expect(s.next(nowMs: 1_000_000) == .sendNewBatch)
        s.nothingToClaim()
        #expect(s.next(nowMs: 1_000_000) == .wait(untilMs: nil))
    }

    // SPEC C7: dispatch() sends what waits now in automatic mode too, before the interval.
    @Test func dispatchSendsBeforeTheInterval() {
        var s = scheduler()
        s.stored(normal: 3, critical: 0, nowMs: 0)
        s.dispatch()
        #expect(s.next(nowMs: 1) == .sendNewBatch)
    }

    // A backlog found at start is due at once.
    @Test func aBacklogAtStartIsDueImmediately() {
        var s = DeliveryScheduler(settings: .init(), nowMs: 50_000, waitingNormal: 7)
        #expect(s.next(nowMs: 50_000) == .sendNewBatch)
    }
}

@Suite("Retry and back-off (SPEC R1–R7)")
struct RetryTests {
    // SPEC R1
    @Test(arguments: [
        (200, Outcome.delivered), (204, .delivered),
        (408, .retryable(reason: "HTTP 408", retryAfterMs: nil)), (429, .retryable(reason: "HTTP 429", retryAfterMs: nil)),
        (500, .retryable(reason: "HTTP 500", retryAfterMs: nil)), (503, .retryable(reason: "HTTP 503", retryAfterMs: nil)),
        (599, .retryable(reason: "HTTP 599", retryAfterMs: nil)),
        (501, .refuse(status: 501, reason: "HTTP 501")), (505, .refuse(status: 505, reason: "HTTP 505")),
        (413, .split), (400, .refuse(status: 400, reason: "HTTP 400")), (422, .refuse(status: 422, reason: "HTTP 422")),
        (418, .refuse(status: 418, reason: "HTTP 418")),
        (401, .stop(status: 401, reason: "HTTP 401")), (403, .stop(status: 403, reason: "HTTP 403")),
        (404, .stop(status: 404, reason: "HTTP 404")),
    ]) func statusesAreClassified(status: Int, expected: Outcome) {
        #expect(Outcome.classify(status: status) == expected)
    }

    // SPEC R1: connection-level failures are retryable.
    @Test func connectionFailuresAreRetryable() {
        #expect(Outcome.classify(status: nil, failure: "connection refused") == .retryable(reason: "connection refused", retryAfterMs: nil))
    }

    // SPEC R3: each interval is drawn uniformly in [i/2, i).
    @Test func randomisedIntervalsStayInHalfOpenRange() {
        let policy = RetryPolicy()
        var random = SeededRandom(seed: 42)
        for attempt in 1...3 {
            let interval = policy.intervalsMs[attempt - 1]
            var low = Int64.max, high = Int64.min
            for _ in 0..<10_000 {
                let delay = policy.delay(afterFailedAttempts: attempt, using: &random) ?? -1
                #expect(delay >= interval / 2 && delay < interval)
                low = min(low, delay); high = max(high, delay)
            }
            // Uniform over the range: both ends are approached.
            #expect(low < interval / 2 + interval / 50)
            #expect(high > interval - interval / 50)
        }
        #expect(policy.delay(afterFailedAttempts: 4, using: &random) == nil)
        #expect(RetryPolicy(intervalsMs: [0]).delay(afterFailedAttempts: 1, using: &random) == 0)  // empty range guarded, no trap
    }

    // SPEC R3, R5: at most 4 attempts, then every channel is disabled and nothing is deleted.
    @Test func aBatchGetsFourAttemptsThenSendingIsDisabled() {
        var s = scheduler()
        var random = SeededRandom(seed: 3)
        s.stored(normal: 50, critical: 0, nowMs: 0)
        #expect(s.next(nowMs: 0) == .sendNewBatch)
        s.claimed(1, normal: 50, critical: 0, exhausted: true)
        var now: Int64 = 0
        for attempt in 1...3 {
            let followUp = s.finished(1, outcome: .retryable(reason: "HTTP 503", retryAfterMs: nil), nowMs: now, random: &random)
            guard case .retry(let at) = followUp else { Issue.record("attempt \(attempt): \(followUp)"); return }
            let interval = RetryPolicy().intervalsMs[attempt - 1]
            #expect(at - now >= interval / 2 && at - now < interval)
            #expect(s.next(nowMs: at - 1) == .wait(untilMs: at))
            #expect(s.next(nowMs: at) == .resend(1))
            now = at
        }
        #expect(s.finished(1, outcome: .retryable(reason: "HTTP 503", retryAfterMs: nil), nowMs: now, random: &random) == .releaseRows)
        #expect(s.disabled == .retriesExhausted(sinceMs: now, lastError: "HTTP 503"))
        #expect(s.retries == 3)
        s.rowsReleased(normal: 50, critical: 0, nowMs: now)
        // SPEC R5: one probe batch after the probe interval.
        #expect(s.next(nowMs: now + 1) == .wait(untilMs: now + 1_800_000))
        #expect(s.next(nowMs: now + 1_800_000) == .sendNewBatch)
        s.claimed(2, normal: 50, critical: 0, exhausted: true)
        #expect(s.next(nowMs: now + 1_800_000) == .wait(untilMs: nil))
        #expect(s.finished(2, outcome: .delivered, nowMs: now + 1_800_100, random: &random) == .done)
        #expect(s.disabled == nil)
    }

    // SPEC R5: when one batch exhausts its retries, the batches waiting for theirs give their rows back, so that
    // the probe can go (it waits until no batch holds a lease).
    @Test func exhaustionReleasesParkedBatchesSoTheProbeCanGo() {
        var s = scheduler { $0.retry.intervalsMs = [100]; $0.probeIntervalMs = 2000 }
        var random = SeededRandom(seed: 9)
        s.stored(normal: 150, critical: 0, nowMs: 0)
        for key in 1...3 {
            #expect(s.next(nowMs: 0) == .sendNewBatch)
            s.claimed(Int64(key), normal: 50, critical: 0, exhausted: key == 3)
        }
        // Batches 2 and 3 fail once and wait for their retry; batch 1 fails twice and exhausts.
        for key in [2, 3] {
            guard case .retry = s.finished(Int64(key), outcome: .retryable(reason: "refused", retryAfterMs: nil), nowMs: 10, random: &random)
            else { Issue.record("batch \(key) should wait for a retry"); return }
        }
        _ = s.finished(1, outcome: .retryable(reason: "refused", retryAfterMs: nil), nowMs: 10, random: &random)
        #expect(s.next(nowMs: 200) == .resend(1))
        #expect(s.finished(1, outcome: .retryable(reason: "HTTP 503", retryAfterMs: nil), nowMs: 200, random: &random) == .releaseRows)
        #expect(s.takeParkedBatches() == [2, 3])
        #expect(s.batches.isEmpty)
        s.rowsReleased(normal: 150, critical: 0, nowMs: 200)
        #expect(s.next(nowMs: 201) == .wait(untilMs: 2200))
        #expect(s.next(nowMs: 2200) == .sendNewBatch)  // the probe
    }

    // SPEC R5: without a probe interval, App Center's until-restart behaviour; retryNow() re-enables.
    @Test func withoutProbeOnlyRetryNowReenables() {
        var s = scheduler { $0.probeIntervalMs = nil; $0.retry.intervalsMs = [] }
        var random = SeededRandom(seed: 4)
        s.stored(normal: 1, critical: 0, nowMs: 0)
        s.dispatch()
        #expect(s.next(nowMs: 0) == .sendNewBatch)
        s.claimed(1, normal: 1, critical: 0, exhausted: true)
        #expect(s.finished(1, outcome: .retryable(reason: "reset", retryAfterMs: nil), nowMs: 0, random: &random) == .releaseRows)
        s.rowsReleased(normal: 1, critical: 0, nowMs: 0)
        #expect(s.next(nowMs: 100_000_000) == .wait(untilMs: nil))
        s.retryNow(nowMs: 100_000_000)
        #expect(s.next(nowMs: 100_000_000) == .sendNewBatch)
    }

    // SPEC R4: a longer Retry-After pauses the whole pipeline (capped at 1 h); a shorter one changes nothing.
    @Test func retryAfterPausesThePipelineWhenLonger() {
        var s = scheduler()
        var random = SeededRandom(seed: 5)
        s.stored(normal: 200, critical: 0, nowMs: 0)
        #expect(s.next(nowMs: 0) == .sendNewBatch)
        s.claimed(1, normal: 50, critical: 0, exhausted: false)
        #expect(s.finished(1, outcome: .retryable(reason: "HTTP 429", retryAfterMs: 60_000), nowMs: 0, random: &random) == .retry(atMs: 60_000))
        #expect(s.next(nowMs: 59_999) == .wait(untilMs: 60_000))
        #expect(s.next(nowMs: 60_000) == .resend(1))
        #expect(s.finished(1, outcome: .retryable(reason: "HTTP 429", retryAfterMs: 10 * 3_600_000), nowMs: 60_000, random: &random)
                == .retry(atMs: 60_000 + 3_600_000))
        #expect(s.finished(1, outcome: .delivered, nowMs: 0, random: &random) == .done)
        var t = scheduler()
        t.stored(normal: 50, critical: 0, nowMs: 0)
        _ = t.next(nowMs: 0)
        t.claimed(1, normal: 50, critical: 0, exhausted: true)
        if case .retry(let at) = t.finished(1, outcome: .retryable(reason: "HTTP 503", retryAfterMs: 1000), nowMs: 0, random: &random) {
            #expect(at >= 5000 && at < 10_000)  // the scheduled 5–10 s wins over a shorter Retry-After
        } else { Issue.record("expected a retry") }
        #expect(t.pipelinePausedUntilMs == nil)
    }

    // SPEC R4: Retry-After in seconds, as an HTTP date, and x-ms-retry-after-ms.
    @Test func retryAfterHeadersAreParsed() {
        let now = HTTPDate.parse("Sun, 22 Nov 2026 08:00:00 GMT") ?? 0
        #expect(now == 1_795_334_400_000)
        #expect(RetryPolicy.retryAfterMs(retryAfter: "120", msRetryAfter: nil, nowMs: now) == 120_000)
        #expect(RetryPolicy.retryAfterMs(retryAfter: "Sun, 22 Nov 2026 08:00:30 GMT", msRetryAfter: nil, nowMs: now) == 30_000)
        #expect(RetryPolicy.retryAfterMs(retryAfter: "120", msRetryAfter: "2500", nowMs: now) == 2500)
        #expect(RetryPolicy.retryAfterMs(retryAfter: "soon", msRetryAfter: nil, nowMs: now) == nil)
        #expect(RetryPolicy.retryAfterMs(retryAfter: "Sun, 22 Nov 2026 07:00:00 GMT", msRetryAfter: nil, nowMs: now) == 0)
    }

    // SPEC R1: 401/403/404 stop sending and keep the data until the configuration changes.
    @Test func credentialErrorsStopSendingUntilTheConfigurationChanges() {
        var s = scheduler()
        var random = SeededRandom(seed: 6)
        s.stored(normal: 50, critical: 0, nowMs: 0)
        _ = s.next(nowMs: 0)
        s.claimed(1, normal: 50, critical: 0, exhausted: true)
        #expect(s.finished(1, outcome: .stop(status: 401, reason: "bad secret"), nowMs: 0, random: &random) == .releaseRows)
        s.rowsReleased(normal: 50, critical: 0, nowMs: 0)
        s.networkChanged(online: true, nowMs: 10)
        #expect(s.next(nowMs: 1_000_000_000) == .wait(untilMs: nil))
        s.credentialsChanged(nowMs: 1_000_000_000)
        #expect(s.next(nowMs: 1_000_000_000) == .sendNewBatch)
    }

    // SPEC R6, R7: offline nothing is attempted; coming back resets back-off and resends at once.
    @Test func aNetworkChangeResetsRetryStateAndSendsImmediately() {
        var s = scheduler()
        var random = SeededRandom(seed: 7)
        s.stored(normal: 50, critical: 0, nowMs: 0)
        _ = s.next(nowMs: 0)
        s.claimed(1, normal: 50, critical: 0, exhausted: true)
        _ = s.finished(1, outcome: .retryable(reason: "reset", retryAfterMs: nil), nowMs: 0, random: &random)
        _ = s.next(nowMs: 10_000)  // first retry due within 10 s
        _ = s.finished(1, outcome: .retryable(reason: "reset", retryAfterMs: nil), nowMs: 10_000, random: &random)  // now 2.5–5 min away
        s.networkChanged(online: false, nowMs: 11_000)
        s.stored(normal: 100, critical: 0, nowMs: 11_000)
        #expect(s.next(nowMs: 1_000_000) == .wait(untilMs: nil))  // R7: nothing while offline
        s.networkChanged(online: true, nowMs: 12_000)
        #expect(s.next(nowMs: 12_000) == .resend(1))
        #expect(s.batches[1]?.failedAttempts == 0)
    }
}
