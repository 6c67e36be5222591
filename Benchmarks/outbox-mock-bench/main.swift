import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import OutboxMock
import OutboxTestSupport

// outbox-mock-bench: how many 50-log gzip batches per second the mock server sustains (SPEC M6).
//
//   swift build -c release
//   .build/release/outbox-mock-bench                      # server in-process, on this machine
//   .build/release/outbox-mock-bench --url http://127.0.0.1:8080 --requests 4000
//   .build/release/outbox-mock-bench --vendor segment        # segment, posthog, snowplow, mixpanel or otlp (SPEC V)
//
// Batches are built and gzip-compressed before the clock starts (every log has its own id, so the
// server de-duplicates nothing), then sent over keep-alive connections, one request in flight each.
// In-process, it runs once per `--server-threads` count (1 and 2 by default) and reports the server's own
// CPU per log (`server_cpu_us_per_log`, its event-loop threads only: SPEC M10) beside the whole process's.

struct Options {
    var url: String?
    var connections = 4
    var requests = 6000
    var batchSize = 50
    /// In-process server: one run per thread count (SPEC M10: µs per log and logs/s at 1 and 2 threads).
    var serverThreads = [1, max(2, System.coreCount)]
    /// Another vendor's wire instead of App Center's: each batch in the form its official client sends.
    var vendor: String?

    static func parse(_ args: [String]) -> Options? {
        var o = Options()
        var i = 1
        func value() -> String? {
            i += 1
            return i < args.count ? args[i] : nil
        }
        while i < args.count {
            switch args[i] {
            case "--url": o.url = value()
            case "--connections": o.connections = value().flatMap(Int.init) ?? o.connections
            case "--requests": o.requests = value().flatMap(Int.init) ?? o.requests
            case "--batch": o.batchSize = value().flatMap(Int.init) ?? o.batchSize
            case "--server-threads":
                let list = (value() ?? "").split(separator: ",").compactMap { Int($0) }.filter { $0 >= 1 }
                if !list.isEmpty { o.serverThreads = list }
            case "--vendor":
                o.vendor = value()
                guard let v = o.vendor, VendorMaker.vendors.contains(v) else { return nil }
            case "-h", "--help": return nil
            default:
                FileHandle.standardError.write(Data("unknown argument \(args[i])\n".utf8))
                return nil
            }
            i += 1
        }
        return o
    }
}

/// Realistic logs: events with typed properties, screens and sessions, one device context.
enum LogMaker {
    static let names = ["Video clicked", "Song played", "Checkout started", "Search", "Item added to cart",
                        "Settings>Privacy>Opened", "Login", "Share", "Playlist created", "Ad shown"]
    static let device = #"{"sdkName":"outbox.linux","sdkVersion":"0.1.0","model":"ThinkPad X1 Carbon Gen 11","#
        + #""oemName":"LENOVO","osName":"Debian GNU/Linux","osVersion":"12","osBuild":"bookworm","#
        + #""osKernel":"6.1.0-26-amd64","locale":"en_US","timeZoneOffset":60,"appVersion":"2.4.1","#
        + #""appBuild":"2041","appNamespace":"com.example.player","countryCode":"FR","networkType":"wifi"}"#

    static func uuid(_ rng: inout SystemRandomNumberGenerator) -> String {
        UUID().uuidString.lowercased()
    }

    static func log(_ n: Int, session: String, user: String, timestamp: String,
                    rng: inout SystemRandomNumberGenerator) -> String {
        let id = uuid(&rng)
        let common = #""id":"\#(id)","timestamp":"\#(timestamp)","sid":"\#(session)","userId":"\#(user)","device":\#(device)"#
        switch n % 25 {
        case 0:
            return #"{"type":"startSession",\#(common)}"#
        case 7:
            return #"{"type":"screen",\#(common),"name":"Library","path":"/library/albums","durationMs":5321.5,"#
                + #""typedProperties":[{"type":"string","name":"tab","value":"albums"}]}"#
        default:
            let name = names[n % names.count]
            let category = name.contains(">")
                ? #","category":[\#(name.split(separator: ">").map { "\"\($0)\"" }.joined(separator: ","))]"# : ""
            return #"{"type":"event",\#(common),"name":"\#(name)"\#(category),"typedProperties":["#
                + #"{"type":"string","name":"Category","value":"Music"},"#
                + #"{"type":"long","name":"i","value":\#(n)},"#
                + #"{"type":"double","name":"price","value":\#(Double(n % 1000) / 10 + 0.99)},"#
                + #"{"type":"boolean","name":"premium","value":\#(n % 3 == 0)},"#
                + #"{"type":"dateTime","name":"firstSeen","value":"2026-01-05T10:00:00.000Z"},"#
                + #"{"type":"string","name":"$lib","value":"outbox-linux"}]}"#
        }
    }

    /// gzip bodies, ready to write.
    static func requests(count: Int, batchSize: Int, host: String, vendor: String? = nil)
        -> (requests: [[UInt8]], plainBytes: Int) {
        let chunks = 2
        final class Results: @unchecked Sendable {  // written under `lock`
            let lock = NSLock()
            var parts = [[[UInt8]]](repeating: [], count: 2)
            var plain = [Int](repeating: 0, count: 2)
        }
        let results = Results()
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            var rng = SystemRandomNumberGenerator()
            var out: [[UInt8]] = []
            var plainBytes = 0
            let timestamp = ISO8601DateFormatter.string(from: Date(), timeZone: TimeZone(secondsFromGMT: 0) ?? .current,
                                                        formatOptions: [.withInternetDateTime, .withFractionalSeconds])
            for r in stride(from: chunk, to: count, by: chunks) {
                if let vendor {
                    let body = VendorMaker.body(vendor, r: r, batchSize: batchSize, timestamp: timestamp)
                    plainBytes += body.count
                    out.append(VendorMaker.gzipped(vendor) ? TestGzip.compress(body) : body)
                    continue
                }
                let session = UUID().uuidString.lowercased()
                let logs = (0..<batchSize).map { log(r * batchSize + $0, session: session, user: "user-\(r % 97)",
                                                     timestamp: timestamp, rng: &rng) }
                let body = Array(#"{"sentAt":"\#(timestamp)","logs":[\#(logs.joined(separator: ","))]}"#.utf8)
                plainBytes += body.count
                let gz = TestGzip.compress(body)
                out.append(gz)
            }
            results.lock.lock()
            results.parts[chunk] = out
            results.plain[chunk] = plainBytes
            results.lock.unlock()
        }
        return (results.parts.flatMap { $0 }, results.plain.reduce(0, +))
    }
}

/// Sends requests one after the other on one keep-alive connection.
final class BenchClient: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundOut = HTTPClientRequestPart

    private let head: HTTPRequestHead

    private let next: @Sendable () -> [UInt8]?
    private let done: EventLoopPromise<[Int: Int]>
    private var statuses: [Int: Int] = [:]
    private var finished = false

    init(host: String, install: String, vendor: String? = nil, next: @escaping @Sendable () -> [UInt8]?,
         done: EventLoopPromise<[Int: Int]>) {
        var head: HTTPRequestHead
        if let vendor {
            head = VendorMaker.head(vendor)
        } else {
            head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/logs?api-version=1.0.0")
            head.headers.add(name: "Content-Type", value: "application/json")
            head.headers.add(name: "Content-Encoding", value: "gzip")
            head.headers.add(name: "App-Secret", value: "bench-secret")
            head.headers.add(name: "Install-ID", value: install)
        }
        head.headers.add(name: "Host", value: host)
        self.head = head
        self.next = next
        self.done = done
    }

    func channelActive(context: ChannelHandlerContext) {
        sendNext(context: context)
    }

    private func sendNext(context: ChannelHandlerContext) {
        guard let request = next() else {
            finish(.success(statuses))
            context.close(promise: nil)
            return
        }
        var head = self.head
        head.headers.replaceOrAdd(name: "Content-Length", value: String(request.count))
        // Three parts, one flush: the encoder's writes leave in one writev.
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: request)))),
                      promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): statuses[Int(head.status.code), default: 0] += 1
        case .body: break
        case .end: sendNext(context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        finish(.failure(error))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failure(ChannelError.ioOnClosedChannel))
    }

    private func finish(_ result: Result<[Int: Int], Error>) {
        guard !finished else { return }
        finished = true
        done.completeWith(result)
    }
}

final class Cursor: @unchecked Sendable {
    private let lock = NSLock()
    private var index = 0
    private let requests: [[UInt8]]

    init(_ requests: [[UInt8]]) { self.requests = requests }

    func next() -> [UInt8]? {
        lock.lock()
        defer { lock.unlock() }
        guard index < requests.count else { return nil }
        index += 1
        return requests[index - 1]
    }
}

/// CPU seconds (user + system) of each thread of this process, by thread id: the in-process server's
/// event-loop threads are told apart from the load client's and the main thread's by their names in
/// /proc/self/task. The time is read from each thread's own CPU clock (nanoseconds), not from `stat`'s
/// 10 ms ticks, which alone would be ±2 % on a half-second run.
func threadCPUSeconds() -> [Int: (name: String, seconds: Double)] {
    var out: [Int: (name: String, seconds: Double)] = [:]
    guard let tids = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return out }
    for tid in tids {
        guard let id = Int32(tid),
              let comm = try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8) else { continue }
        // Linux's clock id of a thread's CPU time (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)).
        let clock = clockid_t((~id) << 3 | 6)
        var ts = timespec()
        guard clock_gettime(clock, &ts) == 0 else { continue }
        out[Int(id)] = (comm.trimmingCharacters(in: .whitespacesAndNewlines), Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9)
    }
    return out
}

/// User and system CPU of this process (the in-process server's threads and the load client's), in seconds.
func processCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

func run() throws {
    guard let options = Options.parse(CommandLine.arguments) else {
        print("usage: outbox-mock-bench [--url http://HOST:PORT] [--connections N] [--requests N] [--batch N] "
              + "[--server-threads N[,N…]] [--vendor segment|posthog|snowplow|mixpanel|otlp]")
        exit(2)
    }
    if options.url != nil {
        try run(options, serverThreads: 0)
    } else {
        for threads in options.serverThreads { try run(options, serverThreads: threads) }
    }
}

func run(_ options: Options, serverThreads: Int) throws {
    var server: MockServer?
    var host = "127.0.0.1"
    var port = 0
    if let url = options.url, let components = URLComponents(string: url), let p = components.port {
        host = components.host ?? host
        port = p
    } else {
        let s = try MockServer(configuration: .init(threads: serverThreads))
        try s.start()
        server = s
        port = s.port
    }

    FileHandle.standardError.write(Data("building \(options.requests) batches of \(options.batchSize) logs…\n".utf8))
    let (requests, plainBytes) = LogMaker.requests(count: options.requests, batchSize: options.batchSize,
                                                   host: "\(host):\(port)", vendor: options.vendor)
    let wireBytes = requests.reduce(0) { $0 + $1.count }
    let cursor = Cursor(requests)
    let authority = "\(host):\(port)"

    // The server's CPU alone (SPEC M10): the event-loop threads that exist before the client's.
    let serverThreadIDs = Set(threadCPUSeconds().filter { $0.value.name.hasPrefix("NIO-ELT") }.keys)
    func serverCPU() -> Double {
        threadCPUSeconds().filter { serverThreadIDs.contains($0.key) }.values.reduce(0) { $0 + $1.seconds }
    }
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    defer { try? group.syncShutdownGracefully() }
    let serverCPUStart = serverCPU()
    FileHandle.standardError.write(Data("sending over \(options.connections) connections…\n".utf8))
    let start = DispatchTime.now()
    let cpuStart = processCPUSeconds()
    var futures: [EventLoopFuture<[Int: Int]>] = []
    for _ in 0..<options.connections {
        let promise = group.next().makePromise(of: [Int: Int].self)
        futures.append(promise.futureResult)
        ClientBootstrap(group: group)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandlers([
                        HTTPRequestEncoder(),
                        ByteToMessageHandler(HTTPResponseDecoder(leftOverBytesStrategy: .dropBytes)),
                        BenchClient(host: authority, install: UUID().uuidString.lowercased(), vendor: options.vendor,
                                    next: { cursor.next() }, done: promise),
                    ])
                }
            }
            .connect(host: host, port: port)
            .whenFailure { promise.fail($0) }
    }
    var statuses: [Int: Int] = [:]
    for future in futures {
        for (status, n) in try future.wait() { statuses[status, default: 0] += n }
    }
    let seconds = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    let cpuSeconds = processCPUSeconds() - cpuStart
    let serverCPUSeconds = serverCPU() - serverCPUStart
    let sent = statuses.values.reduce(0, +)
    let logs = (statuses[200] ?? 0) * options.batchSize

    var unique: Int?
    if let server {
        let stats = server.stats()
        unique = options.vendor.map { stats.vendors[$0]?.eventsUnique ?? 0 } ?? stats.logsUnique
        try server.stop()
    }
    let serverCPUPerLog: Any = server == nil ? NSNull()
        : ((serverCPUSeconds * 1e6 / Double(max(1, logs)) * 1000).rounded() / 1000) as Double
    let result: [String: Any] = [
        "mode": server == nil ? "external \(host):\(port)" : "in-process (\(serverThreads) server threads)",
        "vendor": options.vendor ?? "appcenter", "us_per_log": (seconds * 1e6 / Double(max(1, logs)) * 1000).rounded() / 1000,
        "cpu_us_per_log": (cpuSeconds * 1e6 / Double(max(1, logs)) * 1000).rounded() / 1000,
        // Only meaningful in-process: the server's event-loop threads, without the load client (SPEC M10).
        "server_cpu_us_per_log": serverCPUPerLog,
        "server_threads": serverThreads, "connections": options.connections, "batch_size": options.batchSize, "requests": sent, "logs": logs,
        "seconds": (seconds * 1000).rounded() / 1000,
        "requests_per_s": Int(Double(sent) / seconds), "logs_per_s": Int(Double(logs) / seconds),
        "statuses": Dictionary(uniqueKeysWithValues: statuses.map { (String($0.key), $0.value) }),
        "avg_gzip_bytes": wireBytes / max(1, requests.count), "avg_json_bytes": plainBytes / max(1, requests.count),
        "server_logs_unique": unique as Any,
    ]
    let json = try JSONSerialization.data(withJSONObject: result, options: [.sortedKeys])
    print(String(decoding: json, as: UTF8.self))
    print(String(format: "%d requests (%d logs) in %.2f s: %.0f requests/s, %.0f logs/s over %d connections",
                 sent, logs, seconds, Double(sent) / seconds, Double(logs) / seconds, options.connections))
}

do {
    try run()
} catch {
    FileHandle.standardError.write(Data("outbox-mock-bench: \(error)\n".utf8))
    exit(1)
}
