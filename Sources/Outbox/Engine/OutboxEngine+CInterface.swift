import Dispatch

/// What the C interface (`Sources/OutboxC`, SPEC E2–E3) needs beyond the public API: synchronous forms of the
/// `async` calls — it blocks a C caller's thread instead of awaiting, and starts no thread of Swift's cooperative
/// pool (SPEC E3: every thread the engine starts is named `outbox-…`) — and a `trackEvent` for properties that
/// arrive as JSON rather than as a dictionary.
extension OutboxEngine {
    /// `trackEvent` with the properties sorted by key and each key once, as the C interface parses them: no
    /// dictionary is built, hashed and sorted on the caller's thread, and string values may stay in the caller's
    /// JSON (`ScannedPropertyValue.utf8`). Returns false, having stored nothing, when tracking is off (SPEC T6),
    /// where `trackEvent` returns silently.
    @_spi(CInterface) public func trackEvent(_ name: String, sortedProperties: UnsafeBufferPointer<(key: String, value: ScannedPropertyValue)>,
                                           flags: LogFlags) throws(OutboxError) -> Bool {
        if let hook = beforeStore.hook {
            // SPEC H1: the hook takes the properties as the Swift API gives them.
            var properties: [String: PropertyValue] = Dictionary(minimumCapacity: sortedProperties.count)
            for (key, value) in sortedProperties {
                switch value {
                case .value(let value): properties[key] = value
                case .utf8(let text): properties[key] = .string(String(decoding: text, as: UTF8.self))
                }
            }
            return try trackHooked(hook, OutgoingEvent(name: name, properties: properties), flags: flags)
        }
        return try EventValidator.validate(name: name, sortedProperties: sortedProperties) { name, body, adjustments throws(OutboxError) in
            if !adjustments.isEmpty { warn(name: name, adjustments) }
            let clock = configuration.clock
            return try admit(EventDraft(priority: flags.priority, wallMs: clock.wallMs(), monoNs: clock.monoNs(), body: []),
                             body: body, name: name)
        }
    }

    /// `dispatch(completion:)` that says when it could not be queued (the engine is shut down), rather than never
    /// calling `completion`: a C caller told 0 waits for its `done`.
    @_spi(CInterface) public func dispatchReporting(_ completion: @escaping @Sendable (DispatchResult) -> Void) throws {
        try submitToLoop(committingFirst: true) { core in
            guard let delivery = core.delivery else { completion(.noData); return }
            delivery.dispatch(completion: core.loop.holding(completion))
        }
    }

    /// True on the thread that runs the engine's loop: where a blocking call would wait for itself.
    @_spi(CInterface) public var isOnEngineLoopThread: Bool { loop.isOnLoopThread }

    /// Whether the engine runs on the host's loop (`RunMode.hostLoop`).
    @_spi(CInterface) public var runsOnHostLoop: Bool { loop.isHosted }

    /// `status()` without `await`: on the loop thread it commits what is queued and reads at once; elsewhere it
    /// waits for the loop's next turn (in host mode, the host must be running its loop).
    @_spi(CInterface) public func statusWaiting() throws -> EngineStatus {
        if loop.isOnLoopThread {
            guard !core.isStopped else { throw OutboxError.shutDown }
            core.commitNow()
            return try makeStatus()
        }
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Result<EngineStatus, any Error> = .failure(OutboxError.shutDown)
        do {
            try intake.submit(.task { [self] in
                result = Result { try self.makeStatus() }
                done.signal()
            })
        } catch {
            throw OutboxError.shutDown
        }
        done.wait()
        return try result.get()
    }

    /// SPEC C8's drain without `await`: dispatches what waits, then calls `finished` on the loop thread once the
    /// store is empty with nothing in flight (`true`), or `drainMs` passed (`false`), or the engine stopped.
    /// `finished` runs from a timer callback, never inside delivery's own bookkeeping, so it may call `shutdown()`
    /// in host mode. In host mode the drain holds the host's loop until `finished` ran (SPEC C7), since every
    /// other handle of the engine is unref'd. Without delivery `finished(true)` runs at the next turn.
    /// SPEC F9: the requests this engine made and, of them, its probes (`EngineStatus.requests`, `.probes`), without
    /// reading the store: the fleet adds them up across thousands of engines at every sample. On the loop thread only;
    /// nil elsewhere or once stopped.
    @_spi(CInterface) public var requestCounts: (requests: Int, probes: Int)? {
        guard loop.isOnLoopThread, !core.isStopped else { return nil }
        return (core.delivery?.counters.requests ?? 0, core.delivery?.counters.probes ?? 0)
    }

    @_spi(CInterface) public func drain(forMs drainMs: UInt64, finished: @escaping @Sendable (_ drained: Bool) -> Void) {
        try? intake.submit(.analytics(.engineStopping(Moment.now(configuration.clock))), urgent: false)
        // On the loop thread the body below runs inline, before the group commit: what was tracked must be in the
        // store to be sent. Elsewhere it runs as an intake task, after everything queued before it was stored.
        if loop.isOnLoopThread, !core.isStopped { core.commitNow() }
        onLoop({ core in
            final class Outcome { var drained = false; var reported = false }
            let outcome = Outcome()
            let timer = LoopTimer(loop: core.loop)
            let pending = core.loop.pendingCallback()
            timer.action = { [unowned timer] in
                guard !outcome.reported else { return }
                outcome.reported = true
                timer.close()
                finished(outcome.drained)
                pending.ran()
            }
            guard let delivery = core.delivery else {
                outcome.drained = true
                timer.start(afterMs: 0)
                return
            }
            delivery.dispatch(completion: nil)
            // Strong: the delivery may answer idle waiters at shutdown, after the timer's close released it.
            delivery.whenIdle { [timer] in
                guard !outcome.reported else { return }
                outcome.drained = true
                timer.start(afterMs: 0)
            }
            if !outcome.drained { timer.start(afterMs: drainMs) }
        }, orElse: { finished(false) })
    }
}
