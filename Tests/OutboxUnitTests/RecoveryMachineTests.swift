import Foundation
import Testing
import OutboxTestSupport
@testable import Outbox

/// SPEC R9–R10 over the delivery machine's fakes: a fault sends one probe at a time on a jittered exponential
/// schedule, a success ends it, and the drain widens from one request.
@Suite("Recovery probing and the paced drain (SPEC R9, R10)")
struct RecoveryMachineTests {
    /// A rig with recovery on (the engine's default) and the drain's jitter off unless a test wants it.
    private func rig(jitterMs: Int64 = 0, backlog: Int = 0,
                     _ change: (inout DeliveryMachine.Settings) -> Void = { _ in }) -> DeliveryRig {
        DeliveryRig(backlog: backlog) { settings in
            settings.recovery = DeliveryMachine.Recovery(drainJitterMs: jitterMs)
            change(&settings)
        }
    }

    // SPEC R9: 1 s, 2 s, 4 s, 8 s, then 10 s; 60 s once the fault is 5 min old; at the cap after R5; each drawn in
    // [interval/2, interval].
    @Test func probeIntervalsStayWithinTheirBounds() {
        let recovery = DeliveryMachine.Recovery()
        var random = SplitMix64(seed: 9)
        func bounds(_ probes: Int, faultMs: Int64 = 0, capped: Bool = false) -> (Int64, Int64) {
            var low = Int64.max, high = Int64.min
            for _ in 0..<5000 {
                let delay = recovery.probeDelay(probes: probes, faultMs: faultMs, capped: capped, using: &random)
                low = min(low, delay); high = max(high, delay)
            }
            return (low, high)
        }
        for (probes, interval) in [(0, Int64(1000)), (1, 2000), (2, 4000), (3, 8000), (4, 10_000), (40, 10_000)] {
            let (low, high) = bounds(probes)
            #expect(low >= interval / 2 && high <= interval, "probe \(probes): \(low)…\(high)")
            #expect(low < interval / 2 + interval / 50 && high > interval - interval / 50, "probe \(probes) spreads")
        }
        let (lateLow, lateHigh) = bounds(34, faultMs: 300_000)  // 5 min of probes at the 10 s cap
        #expect(lateLow >= 30_000 && lateHigh <= 60_000 && lateHigh > 58_000)
        let (cappedLow, cappedHigh) = bounds(0, capped: true)
        #expect(cappedLow >= 5000 && cappedHigh <= 10_000 && cappedLow < 5200)
    }

    // SPEC R9: while a fault holds, the oldest waiting batch goes alone as the probe; no new batch, no R3 retry.
    @Test func duringAFaultOnlyTheProbeGoes() {
        let rig = rig()
        rig.track(150)
        let first = rig.sender.open.first?.seqs
        rig.sender.answerAll(503)
        #expect(rig.driver.fault != nil)
        rig.track(200)  // full batches wait: nothing is claimed during a fault
        #expect(rig.sender.all.count == 3)
        var probes: [[Int64]] = []
        for _ in 0..<60 {  // a minute of failing probes
            rig.advance(ms: 1000)
            #expect(rig.sender.open.count <= 1)
            if let probe = rig.sender.open.first {
                probes.append(probe.seqs)
                rig.sender.answer(503)
            }
        }
        #expect(probes.count >= 8 && probes.count <= 40, "\(probes.count) probes in a minute")
        #expect(probes.allSatisfy { $0 == first }, "the probe is the oldest waiting batch")
        #expect(rig.driver.counters.probes == probes.count)
        // R3: each batch's 10 s retry passed once during the fault and counts; the probes count none.
        #expect(rig.driver.retries == 3 + 3)
        #expect(rig.driver.disabledReason == nil)
    }

    // SPEC R9, R10: a probe's success ends the fault; the drain starts at one request and widens by one per success.
    @Test func aProbesSuccessEndsTheFaultAndTheDrainWidens() {
        let rig = rig()
        rig.track(500)
        rig.sender.answerAll(503)
        rig.advance(ms: 1000)
        #expect(rig.sender.open.count == 1)
        rig.sender.answer(200)
        #expect(rig.driver.fault == nil)
        #expect(rig.driver.drainWidth == 1)
        #expect(rig.sender.open.count == 1)
        rig.sender.answer(200)
        #expect(rig.sender.open.count == 2)
        rig.sender.answer(200)
        #expect(rig.sender.open.count == 3)
        #expect(rig.driver.drainWidth == nil)
        rig.sender.answerAll(200)
        #expect(rig.queue.stored == 0)
        #expect(rig.driver.counters.delivered == 500)
    }

    // SPEC R9: a success of a request sent before the fault ends it too; the failed batch is due at once.
    @Test func anotherRequestsSuccessEndsTheFault() {
        let rig = rig()
        rig.track(150)
        rig.sender.answer(503)
        #expect(rig.driver.fault != nil)
        rig.sender.answer(200)
        #expect(rig.driver.fault == nil)
        rig.sender.answer(200)
        rig.advance(ms: 0)
        #expect(rig.sender.open.count == 1, "the failed batch goes again at once, not after R3's 5–10 s")
        rig.sender.answer(200)
        #expect(rig.queue.stored == 0)
    }

    // SPEC R10: any retryable failure narrows the drain to one; the last request's failure starts a fault again.
    @Test func aFailureDuringTheDrainNarrowsItAndStartsAFault() {
        let rig = rig()
        rig.track(500)
        rig.sender.answerAll(503)
        rig.advance(ms: 1000)
        rig.sender.answer(200)
        rig.sender.answer(200)
        #expect(rig.sender.open.count == 2)
        rig.sender.answer(503)
        #expect(rig.driver.drainWidth == 1)
        #expect(rig.driver.fault != nil)
        rig.sender.answer(503)
        rig.advance(ms: 0)
        #expect(rig.sender.open.isEmpty, "nothing but the probe, which waits its interval")
    }

    // SPEC R9: Retry-After is a floor for every request, the probe included.
    @Test func retryAfterIsAFloorForTheProbe() {
        let rig = rig()
        rig.track(50)
        rig.sender.answer(503, headers: [("Retry-After", "30")])
        rig.advance(ms: 29_000)
        #expect(rig.sender.all.count == 1)
        rig.advance(ms: 1000)
        #expect(rig.sender.all.count == 2)
    }

    // SPEC R9: no probe while paused (C5), offline (R7) or stopped (R1).
    @Test func noProbeWhilePausedOfflineOrStopped() {
        let rig = rig()
        rig.track(50)
        rig.sender.answer(503)
        rig.driver.pause()
        rig.advance(ms: 60_000)
        #expect(rig.sender.all.count == 1)
        rig.driver.resume()
        #expect(rig.sender.all.count == 2)  // the probe was due long ago
        rig.sender.answer(503)
        rig.driver.reachability(online: false)
        rig.advance(ms: 60_000)
        #expect(rig.sender.all.count == 2)
        rig.driver.reachability(online: true)  // R6: the fault is over; the drain starts (jitter off here)
        #expect(rig.driver.fault == nil)
        #expect(rig.sender.all.count == 3)
        rig.sender.answer(401)
        rig.advance(ms: 3_600_000)
        #expect(rig.sender.all.count == 3)
    }

    // SPEC R10: after R6, retryNow or an update, the first request waits a random 0–1 s.
    @Test func theFirstRequestAfterANetworkChangeWaitsItsJitter() {
        let rig = rig(jitterMs: 1000)
        rig.track(50)
        rig.sender.answer(503)
        rig.driver.networkChanged()
        rig.advance(ms: 0)
        let sentAtOnce = rig.sender.all.count
        rig.advance(ms: 1000)
        #expect(rig.sender.all.count == 2)
        #expect(sentAtOnce == 1 || sentAtOnce == 2)
        // Across seeds the wait spreads over the second (a fleet does not come back in one instant).
        var waits = Set<Int64>()
        for seed in 1...20 {
            var machine = DeliveryMachine(settings: { var s = DeliveryMachine.Settings(); s.recovery = .init(); return s }(),
                                          now: DeliveryNow(monoNs: 0, wallMs: 0, boot: 1), waiting: Waiting(normal: 50),
                                          random: IDGenerator(seed: UInt64(seed)))
            _ = machine.handle(.retryNow, now: DeliveryNow(monoNs: 0, wallMs: 0, boot: 1), waiting: Waiting(normal: 50))
            let actions = machine.decide(now: DeliveryNow(monoNs: 0, wallMs: 0, boot: 1), waiting: Waiting(normal: 50))
            for case .arm(let at?) in actions { waits.insert(at) }
            if actions.contains(where: { if case .claim = $0 { true } else { false } }) { waits.insert(0) }
        }
        #expect(waits.count > 10 && waits.allSatisfy { $0 >= 0 && $0 <= 1000 }, "\(waits.sorted())")
    }

    // SPEC R9 after R5: a destination disabled by exhausted retries keeps probing at the cap, not every 30 min.
    @Test func afterExhaustedRetriesProbingGoesOnAtTheCap() {
        let rig = rig { $0.retry = RetryPolicy(intervalsMs: [1000]); $0.probeIntervalMs = 1_800_000 }
        rig.track(50)
        var idle = false
        rig.driver.whenIdle { idle = true }
        rig.sender.answer(503)      // attempt 1
        rig.advance(ms: 1000)       // its R3 retry passes during the fault: attempt 2, none left
        #expect(rig.driver.disabledReason?.contains("retries exhausted") == true)
        #expect(!idle, "the rows R5 gave back wait in the store: the engine is not idle")
        var probes = 0
        for _ in 0..<60 {
            rig.advance(ms: 1000)
            if !rig.sender.open.isEmpty { probes += 1; rig.sender.answer(503) }
        }
        #expect(probes >= 6 && probes <= 12, "\(probes) probes in a minute at the 10 s cap")
        rig.advance(ms: 10_000)
        rig.sender.answer(200)
        #expect(rig.driver.disabledReason == nil)
        #expect(rig.driver.fault == nil)
        rig.sender.answerAll(200)
        #expect(rig.queue.stored == 0)
        #expect(idle)
    }

    // SPEC R9: without recovery (`recoveryProbe: nil`) a failure starts no fault: R3 alone.
    @Test func withoutRecoveryThereIsNoFault() {
        let rig = DeliveryRig()
        rig.track(150)
        rig.sender.answer(503)
        #expect(rig.driver.fault == nil)
        rig.advance(ms: 4000)
        #expect(rig.sender.all.count == 3)
        rig.advance(ms: 6000)
        #expect(rig.sender.all.count == 4)
    }
}
