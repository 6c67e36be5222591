import Foundation
import Testing
import OutboxTestSupport
@testable import Outbox

@Suite("Delivery machine over fakes (SPEC C, R, S4, T6)")
struct DeliveryMachineTests {
    // SPEC C2
    @Test func aFullBatchIsSentAtOnce() {
        let rig = DeliveryRig()
        rig.track(49)
        #expect(rig.sender.all.isEmpty)
        #expect(rig.timer.dueMs == 6000)
        rig.track(1)
        #expect(rig.sender.open.count == 1)
        #expect(rig.sender.open.first?.seqs.count == 50)
    }

    // SPEC C2: the interval counts from the oldest waiting log; a trickle does not postpone it.
    @Test func aSteadyTrickleDoesNotPostponeSending() {
        let rig = DeliveryRig()
        for _ in 0..<6 {
            rig.track(1)
            rig.advance(ms: 999)
        }
        #expect(rig.sender.all.isEmpty)
        rig.advance(ms: 6)
        #expect(rig.sender.all.count == 1)
        #expect(rig.sender.all.first?.seqs.count == 6)
    }

    // SPEC C2: critical logs wait at most 3 s.
    @Test func criticalLogsWaitAtMostThreeSeconds() {
        let rig = DeliveryRig()
        rig.track(1)
        rig.advance(ms: 1000)
        rig.track(1, priority: .critical)
        #expect(rig.timer.dueMs == 3000)
        rig.advance(ms: 3000)
        #expect(rig.sender.all.count == 1)
    }

    // SPEC C3
    @Test func atMostThreeBatchesAreInFlight() {
        let rig = DeliveryRig()
        rig.track(500)
        #expect(rig.sender.open.count == 3)
        rig.sender.answer(200)
        #expect(rig.sender.open.count == 3)
        #expect(rig.sender.all.count == 4)
        rig.sender.answerAll(200)
        #expect(rig.sender.all.count == 10)
        #expect(rig.queue.stored == 0)
        #expect(rig.driver.counters.delivered == 500)
    }

    // SPEC C4: critical logs go first.
    @Test func criticalLogsAreSentBeforeNormalOnes() {
        let rig = DeliveryRig { $0.batchSize = 2 }
        rig.queue.add(2)
        let critical = rig.queue.add(2, priority: .critical)
        rig.driver.dispatch(completion: nil)
        #expect(rig.sender.all.first?.seqs == critical)
    }

    // SPEC C5
    @Test func pauseStopsSendingAndResumeSendsWhatAccumulated() {
        let rig = DeliveryRig()
        rig.driver.pause()
        rig.track(120)
        rig.advance(ms: 10_000)
        #expect(rig.sender.all.isEmpty)
        rig.driver.resume()
        #expect(rig.sender.open.count == 3)
    }

    // SPEC C6: periodic dispatch sends everything waiting at each period.
    @Test func aPositiveDispatchIntervalSendsPeriodically() {
        let rig = DeliveryRig { $0.dispatchIntervalMs = 20_000 }
        rig.track(120)
        rig.advance(ms: 10_000)
        #expect(rig.sender.all.isEmpty)
        rig.advance(ms: 10_000)
        #expect(rig.sender.open.count == 3)
    }

    // SPEC C6, C7: manual mode sends only on dispatch().
    @Test func manualModeWaitsForDispatch() {
        let rig = DeliveryRig { $0.dispatchIntervalMs = 0 }
        rig.track(200)
        rig.advance(ms: 100_000)
        #expect(rig.sender.all.isEmpty)
        rig.driver.dispatch(completion: nil)
        #expect(rig.sender.open.count == 3)
    }

    // SPEC C7: the completion comes once, after every request the dispatch started: .good, .noData, .error.
    @Test func dispatchAnswersOnceAfterAllItsRequests() {
        let rig = DeliveryRig { $0.dispatchIntervalMs = 0 }
        var results: [DispatchResult] = []
        rig.driver.dispatch { results.append($0) }
        #expect(results == [.noData])
        rig.track(120)
        rig.driver.dispatch { results.append($0) }
        rig.sender.answer(200)
        rig.sender.answer(200)
        #expect(results == [.noData])  // the third request is still out
        rig.sender.answer(200)
        #expect(results == [.noData, .good])
        rig.track(10)
        rig.driver.dispatch { results.append($0) }
        rig.sender.answer(503)
        #expect(results == [.noData, .good, .error])
    }

    // SPEC C7: paused, a dispatch fails at once.
    @Test func dispatchWhilePausedIsAnError() {
        let rig = DeliveryRig()
        rig.track(3)
        rig.driver.pause()
        var result: DispatchResult?
        rig.driver.dispatch { result = $0 }
        #expect(result == .error)
    }

    // SPEC C2: a backlog at start is due at once.
    @Test func aBacklogAtStartIsDueImmediately() {
        let rig = DeliveryRig(backlog: 10)
        rig.driver.stored()
        #expect(rig.sender.all.count == 1)
    }

    // SPEC R1: every status class.
    @Test(arguments: [
        (200, "delivered"), (204, "delivered"), (301, "stop"), (302, "stop"), (303, "stop"), (307, "stop"),
        (308, "stop"), (400, "refuse"), (401, "stop"), (403, "stop"), (404, "stop"), (408, "retry"), (413, "split"),
        (422, "refuse"), (429, "retry"), (500, "retry"), (501, "refuse"), (503, "retry"), (505, "refuse"),
    ])
    func statusesAreClassified(status: Int, expected: String) {
        let outcome = DeliveryMachine.classify(status: status)
        let kind: String
        switch outcome {
        case .delivered: kind = "delivered"
        case .retryable: kind = "retry"
        case .split: kind = "split"
        case .refuse: kind = "refuse"
        case .stop: kind = "stop"
        case .cancelled: kind = "cancelled"
        case .partiallyRejected: kind = "partial"
        case .refusedLogs: kind = "named"
        }
        #expect(kind == expected)
    }

    // SPEC R1: connection-level failures are retryable; a cancel is not an attempt.
    @Test func connectionFailuresAreRetryable() {
        if case .retryable = DeliveryMachine.classify(.failure(.connectionReset), nowWallMs: 0) {} else { Issue.record("reset") }
        #expect(DeliveryMachine.classify(.failure(.cancelled), nowWallMs: 0) == .cancelled)
    }

    // SPEC R1: a redirect the transport did not follow stops sending, keeps every log and dead-letters none; the
    // Location is in the disabled reason.
    @Test func anUnfollowedRedirectStopsSendingAndDeadLettersNothing() {
        let rig = DeliveryRig()
        rig.track(40)
        rig.driver.dispatch(completion: nil)
        rig.sender.answer(301, headers: [("Location", "https://elsewhere.example/logs")])
        #expect(rig.queue.deadLetters.isEmpty)
        #expect(rig.queue.stored == 40)
        #expect(rig.driver.disabledReason?.contains("https://elsewhere.example/logs") == true)
        #expect(rig.queue.disabledReason == rig.driver.disabledReason)
        rig.advance(ms: 3_600_000)
        #expect(rig.sender.all.count == 1)
    }

    // SPEC R1: 413 splits in halves; a single log still too large is dead-lettered, its neighbours delivered.
    @Test func aSingleLogStillTooLargeAfterSplittingIsDeadLettered() {
        let rig = DeliveryRig { $0.batchSize = 4 }
        let seqs = rig.track(4)
        rig.driver.dispatch(completion: nil)
        let poison = seqs[2]
        while let next = rig.sender.open.first {
            rig.sender.answer(next.seqs.contains(poison) ? 413 : 200)
        }
        #expect(rig.queue.deadLetters.map(\.seq) == [poison])
        #expect(rig.queue.deadLetters.first?.status == 413)
        #expect(rig.queue.stored == 0)
        #expect(rig.driver.counters.delivered == 3)
    }

    // SPEC R1: 400 bisects down to the refused log; only it is dead-lettered, with the server's reason.
    @Test func aRefusedLogIsFoundByBisection() {
        let rig = DeliveryRig { $0.batchSize = 8 }
        let seqs = rig.track(8)
        rig.driver.dispatch(completion: nil)
        let poison = seqs[5]
        while let next = rig.sender.open.first {
            if next.seqs.contains(poison) { rig.sender.answer(400, body: "bad property") } else { rig.sender.answer(200) }
        }
        #expect(rig.queue.deadLetters.map(\.seq) == [poison])
        #expect(rig.queue.deadLetters.first?.reason == "bad property")
        #expect(rig.driver.counters.delivered == 7)
    }

    // SPEC R3: each interval is drawn uniformly in [i/2, i).
    @Test func randomisedIntervalsStayInHalfOpenRange() {
        let policy = RetryPolicy()
        var random = SplitMix64(seed: 42)
        for attempt in 1...3 {
            let interval = policy.intervalsMs[attempt - 1]
            var low = Int64.max, high = Int64.min
            for _ in 0..<10_000 {
                let delay = policy.delay(afterFailedAttempts: attempt, using: &random) ?? -1
                #expect(delay >= interval / 2 && delay < interval)
                low = min(low, delay); high = max(high, delay)
            }
            #expect(low < interval / 2 + interval / 50)
            #expect(high > interval - interval / 50)
        }
        #expect(policy.delay(afterFailedAttempts: 4, using: &random) == nil)
        #expect(RetryPolicy(intervalsMs: [0]).delay(afterFailedAttempts: 1, using: &random) == 0)
    }

    // SPEC R3, R5: at most 4 attempts, then sending is disabled and nothing is deleted; a probe goes later.
    @Test func aBatchGetsFourAttemptsThenSendingIsDisabled() throws {
        let rig = DeliveryRig { $0.probeIntervalMs = 60_000 }
        rig.track(50)
        for attempt in 1...4 {
            #expect(rig.sender.open.count == 1, "attempt \(attempt)")
            rig.sender.answer(503)
            if attempt < 4 { rig.advance(ms: 1_200_000) }
        }
        #expect(rig.sender.all.count == 4)
        #expect(rig.driver.disabledReason?.contains("retries exhausted") == true)
        #expect(rig.queue.stored == 50)
        #expect(try rig.queue.waiting().total == 50)
        rig.advance(ms: 59_000)
        #expect(rig.sender.all.count == 4)
        rig.advance(ms: 1000)
        #expect(rig.sender.all.count == 5)  // the probe
        rig.sender.answer(200)
        #expect(rig.driver.disabledReason == nil)
        #expect(rig.queue.stored == 0)
    }

    // SPEC R5: exhausting one batch releases the batches parked for their retry, so that the probe can go.
    @Test func exhaustionReleasesParkedBatches() {
        let rig = DeliveryRig { $0.retry = RetryPolicy(intervalsMs: [1000]); $0.probeIntervalMs = 5000 }
        rig.track(100)
        rig.sender.answer(503)   // batch 1 parked
        rig.advance(ms: 1000)    // batch 1 resent
        rig.sender.answer(503)   // batch 2 parked
        rig.sender.answer(503)   // batch 1 exhausted: batch 2 released
        #expect(rig.queue.held.isEmpty)
        #expect(rig.sender.open.isEmpty)
    }

    // SPEC R4: a longer Retry-After pauses the whole pipeline.
    @Test func retryAfterPausesThePipelineWhenLonger() {
        let rig = DeliveryRig()
        rig.track(100)
        rig.sender.answer(429, headers: [("Retry-After", "120")])
        rig.sender.answerAll(200)
        rig.track(50)
        #expect(rig.sender.open.isEmpty)
        rig.advance(ms: 119_000)
        #expect(rig.sender.open.isEmpty)
        rig.advance(ms: 1000)
        #expect(!rig.sender.open.isEmpty)
    }

    // SPEC R4: Retry-After in seconds, as an HTTP date, and x-ms-retry-after-ms.
    @Test func retryAfterHeadersAreParsed() {
        let now = HTTPDate.parse("Sun, 22 Nov 2026 08:00:00 GMT") ?? 0
        #expect(now == 1_795_334_400_000)
        #expect(RetryPolicy.retryAfterMs(retryAfter: "120", msRetryAfter: nil, nowMs: now) == 120_000)
        #expect(RetryPolicy.retryAfterMs(retryAfter: "Sun, 22 Nov 2026 08:00:30 GMT", msRetryAfter: nil, nowMs: now) == 30_000)
        #expect(RetryPolicy.retryAfterMs(retryAfter: "120", msRetryAfter: "2500", nowMs: now) == 2500)
        #expect(RetryPolicy.retryAfterMs(retryAfter: "soon", msRetryAfter: nil, nowMs: now) == nil)
    }

    // SPEC R1, R8: 401 stops sending and keeps the data; an update re-enables and the next request carries it.
    @Test func credentialErrorsStopSendingUntilTheConfigurationIsUpdated() {
        let rig = DeliveryRig()
        rig.track(50)
        rig.sender.answer(401)
        rig.driver.retryNow()
        rig.advance(ms: 3_600_000)
        #expect(rig.sender.all.count == 1)
        #expect(rig.driver.disabledReason?.contains("401") == true)
        rig.driver.reconfigure(AppCenterWire(appSecret: "new", installID: UUID()).request(endpoint: "http://127.0.0.1:10", headers: []))
        #expect(rig.sender.all.count == 2)
        let request = rig.sender.all[1].request
        #expect(request.url.hasPrefix("http://127.0.0.1:10/logs"))
        #expect(request.headers.contains { $0.0 == "App-Secret" && $0.1 == "new" })
        rig.sender.answer(200)
        #expect(rig.queue.stored == 0)
    }

    // SPEC R6, R7, N2: offline nothing is attempted; coming back resets back-off and resends at once.
    @Test func aNetworkChangeResetsRetryStateAndSendsImmediately() {
        let rig = DeliveryRig()
        rig.track(50)
        rig.sender.fail(.connectionReset)
        rig.driver.reachability(online: false)
        rig.advance(ms: 3_600_000)
        #expect(rig.sender.all.count == 1)
        rig.driver.reachability(online: true)
        #expect(rig.sender.all.count == 2)
    }

    // SPEC R5, R6: a network change re-enables sending after exhausted retries.
    @Test func aNetworkChangeReenablesAfterExhaustedRetries() {
        let rig = DeliveryRig { $0.retry = RetryPolicy(intervalsMs: []); $0.probeIntervalMs = nil }
        rig.track(50)
        rig.sender.answer(500)
        #expect(rig.driver.disabledReason != nil)
        rig.advance(ms: 86_400_000)
        #expect(rig.sender.all.count == 1)
        rig.driver.networkChanged()
        #expect(rig.driver.disabledReason == nil)
        #expect(rig.sender.all.count == 2)
    }

    // SPEC T6: opt-out is total: a batch parked for its retry is dropped and never sent again, a transfer in
    // flight is cancelled, and the stored logs are deleted.
    @Test func optOutWithARetryPendingSendsNothingMore() {
        let rig = DeliveryRig()
        rig.track(100)
        rig.sender.answer(503)          // batch 1 parked for its retry
        #expect(rig.sender.open.count == 1)  // batch 2 still in flight
        rig.driver.optOut()
        #expect(rig.sender.cancelled.count == 1)
        #expect(rig.queue.deleteAllCalls == 1)
        let sentBefore = rig.sender.all.count
        rig.advance(ms: 3_600_000)
        rig.driver.retryNow()
        rig.driver.networkChanged()
        #expect(rig.sender.all.count == sentBefore)
        #expect(rig.queue.stored == 0)
    }

    // SPEC S4: logs that expired while their batch waited for a retry are deleted, never sent.
    @Test func aParkedRetryNeverSendsExpiredLogs() {
        let rig = DeliveryRig { $0.maxAgeMs = 60_000 }
        rig.track(10)
        rig.driver.dispatch(completion: nil)
        rig.sender.answer(503)
        rig.advance(ms: 61_000)  // past the age while parked (the retry is 5–10 s, the pipeline waits for the timer)
        #expect(rig.sender.all.count == 1)
        #expect(rig.queue.expired.count == 10)
        #expect(rig.queue.stored == 0)
    }

    // SPEC S4: age is boot-time age under the same boot: a wall clock stepped a month does not expire a parked batch.
    @Test func aWallClockStepDoesNotExpireAParkedBatch() {
        let rig = DeliveryRig { $0.maxAgeMs = 60_000 }
        rig.track(10)
        rig.driver.dispatch(completion: nil)
        rig.sender.answer(503)
        rig.clock.jumpWall(ms: 30 * 86_400_000)
        rig.advance(ms: 10_000)
        #expect(rig.queue.expired.isEmpty)
        #expect(rig.sender.open.first?.seqs.count == 10)
    }

    // SPEC C8: shutdown cancels what is in flight and returns the rows; the attempt does not count.
    @Test func shutdownReleasesWhatIsHeld() {
        let rig = DeliveryRig()
        rig.track(100)
        rig.sender.answer(503)
        var idle = false
        rig.driver.whenIdle { idle = true }
        rig.driver.close()
        #expect(rig.queue.held.isEmpty)
        #expect(rig.queue.stored == 100)
        #expect(rig.timer.isClosed)
        #expect(idle)
    }

    // SPEC C8: shut down is for good. An event after it is refused: a dispatch fails at once, an idle waiter is told
    // at once, an opt-out deletes nothing, a late answer or a stored log starts no request.
    @Test func eventsAfterShutdownAreRefused() {
        let now = DeliveryNow(monoNs: 1_000_000_000, wallMs: 1_700_000_000_000, boot: 7)
        var machine = DeliveryMachine(settings: .init(), now: now, waiting: Waiting(normal: 10))
        _ = machine.handle(.shutdown, now: now, waiting: Waiting(normal: 10))
        #expect(machine.mode == .shutDown)
        let waiting = Waiting(normal: 500, critical: 5)
        #expect(machine.handle(.dispatch(3), now: now, waiting: waiting) == [.notify([3], .error)])
        #expect(machine.handle(.whenIdle(4), now: now, waiting: waiting) == [.notifyIdle([4])])
        #expect(machine.handle(.optOut, now: now, waiting: waiting) == [])
        let late = ClaimedBatch(batchID: 9, logs: [StoredLog(seq: 1, id: UUIDBytes(high: 1, low: 2), priority: .normal, wallMs: 0,
                                                             monoNs: 0, boot: 7, context: 0, payload: [])])
        #expect(machine.handle(.claimed(late), now: now, waiting: waiting) == [.release(batchID: 9, seqs: [1])])
        for event: DeliveryMachine.Event in [.stored, .timerFired, .transferOutcome(1, .delivered), .retryNow, .resume,
                                             .reachability(online: true), .reconfigured, .dispatch(nil), .shutdown] {
            #expect(machine.handle(event, now: now, waiting: waiting) == [])
        }
        #expect(machine.decide(now: now, waiting: waiting) == [])
        // Through the driver: a dispatch after close is answered (it used to wait for ever).
        let rig = DeliveryRig()
        rig.track(5)
        rig.driver.close()
        var result: DispatchResult?
        rig.driver.dispatch { result = $0 }
        #expect(result == .error)
        #expect(rig.queue.stored == 5)
        #expect(rig.sender.all.isEmpty)
    }

    // SPEC W1: bodies of 1400 bytes and more are gzip-compressed; 1399 are not.
    @Test func theGzipThresholdIs1400Bytes() {
        for (size, compressed) in [(1399, false), (1400, true)] {
            let rig = DeliveryRig { $0.batchSize = 1 }
            // One log whose request body is exactly `size` bytes: measure the body of a 1-byte payload first.
            rig.queue.add(1)
            rig.driver.dispatch(completion: nil)
            guard let probe = rig.sender.open.first else { Issue.record("nothing sent"); return }
            let overhead = probe.request.body.count - "{\"i\":1}".utf8.count
            rig.sender.answer(200)
            let padding = size - overhead - "{\"i\":2,\"p\":\"\"}".utf8.count
            _ = rig.queue.add(0)
            let text = "{\"i\":2,\"p\":\"" + String(repeating: "x", count: padding) + "\"}"
            rig.queue.addRaw(Array(text.utf8))
            rig.driver.dispatch(completion: nil)
            guard let sent = rig.sender.open.first else { Issue.record("nothing sent"); return }
            let gzip = sent.request.headers.contains { $0.0 == "Content-Encoding" && $0.1 == "gzip" }
            #expect(gzip == compressed, "body of \(size) bytes")
            if !compressed { #expect(sent.request.body.count == size) }
        }
    }
}
