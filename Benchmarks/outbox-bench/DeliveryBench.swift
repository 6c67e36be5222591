import Foundation
import Outbox
import OutboxMock

/// The directory of this benchmark's executable (the other products sit beside it).
func productPath(_ name: String) -> String {
    URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(name).path
}

/// Runs a child to completion; returns its standard output and its peak RSS in KiB (wait4's ru_maxrss).
func spawn(_ path: String, _ arguments: [String]) -> (output: String, maxRSSKiB: Int, status: Int32) {
    var pipe: [Int32] = [0, 0]
    guard Glibc.pipe(&pipe) == 0 else { return ("", 0, -1) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
    posix_spawn_file_actions_addclose(&actions, pipe[0])
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, path, &actions, nil, argv, environ)
    posix_spawn_file_actions_destroy(&actions)
    close(pipe[1])
    guard rc == 0 else { close(pipe[0]); return ("", 0, -1) }
    var output = Data()
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let got = read(pipe[0], &buffer, buffer.count)
        if got <= 0 { break }
        output.append(contentsOf: buffer[0..<got])
    }
    close(pipe[0])
    var status: Int32 = 0
    var usage = rusage()
    wait4(pid, &status, 0, &usage)
    return (String(decoding: output, as: UTF8.self), Int(usage.ru_maxrss), status)
}

func lastJSON(_ text: String) -> [String: Any] {
    for line in text.split(separator: "\n").reversed() where line.hasPrefix("{") {
        if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] { return object }
    }
    return [:]
}

func waitDelivered(_ engine: OutboxEngine, timeout: Duration) -> Bool {
    let semaphore = DispatchSemaphore(value: 0)
    let result = ResultBox()
    Task {
        result.value = await engine.waitUntilDelivered(timeout: timeout)
        semaphore.signal()
    }
    semaphore.wait()
    return result.value
}

final class ResultBox: @unchecked Sendable { var value = false }

/// Events/s delivered end to end to the mock on loopback, for a backlog of `total` events, at a batch size.
func benchEndToEnd(total: Int, batchSize: Int, server: MockServer, compression: BodyCompression) throws -> Double {
    let path = tempStore("e2e-\(batchSize).outbox")
    // The backlog is stored first (not timed), then delivered: the engine's sending path is what is measured.
    var storeOnly = Configuration(storePath: path)
    storeOnly.maxStorageSize = 1 << 30
    storeOnly.storeKey = benchStoreKey
    // Several destinations (SPEC D17): the list is the store's from the first log, or the logs would be the
    // single destination's alone; the writer sends nothing (manual dispatch).
    func destinations(_ endpoint: String) -> [NamedDestination] {
        (0..<benchDestinationCount).map { index in
            var destination = NamedDestination(name: index == 0 && !benchList ? nil : "d\(index)", destination: benchDestination, endpoint: endpoint)
            destination.appSecret = "bench"
            destination.otlpEncoding = benchOTLPEncoding
            destination.apiKey = "phc_bench"
            destination.writeKey = "bench"
            return destination
        }
    }
    if benchDestinationCount > 1 || benchList {
        storeOnly.destinations = destinations(server.baseURL)
        storeOnly.dispatchInterval = .zero
    }
    if !benchLive {
        let writer = try OutboxEngine(configuration: storeOnly)
        for index in 0..<total { try writer.trackEvent("bench", properties: properties(index)) }
        writer.shutdown()
    }

    server.reset()
    var configuration = storeOnly
    // Sensors' endpoint is the whole URL with its project (SPEC D11): the fleet's rule for a base URL.
    configuration.endpoint = benchDestination.spec.endpointAtBase.map { $0(server.baseURL) } ?? server.baseURL
    configuration.appSecret = "bench"
    configuration.batchSize = batchSize
    configuration.bodyCompression = compression
    configuration.destination = benchDestination
    configuration.otlpEncoding = benchOTLPEncoding
    configuration.apiKey = "phc_bench"
    configuration.writeKey = "bench"
    if benchDestination == .ga4 { configuration.measurementId = "G-BENCH1"; configuration.apiSecret = "bench" }
    if benchDestination == .mixpanel { configuration.projectToken = "bench" }
    if benchDestinationCount > 1 || benchList {
        configuration.endpoint = nil
        configuration.appSecret = ""
        configuration.destination = .appCenter
        configuration.apiKey = ""
        configuration.writeKey = ""
        configuration.dispatchInterval = nil
        configuration.destinations = destinations(server.baseURL)
    }
    let start = monoNs()
    let processBefore = processCPU()
    let hostBefore = hostBusyCPU()
    let stealBefore = hostStealCPU()
    let earlierThreads = threads(named: "outbox-loop")
    let mockBefore = mockThreadsCPU()
    let engine = try OutboxEngine(configuration: configuration)
    let opened = monoNs()
    let loopTask = findThread(named: "outbox-loop", notIn: earlierThreads)
    let loopBefore = threadCPU(loopTask)
    // `--live`: the engine commits what it delivers, so the loop's CPU holds the commit that every destination
    // shares (SPEC D16's bound is per tracked event, commit included).
    if benchLive {
        for index in 0..<total { try engine.trackEvent("bench", properties: properties(index)) }
    }
    let delivered = waitDelivered(engine, timeout: .seconds(600))
    let elapsed = Double(monoNs() - start) / 1e9
    let loopCPU = threadCPU(loopTask) - loopBefore
    let mockCPU = mockThreadsCPU() - mockBefore
    let processCPUSeconds = processCPU() - processBefore
    // CPU that other processes used meanwhile (other tenants of this machine, a build): a run that shared its
    // cores says so instead of passing for a slow engine.
    let otherCPU = max(0, hostBusyCPU() - hostBefore - processCPUSeconds)
    // Time the hypervisor gave this machine's CPUs to someone else: a slow run on a virtual machine says why.
    let steal = hostStealCPU() - stealBefore
    engine.shutdown()
    var stats = server.stats()
    // On another destination the mock counts the wire's events apart from App Center's logs.
    if benchDestination != .appCenter { stats.logsUnique = stats.vendors[benchDestination.name]?.eventsUnique ?? 0 }
    let wireBytes = server.wireBytes()
    let rate = Double(stats.logsUnique) / elapsed
    print(#"{"bench":"end to end","destination":"\#(benchDestination)","destinations":\#(benchDestinationCount),"live":\#(benchLive),"events":\#(total),"batch_size":\#(batchSize),"compression":"\#(compression)","delivered":\#(stats.logsUnique),"drained":\#(delivered),"seconds":\#(String(format: "%.2f", elapsed)),"open_seconds":\#(String(format: "%.2f", Double(opened - start) / 1e9)),"events_per_s":\#(Int(rate)),"requests":\#(stats.requests),"wire_bytes":\#(wireBytes),"wire_bytes_per_event":\#(String(format: "%.1f", Double(wireBytes) / Double(max(1, stats.logsUnique)))),"max_in_flight":\#(stats.maxInFlight),"loop_busy":\#(String(format: "%.2f", loopCPU / elapsed)),"loop_us_per_event":\#(String(format: "%.2f", loopCPU * 1e6 / Double(max(1, stats.logsUnique)))),"mock_busy":\#(String(format: "%.2f", mockCPU / elapsed / Double(max(1, mockThreadCount())))),"mock_us_per_event":\#(String(format: "%.2f", mockCPU * 1e6 / Double(max(1, stats.logsUnique)))),"process_cpu_us_per_event":\#(String(format: "%.2f", processCPUSeconds * 1e6 / Double(max(1, stats.logsUnique)))),"other_processes_cpus":\#(String(format: "%.2f", otherCPU / elapsed)),"stolen_cpus":\#(String(format: "%.2f", steal / elapsed))}"#)
    return rate
}

/// `delivery [EVENTS] [MOCK_THREADS] [fast|zlib:LEVEL] [pinned]`: the mock's event-loop threads default to one per
/// core, as `outbox-mock`'s; bodies are compressed as `Configuration.bodyCompression` says (default `fast`).
/// `pinned` gives the mock's threads the last core and everything else (the engine, the capacity run's load client)
/// the others, as if client and server were different machines: the ratio then says whether the engine keeps a
/// server busy, not how two programs share a core.
func benchDelivery() throws {
    let total = argumentsList.count > 1 ? Int(argumentsList[1]) ?? 1_000_000 : 1_000_000
    let mockThreads = argumentsList.count > 2 ? Int(argumentsList[2]) : nil
    var compression = BodyCompression.fast
    if argumentsList.count > 3 {
        guard let parsed = BodyCompression(argument: argumentsList[3]) else {
            print("delivery: compression is fast or zlib:LEVEL (1–9), got \(argumentsList[3])")
            return
        }
        compression = parsed
    }
    try benchDelivery(total: total, mockThreads: mockThreads, compression: compression,
                      pinned: argumentsList.count > 4 && argumentsList[4] == "pinned")
}

func benchDelivery(total: Int, mockThreads requestedThreads: Int?, compression: BodyCompression, pinned requested: Bool) throws {
    let cores = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    let mockThreads = requestedThreads ?? cores
    // taskset (util-linux) sets another thread's affinity; without it the run says it is not pinned.
    let pinned = requested && cores > 1 && FileManager.default.isExecutableFile(atPath: "/usr/bin/taskset")
    var mockConfiguration = MockServer.Configuration(threads: mockThreads)
    // A scenario for the mock (scripts/destination-bench.py gives every wire the same answer time with one).
    if let path = ProcessInfo.processInfo.environment["OUTBOX_BENCH_SCENARIO"] {
        mockConfiguration.scenario = try Scenario.load(path: path)
    }
    let server = try MockServer(configuration: mockConfiguration)
    try server.start()
    defer { try? server.stop() }
    if pinned {
        // Threads started later (the engine's, the load client) inherit the affinity of the thread that starts them.
        setAffinity { $0.hasPrefix("NIO-ELT") ? "\(cores - 1)" : "0-\(cores - 2)" }
    }
    defer { if pinned { setAffinity { _ in "0-\(cores - 1)" } } }
    print(#"{"bench":"delivery set-up","events":\#(total),"mock_threads":\#(mockThreads),"cores":\#(cores),"pinned":\#(pinned)}"#)
    // The mock's capacity moves with the host (112 000 – 155 000 logs/s from run to run on a quiet one, 75 000 on a
    // busy minute): it is measured before, between and after the two deliveries, and each delivery is compared with
    // the mean of the two measurements around it, not with one taken minutes away.
    // A fresh server's first seconds are slower (allocations, page faults): a short run warms it first.
    _ = mockCapacity(server, requests: 2000, label: "mock warm-up")
    let before = mockCapacity(server)
    if let batchSize = benchBatchSize {
        let rate = try benchEndToEnd(total: total, batchSize: batchSize, server: server, compression: compression)
        server.reset()
        let after = mockCapacity(server)
        if before > 0 && after > 0 {
            print(#"{"bench":"end to end vs mock","ratio_batch_\#(batchSize)":\#(String(format: "%.3f", rate / ((before + after) / 2))),"capacity_before":\#(Int(before)),"capacity_after":\#(Int(after))}"#)
        }
        return
    }
    let small = try benchEndToEnd(total: total, batchSize: 50, server: server, compression: compression)
    server.reset()
    let between = mockCapacity(server)
    let large = try benchEndToEnd(total: total, batchSize: 500, server: server, compression: compression)
    server.reset()
    let after = mockCapacity(server)
    if before > 0 && between > 0 && after > 0 {
        let ratio50 = small / ((before + between) / 2)
        let ratio500 = large / ((between + after) / 2)
        print(#"{"bench":"end to end vs mock","ratio_batch_50":\#(String(format: "%.3f", ratio50)),"ratio_batch_500":\#(String(format: "%.3f", ratio500)),"capacity_before":\#(Int(before)),"capacity_between":\#(Int(between)),"capacity_after":\#(Int(after))}"#)
    }
}

/// The mock's own capacity against the same server, with realistic gzip batches of 50 (`outbox-mock-bench --url`);
/// 0 when the load client could not run.
func mockCapacity(_ server: MockServer, requests: Int = 8000, label: String = "mock capacity") -> Double {
    let mockBefore = mockThreadsCPU()
    let run = spawn(productPath("outbox-mock-bench"), ["--url", server.baseURL, "--requests", "\(requests)", "--batch", "50"])
    let mockCPU = mockThreadsCPU() - mockBefore
    let output = lastJSON(run.output)
    let capacity = (output["logs_per_s"] as? Int).map(Double.init) ?? 0
    let logs = (output["logs"] as? Int) ?? 0
    server.reset()
    // The mock's CPU per log of the load client's logs, to set beside `mock_us_per_event` of a delivery: the two
    // kinds of logs do not cost the server the same (the client's carry six typed properties each).
    print(#"{"bench":"\#(label)","logs_per_s":\#(Int(capacity)),"mock_us_per_log":\#(String(format: "%.2f", mockCPU * 1e6 / Double(max(1, logs))))}"#)
    return capacity
}

/// CPU seconds of the in-process mock's event-loop threads (NIO's `NIO-ELT-…`), and how many there are.
func mockThreadsCPU() -> Double {
    tasks().filter { $0.name.hasPrefix("NIO-ELT") }.reduce(0) { $0 + threadCPU($1.id) }
}

func mockThreadCount() -> Int {
    tasks().filter { $0.name.hasPrefix("NIO-ELT") }.count
}

/// Gives each thread of this process the CPU list `cpus(name)` returns (through taskset, which takes thread ids).
func setAffinity(_ cpus: (String) -> String) {
    for (task, name) in tasks() {
        _ = spawn("/usr/bin/taskset", ["-p", "-c", cpus(name), task])
    }
}

/// CPU time and wake-ups of an engine with nothing to send (its loop thread's context switches).
func benchIdle(seconds: Int) throws {
    let server = try MockServer(configuration: .init())
    try server.start()
    defer { try? server.stop() }
    var configuration = Configuration(storePath: tempStore("idle.outbox"))
    configuration.endpoint = server.baseURL
    configuration.appSecret = "bench"
    let earlierThreads = threads(named: "outbox-loop")
    let mockBefore = mockThreadsCPU()
    let engine = try OutboxEngine(configuration: configuration)
    let loopTask = findThread(named: "outbox-loop", notIn: earlierThreads)
    try engine.trackEvent("warm-up")
    _ = waitDelivered(engine, timeout: .seconds(30))
    let switchesBefore = loopTask.map(contextSwitches) ?? 0
    let cpuBefore = threadCPU(loopTask)
    sleep(UInt32(seconds))
    let cpu = threadCPU(loopTask) - cpuBefore
    let switches = (loopTask.map(contextSwitches) ?? 0) - switchesBefore
    engine.shutdown()
    print(#"{"bench":"idle engine","seconds":\#(seconds),"loop_cpu_ms":\#(String(format: "%.3f", cpu * 1000)),"loop_wakeups":\#(switches)}"#)
}

/// Threads of this process with this name, by kernel id.
func threads(named name: String) -> [Int] {
    tasks().compactMap { $0.name == name ? Int($0.id) : nil }
}

/// This process's threads: their ids and kernel names (/proc/self/task/*/comm).
func tasks() -> [(id: String, name: String)] {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).map { task in
        let comm = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? ""
        return (task, comm.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// The engine's loop thread, started since `before` was listed. libuv's pool threads inherit the name of the loop
/// thread that started them (later, so with higher ids) and outlive it: the oldest new one is the loop.
func findThread(named name: String, notIn before: [Int]) -> String? {
    threads(named: name).filter { !before.contains($0) }.min().map(String.init)
}

func contextSwitches(_ task: String) -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/task/\(task)/status", encoding: .utf8)) ?? ""
    var total = 0
    for line in status.split(separator: "\n") where line.contains("ctxt_switches") {
        total += Int(line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
    }
    return total
}

/// utime + stime of the whole process in seconds.
func processCPU() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// The machine's CPU time since boot in seconds, by /proc/stat's columns (user, nice, system, idle, iowait, irq,
/// softirq, steal…), summed over CPUs; empty when unreadable.
func hostCPUSeconds() -> [Double] {
    guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
          let line = stat.split(separator: "\n").first, line.hasPrefix("cpu ") else { return [] }
    let tick = Double(sysconf(Int32(_SC_CLK_TCK)))
    return line.split(separator: " ").dropFirst().compactMap { Double($0).map { $0 / tick } }
}

/// CPU seconds all processes of the machine have used since boot (user, nice, system, irq, softirq).
func hostBusyCPU() -> Double {
    let fields = hostCPUSeconds()
    guard fields.count >= 7 else { return 0 }
    return fields[0] + fields[1] + fields[2] + fields[5] + fields[6]
}

/// CPU seconds stolen from this (virtual) machine since boot: the steal column.
func hostStealCPU() -> Double {
    let fields = hostCPUSeconds()
    return fields.count >= 8 ? fields[7] : 0
}

/// utime + stime of one thread in seconds, from /proc (clock ticks).
func threadCPU(_ task: String?) -> Double {
    guard let task, let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Peak RSS of `outbox emit` draining a backlog of about 1 and 10 MB. `$OUTBOX_CLI` names the CLI to measure
/// (`make bench` passes the release build); without it, the `outbox` next to this binary. The CLI runs
/// under `outbox-peak-rss` (next to this binary): spawned from here, its ru_maxrss would include this process's
/// own peak (see Benchmarks/outbox-peak-rss/main.c).
func benchMemory() throws {
    let server = try MockServer(configuration: .init())
    try server.start()
    defer { try? server.stop() }
    let outbox = ProcessInfo.processInfo.environment["OUTBOX_CLI"] ?? productPath("outbox")
    let helper = productPath("outbox-peak-rss")
    guard FileManager.default.isExecutableFile(atPath: helper) else {
        print("memory: \(helper) is missing: swift build -c release --product outbox-peak-rss")
        return
    }
    func measure(_ arguments: [String]) -> (output: String, peakRSSKiB: Int) {
        let run = spawn(helper, [outbox] + arguments)
        let line = run.output.split(separator: "\n").last { $0.hasPrefix("peak_rss_kib=") }
        return (run.output, line.flatMap { Int($0.dropFirst("peak_rss_kib=".count)) } ?? -1)
    }
    for megabytes in [1, 10] {
        let path = tempStore("memory-\(megabytes).outbox")
        // ~1 KB per stored event with 800 bytes of padding.
        let count = megabytes * 1000
        let stored = measure(["emit", "--store", path, "--count", "\(count)", "--payload-bytes", "800",
                              "--max-storage-bytes", "\(64 << 20)"])
        let report = try StoreReport.read(path: path)
        server.reset()
        let drain = measure(["emit", "--store", path, "--count", "0", "--endpoint", server.baseURL,
                             "--app-secret", "bench", "--wait-delivered", "--timeout", "300",
                             "--max-storage-bytes", "\(64 << 20)"])
        let result = lastJSON(drain.output)
        print(#"{"bench":"emit memory","cli":"\#(outbox)","backlog_bytes":\#(report.bytes),"backlog_logs":\#(report.pendingNormal),"store_rss_kib":\#(stored.peakRSSKiB),"drain_peak_rss_kib":\#(drain.peakRSSKiB),"delivered":\#(result["delivered"] ?? -1)}"#)
    }
}
