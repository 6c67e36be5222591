import CoreMetrics
import OutboxMock
import Synchronization

/// BEHAVIOUR O3: the swift-metrics backend `outbox fleet --metrics-port` bootstraps, so that the devices' engines'
/// own metrics (BEHAVIOUR O1–O2) are served beside the fleet's, under their own names. Every engine asks for the same
/// label and dimensions and gets the same handler: counters and meters add up across the fleet's engines, as the
/// engines' increments and decrements intend. Not swift-prometheus: the fleet already writes the text format
/// (`PrometheusTextWriter`), and these few families need only sums.
final class EngineMetricsRegistry: MetricsFactory, Sendable {
    static let shared = EngineMetricsRegistry()

    private struct Key: Hashable {
        let label: String
        let dimensions: [String]
    }

    private struct Handlers {
        var counters: [Key: SummedCounter] = [:]
        var meters: [Key: SummedMeter] = [:]
        var timers: [Key: SummedTimer] = [:]
    }

    private let handlers = Mutex(Handlers())

    private static func key(_ label: String, _ dimensions: [(String, String)]) -> Key {
        Key(label: label, dimensions: dimensions.flatMap { [$0.0, $0.1] })
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        let key = Self.key(label, dimensions)
        return handlers.withLock { h in
            if let counter = h.counters[key] { return counter }
            let counter = SummedCounter(); h.counters[key] = counter; return counter
        }
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        let key = Self.key(label, dimensions)
        return handlers.withLock { h in
            if let meter = h.meters[key] { return meter }
            let meter = SummedMeter(); h.meters[key] = meter; return meter
        }
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        let key = Self.key(label, dimensions)
        return handlers.withLock { h in
            if let timer = h.timers[key] { return timer }
            let timer = SummedTimer(); h.timers[key] = timer; return timer
        }
    }

    /// The engine records no other kind; a recorder would be a gauge with no sum to keep.
    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        NOOPMetricsHandler.instance
    }

    // A handler stays: the sum over engines outlives each engine.
    func destroyCounter(_ handler: any CounterHandler) {}
    func destroyMeter(_ handler: any MeterHandler) {}
    func destroyRecorder(_ handler: any RecorderHandler) {}
    func destroyTimer(_ handler: any TimerHandler) {}

    /// The engines' families in Prometheus' text format 0.0.4: counters and gauges under their own labels, timers as
    /// summaries (`_sum` in seconds, `_count`).
    func render(into w: inout PrometheusTextWriter) {
        let h = handlers.withLock { $0 }
        func labels(_ key: Key) -> [(String, String)] {
            stride(from: 0, to: key.dimensions.count, by: 2).map { (key.dimensions[$0], key.dimensions[$0 + 1]) }
        }
        func byLabel<V>(_ entries: [Key: V]) -> [(String, [(Key, V)])] {
            Dictionary(grouping: entries.map { ($0.key, $0.value) }, by: { $0.0.label })
                .sorted { $0.key < $1.key }
                .map { ($0.key, $0.value.sorted { $0.0.dimensions.lexicographicallyPrecedes($1.0.dimensions) }) }
        }
        for (label, entries) in byLabel(h.counters) {
            w.family(label, type: "counter", help: "Outbox engines' \(label) (BEHAVIOUR O1), summed over the fleet's devices.")
            for (key, counter) in entries { w.sample(label, labels(key), counter.value.load(ordering: .relaxed)) }
        }
        for (label, entries) in byLabel(h.meters) {
            w.family(label, type: "gauge", help: "Outbox engines' \(label) (BEHAVIOUR O2), summed over the fleet's devices.")
            for (key, meter) in entries { w.sample(label, labels(key), meter.value.withLock { $0 }) }
        }
        for (label, entries) in byLabel(h.timers) {
            w.family(label, type: "summary", help: "Outbox engines' \(label) (BEHAVIOUR O2) over the fleet's devices.")
            for (key, timer) in entries {
                let (count, sumNs) = timer.totals.withLock { $0 }
                w.sample(label + "_sum", labels(key), Double(sumNs) / 1e9)
                w.sample(label + "_count", labels(key), count)
            }
        }
    }
}

private final class SummedCounter: CounterHandler, Sendable {
    let value = Atomic<Int64>(0)
    func increment(by amount: Int64) { value.add(amount, ordering: .relaxed) }
    func reset() { value.store(0, ordering: .relaxed) }
}

private final class SummedMeter: MeterHandler, Sendable {
    let value = Mutex<Double>(0)
    func set(_ value: Int64) { self.value.withLock { $0 = Double(value) } }
    func set(_ value: Double) { self.value.withLock { $0 = value } }
    func increment(by amount: Double) { value.withLock { $0 += amount } }
    func decrement(by amount: Double) { value.withLock { $0 -= amount } }
}

private final class SummedTimer: TimerHandler, Sendable {
    let totals = Mutex<(count: Int, sumNs: Int64)>((0, 0))
    func recordNanoseconds(_ duration: Int64) { totals.withLock { $0.count += 1; $0.sumNs += duration } }
}
