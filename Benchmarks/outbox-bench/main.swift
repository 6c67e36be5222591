// `make bench`: the engine's speed targets (issue: foundation). Run in release mode:
//   swift build -c release --product outbox-bench && .build/release/outbox-bench all
// Prints one JSON object per measurement and a human summary line.
import CSQLite
import Foundation
import Outbox

/// The positional arguments; `--destination NAME`, `--otlp-encoding E` and `--batch-size N` (delivery, SPEC D10) are
/// taken out first.
nonisolated(unsafe) var benchDestination = Destination.appCenter
nonisolated(unsafe) var benchOTLPEncoding = OTLPEncoding.protobuf
/// `--destinations N` (SPEC D16–D17): the delivery bench with N destinations of the same wire on the same mock, from
/// one store (each event delivered N times; the mock counts the repeats as duplicates).
nonisolated(unsafe) var benchDestinationCount = 1
/// `--list` (delivery): the destinations as a named list even when there is one, so that one destination goes the
/// store's several-destination path (SPEC D16): what that path costs beside the single-destination one.
nonisolated(unsafe) var benchList = false
/// `--live` (delivery, SPEC D16): the events are tracked while the engine delivers them, instead of stored first.
nonisolated(unsafe) var benchLive = false
/// `--batch-size N` (delivery): that batch size alone instead of 50 and 500 (SPEC D12: GA4 at 25, its request's limit).
nonisolated(unsafe) var benchBatchSize: Int?
/// `--store-key` (SPEC K1): the committed and delivery benches on a sealed store, under a fixed key.
nonisolated(unsafe) var benchStoreKey: StoreKey?
/// `--hook` (SPEC H1): `caller` with a before-store hook that copies one property.
nonisolated(unsafe) var benchHook = false
/// The fixed key of `--store-key` and of `sealed-vs-plain`.
let fixedStoreKeyBytes = (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
let argumentsList: [String] = {
    var list = Array(CommandLine.arguments.dropFirst())
    if let at = list.firstIndex(of: "--store-key") {
        benchStoreKey = try? StoreKey(bytes: fixedStoreKeyBytes)
        list.remove(at: at)
    }
    if let at = list.firstIndex(of: "--list") {
        benchList = true
        list.remove(at: at)
    }
    if let at = list.firstIndex(of: "--live") {
        benchLive = true
        list.remove(at: at)
    }
    if let at = list.firstIndex(of: "--hook") {
        benchHook = true
        list.remove(at: at)
    }
    if let at = list.firstIndex(of: "--destination"), at + 1 < list.count {
        benchDestination = (try? Destination(name: list[at + 1])) ?? .appCenter
        list.removeSubrange(at...(at + 1))
    }
    if let at = list.firstIndex(of: "--destinations"), at + 1 < list.count {
        benchDestinationCount = max(1, Int(list[at + 1]) ?? 1)
        list.removeSubrange(at...(at + 1))
    }
    if let at = list.firstIndex(of: "--batch-size"), at + 1 < list.count {
        benchBatchSize = Int(list[at + 1]).flatMap { $0 > 0 ? $0 : nil }
        list.removeSubrange(at...(at + 1))
    }
    if let at = list.firstIndex(of: "--otlp-encoding"), at + 1 < list.count {
        benchOTLPEncoding = (try? OTLPEncoding(name: list[at + 1])) ?? .protobuf
        list.removeSubrange(at...(at + 1))
    }
    return list
}()
let mode = argumentsList.first ?? "all"
let total = argumentsList.count > 1 ? Int(argumentsList[1]) ?? 1_000_000 : 1_000_000

func monoNs() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func tempStore(_ name: String) -> String {
    let dir = NSTemporaryDirectory() + "outbox-bench-\(getpid())"
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    let path = dir + "/" + name
    for suffix in ["", "-wal", "-shm", ".lock"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    return path
}

/// ~300-byte stored events: an ordinal and two padding strings.
struct Padding {
    let a: String
    let b: String
    /// Fresh string objects on every call: each bench thread makes its own. Strings shared by two callers would
    /// have both threads retain and release the same objects on every call, bouncing their reference counts'
    /// cache line between cores, and the 2-thread latencies would measure the bench rather than `trackEvent`.
    init() {
        a = String(repeating: "a", count: 110)
        b = String(repeating: "b", count: 60)
    }
    /// For the benches that track from one thread.
    static let shared = Padding()
}
func properties(_ index: Int, _ padding: Padding = .shared) -> [String: PropertyValue] {
    ["i": .int(Int64(index)), "padA": .string(padding.a), "padB": .string(padding.b)]
}

func percentile(_ sorted: [UInt64], _ p: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    return Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))])
}

final class LatencyBox: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [[UInt64]]
    init(threads: Int) { values = Array(repeating: [], count: threads) }
    func set(_ thread: Int, _ latencies: [UInt64]) { lock.lock(); values[thread] = latencies; lock.unlock() }
    var all: [UInt64] { lock.lock(); defer { lock.unlock() }; return values.flatMap { $0 } }
}

/// Caller-side cost of `trackEvent` from `threads` threads, `total` calls in all.
func benchCaller(threads: Int) throws {
    var configuration = Configuration(storePath: tempStore("caller-\(threads).outbox"))
    configuration.maxStorageSize = 1 << 30
    // With `--store-key` the callers seal their payloads (SPEC K1, `CallerPayloads`).
    configuration.storeKey = benchStoreKey
    // With `--hook` every call runs a before-store hook that copies one property (SPEC H1).
    if benchHook { configuration.beforeStore = { event in event.properties["copy"] = event.properties["i"]; return true } }
    let engine = try OutboxEngine(configuration: configuration)
    let perThread = total / threads
    let latencies = LatencyBox(threads: threads)
    let group = DispatchGroup()
    let start = monoNs()
    for thread in 0..<threads {
        group.enter()
        Thread {
            var local = [UInt64](repeating: 0, count: perThread)
            let padding = Padding()
            for index in 0..<perThread {
                let props = properties(index, padding)
                let before = monoNs()
                try? engine.trackEvent("bench", properties: props)
                local[index] = monoNs() - before
            }
            latencies.set(thread, local)
            group.leave()
        }.start()
    }
    group.wait()
    let elapsed = Double(monoNs() - start) / 1e9
    let sorted = latencies.all.sorted()
    let semaphore = DispatchSemaphore(value: 0)
    Task { await engine.persisted(); semaphore.signal() }
    semaphore.wait()
    engine.shutdown()
    let callsPerSecond = Double(perThread * threads) / elapsed
    print(#"{"bench":"trackEvent caller","hook":\#(benchHook),"threads":\#(threads),"calls":\#(perThread * threads),"calls_per_s":\#(Int(callsPerSecond)),"p50_us":\#(String(format: "%.3f", percentile(sorted, 0.5) / 1000)),"p99_us":\#(String(format: "%.3f", percentile(sorted, 0.99) / 1000)),"p999_us":\#(String(format: "%.3f", percentile(sorted, 0.999) / 1000))}"#)
}

/// Committed events per second: from the first `trackEvent` until `persisted()` returns.
/// Average bytes of a stored row's values (payload, id and the six integer columns), read from the store file.
func averageRowBytes(_ path: String) -> Int {
    var db: OpaquePointer?
    guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, nil) == SQLITE_OK else { return 300 }
    defer { sqlite3_close(db) }
    var statement: OpaquePointer?
    sqlite3_prepare_v2(db, "SELECT avg(length(payload) + length(id)) FROM logs", -1, &statement, nil)
    defer { sqlite3_finalize(statement) }
    guard sqlite3_step(statement) == SQLITE_ROW else { return 300 }
    return Int(sqlite3_column_double(statement, 0)) + 6 * 8
}

struct CommitRun {
    var events: Int
    var stored: Int
    var seconds: Double
    var rate: Double
    var loopUs: Double
    /// The store file's bytes per stored row, and the average row's values (`averageRowBytes`).
    var fileBytesPerRow: Int
    var rowBytes: Int
}

/// Tracks `events` events into a fresh store (sealed under `key` when given) and waits until they are committed.
func commitRun(events: Int, key: StoreKey?) throws -> CommitRun {
    var configuration = Configuration(storePath: tempStore("committed.outbox"))
    configuration.maxStorageSize = 1 << 30
    configuration.storeKey = key
    let earlierThreads = threads(named: "outbox-loop")
    let engine = try OutboxEngine(configuration: configuration)
    let loopTask = findThread(named: "outbox-loop", notIn: earlierThreads)
    let loopBefore = threadCPU(loopTask)
    let start = monoNs()
    for index in 0..<events { try engine.trackEvent("bench", properties: properties(index)) }
    let semaphore = DispatchSemaphore(value: 0)
    Task { await engine.persisted(); semaphore.signal() }
    semaphore.wait()
    let elapsed = Double(monoNs() - start) / 1e9
    // The loop's own CPU per committed event: what a commit costs, whether or not the loop was the one waited for.
    let loopUs = (threadCPU(loopTask) - loopBefore) / Double(events) * 1e6
    let status = try StoreReport.read(path: configuration.storePath, storeKey: key)
    engine.shutdown()
    return CommitRun(events: events, stored: status.pendingNormal, seconds: elapsed, rate: Double(events) / elapsed,
                     loopUs: loopUs, fileBytesPerRow: status.bytes / max(1, status.pendingNormal),
                     rowBytes: averageRowBytes(configuration.storePath))
}

func benchCommitted() throws -> (rate: Double, rowBytes: Int) {
    let run = try commitRun(events: total, key: benchStoreKey)
    print(#"{"bench":"committed events","events":\#(run.events),"stored":\#(run.stored),"seconds":\#(String(format: "%.3f", run.seconds)),"events_per_s":\#(Int(run.rate)),"loop_us_per_event":\#(String(format: "%.3f", run.loopUs)),"db_bytes_per_row":\#(run.fileBytesPerRow)}"#)
    return (run.rate, run.rowBytes)
}

/// SPEC K1's commit cost: committed events/s of a sealed store against a plain one, alternated within this process
/// (`rounds` pairs after one warm-up pair, the order swapped every pair): this machine's speed drifts within
/// seconds, so the two runs of a pair are next to each other and the ratio is taken pair by pair.
func benchSealedVersusPlain(events: Int, rounds: Int) throws {
    let key = try StoreKey(bytes: fixedStoreKeyBytes)
    var rateRatios: [Double] = []
    var loopRatios: [Double] = []
    for round in 0...rounds {
        let order = round % 2 == 0 ? [false, true] : [true, false]
        var runs: [Bool: CommitRun] = [:]
        for sealed in order { runs[sealed] = try commitRun(events: events, key: sealed ? key : nil) }
        guard round > 0, let plain = runs[false], let sealed = runs[true] else { continue }
        rateRatios.append(plain.rate / sealed.rate)
        if plain.loopUs > 0 { loopRatios.append(sealed.loopUs / plain.loopUs) }
    }
    func median(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.sorted()[values.count / 2] }
    func figure(_ value: Double) -> String { String(format: "%.3f", value) }
    print(#"{"bench":"sealed vs plain committed","pairs":\#(rateRatios.count),"events_per_run":\#(events),"rate_cost_median":\#(figure(median(rateRatios))),"rate_cost_min":\#(figure(rateRatios.min() ?? 0)),"rate_cost_max":\#(figure(rateRatios.max() ?? 0)),"loop_cpu_cost_median":\#(figure(median(loopRatios)))}"#)
}

/// Raw SQLite on this machine: WAL, synchronous=NORMAL, 1000 rows per transaction, one reused statement,
/// one blob per row of the same size as the engine's average stored row (measured by `benchCommitted` first).
func benchRawSQLite(rowBytes committedRowBytes: Int) -> Double {
    let path = tempStore("raw.sqlite")
    var db: OpaquePointer?
    guard sqlite3_open(path, &db) == SQLITE_OK else { print("raw: open failed"); return 0 }
    defer { sqlite3_close(db) }
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; CREATE TABLE t(id INTEGER PRIMARY KEY, payload BLOB NOT NULL);", nil, nil, nil)
    var statement: OpaquePointer?
    sqlite3_prepare_v3(db, "INSERT INTO t(payload) VALUES (?)", -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
    defer { sqlite3_finalize(statement) }
    let payload = [UInt8](repeating: 0x61, count: committedRowBytes)
    let start = monoNs()
    var index = 0
    while index < total {
        sqlite3_exec(db, "BEGIN", nil, nil, nil)
        for _ in 0..<1000 where index < total {
            payload.withUnsafeBytes { _ = sqlite3_bind_blob(statement, 1, $0.baseAddress, Int32($0.count), outbox_sqlite_transient()) }
            sqlite3_step(statement)
            sqlite3_reset(statement)
            index += 1
        }
        sqlite3_exec(db, "COMMIT", nil, nil, nil)
    }
    let rate = Double(total) / (Double(monoNs() - start) / 1e9)
    print(#"{"bench":"raw sqlite baseline","rows":\#(total),"row_bytes":\#(committedRowBytes),"rows_per_s":\#(Int(rate))}"#)
    return rate
}

switch mode {
case "caller":
    try benchCaller(threads: 1)
    try benchCaller(threads: 2)
case "committed":
    let ours = try benchCommitted()
    let raw = benchRawSQLite(rowBytes: ours.rowBytes)
    print(#"{"bench":"committed vs raw","ratio":\#(String(format: "%.3f", ours.rate / raw))}"#)
case "sealed-vs-plain":
    try benchSealedVersusPlain(events: total, rounds: argumentsList.count > 2 ? Int(argumentsList[2]) ?? 20 : 20)
case "delivery":
    try benchDelivery()
case "compression":
    try benchCompression()
case "idle":
    try benchIdle(seconds: argumentsList.count > 1 ? Int(argumentsList[1]) ?? 60 : 60)
case "memory":
    try benchMemory()
case "encode":
    // The encoder's share of D10: thread CPU per log to encode batches of 50, each wire alternately (or the one
    // wire named, for a profiler).
    let wires = argumentsList.count > 1 ? [argumentsList[1]] : ["appcenter", "otlp", "otlp-json", "posthog", "segment", "amplitude", "mixpanel", "sensors", "ga4"]
    for round in 0..<5 {
        var line: [String] = []
        for wire in wires {
            let ns = try WireEncodeBench.nsPerLog(wire: wire, batchSize: 50, rounds: 4000, properties: { properties($0) })
            line.append(#""\#(wire)_ns_per_log":\#(Int(ns))"#)
        }
        print(#"{"bench":"encode","round":\#(round),"batch_size":50,\#(line.joined(separator: ","))}"#)
    }
case "all":
    try benchCaller(threads: 1)
    try benchCaller(threads: 2)
    let ours = try benchCommitted()
    let raw = benchRawSQLite(rowBytes: ours.rowBytes)
    print(#"{"bench":"committed vs raw","ratio":\#(String(format: "%.3f", ours.rate / raw))}"#)
    try benchDelivery(total: 1_000_000, mockThreads: nil, compression: .fast, pinned: false)
    try benchDelivery(total: 1_000_000, mockThreads: 1, compression: .fast, pinned: true)
    try benchMemory()
    try benchIdle(seconds: 60)
default:
    print("usage: outbox-bench [all|caller|committed|sealed-vs-plain|delivery|compression|encode|idle|memory] [COUNT|SECONDS] [--hook] [--store-key]")
    exit(2)
}
try? FileManager.default.removeItem(atPath: NSTemporaryDirectory() + "outbox-bench-\(getpid())")
