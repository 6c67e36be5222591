import CoreMetrics
import Glibc
import Histogram
import NIOCore
import NIOHTTP1
import NIOPosix
import OutboxMock
import Synchronization

/// What the fleet knows at a scrape: the loops' atomics (tracked, offline, done), the sampler's last reading of the
/// mock's stats (delivered, requests by status, p99), and once the run ended the closing object's counts.
struct FleetMetricsSnapshot {
    var devices: Int
    var devicesOffline: Int
    var devicesDoneTracking: Int
    var tracked: Int
    /// Unique logs of this run at the mock so far; nil when the server is not an outbox-mock.
    var delivered: Int?
    var requestsByStatus: [String: Int]
    var requestsUnanswered: Int
    var eventsPerSecond: Double
    var delayP99Ms: Int64?
    /// The closing object (SPEC F1), once the run ended.
    var summary: FleetSummary?
    /// The delays of this run's logs in the mock's records (SPEC F2's accounting), once the run ended.
    var delays: Histogram<UInt64>?
}

/// SPEC F1 `--metrics-port`: the fleet's own counters in Prometheus' text format 0.0.4, rendered when scraped with the
/// mock's `PrometheusTextWriter` (SPEC M9 names the mock's families; the fleet's are `outbox_fleet_…`). The same
/// reason as the mock's applies for not using swift-prometheus: every figure already exists as a counter somewhere
/// (the loops' atomics, the mock's stats), and a registry would have to be fed copies of them.
enum FleetMetrics {
    static func render(_ s: FleetMetricsSnapshot) -> [UInt8] {
        var w = PrometheusTextWriter()
        w.family("outbox_fleet_devices", type: "gauge", help: "Simulated installs of this run.")
        w.sample("outbox_fleet_devices", [], s.devices)
        w.family("outbox_fleet_devices_online", type: "gauge", help: "Devices online: not in their offline period.")
        w.sample("outbox_fleet_devices_online", [], s.devices - s.devicesOffline)
        w.family("outbox_fleet_devices_offline", type: "gauge",
                 help: "Devices the fleet took offline (setReachability) whose offline period has not ended.")
        w.sample("outbox_fleet_devices_offline", [], s.devicesOffline)
        w.family("outbox_fleet_devices_done_tracking", type: "gauge", help: "Devices that tracked all their events.")
        w.sample("outbox_fleet_devices_done_tracking", [], s.devicesDoneTracking)
        w.family("outbox_fleet_tracked_total", type: "counter",
                 help: "Logs the devices' engines accepted: events, and each device's startSession and endSession logs.")
        w.sample("outbox_fleet_tracked_total", [], s.summary?.tracked ?? s.tracked)

        // During the run "delivered" is the mock's unique count since the run started (as on the progress line); at
        // the end it is the closing object's, counted per device against the mock's records (SPEC F2).
        if let delivered = s.summary?.delivered ?? s.delivered {
            w.family("outbox_fleet_delivered_total", type: "counter",
                     help: "Logs of this run the ingestion server holds (unique).")
            w.sample("outbox_fleet_delivered_total", [], delivered)
            w.family("outbox_fleet_pending", type: "gauge",
                     help: "Tracked and not yet delivered (during the run the mock's count is read once a second).")
            w.sample("outbox_fleet_pending", [], s.summary?.pending ?? max(0, s.tracked - delivered))
        }
        if !s.requestsByStatus.isEmpty || s.requestsUnanswered > 0 {
            w.family("outbox_fleet_requests_total", type: "counter",
                     help: "The devices' requests by outcome at the mock: its HTTP status, or none (a fault).")
            for (status, count) in s.requestsByStatus.sorted(by: { $0.key < $1.key }) {
                w.sample("outbox_fleet_requests_total", [("status", status)], count)
            }
            w.sample("outbox_fleet_requests_total", [("status", "none")], s.requestsUnanswered)
        }
        w.family("outbox_fleet_events_per_second", type: "gauge",
                 help: "Logs tracked per second between the last two samples (a second apart); once the run ended, "
                     + "the closing object's events_per_s (delivered per second over the run).")
        w.sample("outbox_fleet_events_per_second", [], s.summary?.eventsPerSecond ?? s.eventsPerSecond)
        if let p99 = s.summary?.delay?.p99 ?? s.delayP99Ms.map(Int.init) {
            w.family("outbox_fleet_delivery_delay_p99_ms", type: "gauge",
                     help: "99th percentile of the delivery delay (server arrival - event time), ms.")
            w.sample("outbox_fleet_delivery_delay_p99_ms", [], p99)
        }
        if let summary = s.summary {
            // Counted from each store once the run ended (SPEC F2); the run's verdict beside them.
            w.family("outbox_fleet_dead_lettered", type: "gauge", help: "Logs the stores dead-lettered (end of run).")
            w.sample("outbox_fleet_dead_lettered", [], summary.deadLettered)
            w.family("outbox_fleet_evicted", type: "gauge", help: "Logs the stores evicted (end of run).")
            w.sample("outbox_fleet_evicted", [], summary.evicted)
            w.family("outbox_fleet_duplicates", type: "gauge", help: "Duplicates the mock absorbed (end of run).")
            w.sample("outbox_fleet_duplicates", [], summary.duplicates)
            if let lost = summary.lost {
                w.family("outbox_fleet_lost", type: "gauge", help: "Logs lost (SPEC F2; end of run).")
                w.sample("outbox_fleet_lost", [], lost)
            }
        }
        if let delays = s.delays, delays.totalCount > 0 { histogram(delays, into: &w) }
        w.family("outbox_fleet_finished", type: "gauge", help: "1 once the closing object was computed.")
        w.sample("outbox_fleet_finished", [], s.summary == nil ? 0 : 1)
        // BEHAVIOUR O3: the engines' own families on the same path (empty until an engine made one).
        EngineMetricsRegistry.shared.render(into: &w)
        return w.out
    }

    /// `outbox_fleet_delivery_delay_ms`: the accounting's HdrHistogram in 1–2–5 buckets up to its largest delay.
    /// Delays are whole milliseconds, so `le N` counts 0…N exactly. The sum is the histogram's mean times its count:
    /// HdrHistogram keeps no exact sum.
    private static func histogram(_ delays: Histogram<UInt64>, into w: inout PrometheusTextWriter) {
        let name = "outbox_fleet_delivery_delay_ms"
        w.family(name, type: "histogram", help: "Delivery delay of this run's logs (server arrival - event time), ms; end of run.")
        var bound: UInt64 = 1
        var step = 0
        while true {
            w.sample(name + "_bucket", [("le", String(bound))], delays.count(within: 0...bound))
            if bound >= delays.max || step >= 40 { break }
            bound = [2, 5, 10][step % 3] * UInt64(pow(10.0, Double(step / 3)))
            step += 1
        }
        w.sample(name + "_bucket", [("le", "+Inf")], delays.totalCount)
        w.sample(name + "_sum", [], UInt64((delays.mean * Double(delays.totalCount)).rounded()))
        w.sample(name + "_count", [], delays.totalCount)
    }
}

/// `GET /metrics` on 127.0.0.1: SwiftNIO (already the mock's) on one thread of its own, so that a scrape never runs
/// on a device loop. Each scrape calls `snapshot`, which reads atomics and a lock held for a copy.
final class FleetMetricsServer: Sendable {
    private let group: MultiThreadedEventLoopGroup
    private let channel: any Channel
    let port: Int

    enum Failure: Error, CustomStringConvertible {
        case bind(port: Int, reason: String)
        var description: String {
            switch self {
            case .bind(let port, let reason): return "cannot listen on 127.0.0.1:\(port) for --metrics-port: \(reason)"
            }
        }
    }

    init(port: Int, snapshot: @escaping @Sendable () -> FleetMetricsSnapshot) throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(FleetMetricsHandler(snapshot: snapshot))
                }
            }
        do {
            channel = try bootstrap.bind(host: "127.0.0.1", port: port).wait()
        } catch {
            try? group.syncShutdownGracefully()
            throw Failure.bind(port: port, reason: "\(error)")
        }
        self.group = group
        self.port = channel.localAddress?.port ?? port
    }

    func stop() {
        try? channel.close().wait()
        try? group.syncShutdownGracefully()
    }
}

/// Answers `GET /metrics` (and `HEAD`); 404 for any other path, 405 for other methods.
private final class FleetMetricsHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let snapshot: @Sendable () -> FleetMetricsSnapshot
    private var head: HTTPRequestHead?

    init(snapshot: @escaping @Sendable () -> FleetMetricsSnapshot) { self.snapshot = snapshot }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request): head = request
        case .body: break
        case .end:
            guard let request = head else { return }
            head = nil
            let path = request.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.uri
            var status = HTTPResponseStatus.ok
            var contentType = PrometheusMetrics.contentType
            var body: [UInt8]
            if request.method != .GET && request.method != .HEAD {
                status = .methodNotAllowed
                contentType = "text/plain; charset=utf-8"
                body = Array("GET /metrics only\n".utf8)
            } else if path != "/metrics" {
                status = .notFound
                contentType = "text/plain; charset=utf-8"
                body = Array("not found: the fleet's metrics are at /metrics\n".utf8)
            } else {
                body = FleetMetrics.render(snapshot())
            }
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: contentType)
            headers.add(name: "Content-Length", value: String(body.count))
            let keepAlive = request.isKeepAlive
            headers.add(name: "Connection", value: keepAlive ? "keep-alive" : "close")
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))),
                          promise: nil)
            if request.method != .HEAD {
                context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: body)))), promise: nil)
            }
            let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !keepAlive {
                let channel = context.channel
                done.whenComplete { _ in channel.close(promise: nil) }
            }
        }
    }
}

/// Where a scrape reads from: the loops and the sampler once the fleet started them, and the closing object once the
/// run ended. The server binds before any device starts (a port in use fails the run before it costs anything), so
/// they are attached later.
final class FleetMetricsBoard: Sendable {
    private struct Sources {
        var loops: [FleetLoop] = []
        var sampler: FleetSampler?
        var summary: FleetSummary?
        var delays: Histogram<UInt64>?
    }

    private let devices: Int
    private let sources = Mutex(Sources())

    init(devices: Int) { self.devices = devices }

    func attach(loops: [FleetLoop], sampler: FleetSampler) {
        sources.withLock { $0.loops = loops; $0.sampler = sampler }
    }

    func finish(_ summary: FleetSummary, delays: Histogram<UInt64>) {
        sources.withLock { $0.summary = summary; $0.delays = delays }
    }

    func snapshot() -> FleetMetricsSnapshot {
        let sources = self.sources.withLock { $0 }
        let loops = sources.loops
        var snapshot = FleetMetricsSnapshot(
            devices: devices,
            devicesOffline: loops.reduce(0) { $0 + $1.offlineNow.load(ordering: .relaxed) },
            devicesDoneTracking: loops.reduce(0) { $0 + $1.devicesDone.load(ordering: .relaxed) },
            tracked: loops.reduce(0) { $0 + $1.trackedTotal.load(ordering: .relaxed) },
            delivered: nil, requestsByStatus: [:], requestsUnanswered: 0, eventsPerSecond: 0, delayP99Ms: nil,
            summary: sources.summary, delays: sources.delays)
        // The mock's side comes from the sampler's last reading (once a second): a scrape never waits for the mock.
        let recent = sources.sampler?.samples().suffix(2) ?? []
        if let last = recent.last {
            snapshot.delivered = last.delivered
            snapshot.requestsByStatus = last.statusCounts
            snapshot.requestsUnanswered = last.noAnswer
            snapshot.delayP99Ms = last.p99Ms
            if let first = recent.first, last.t > first.t {
                snapshot.eventsPerSecond = Double(last.tracked - first.tracked) / (last.t - first.t)
            }
        }
        return snapshot
    }
}

extension FleetMetricsServer {
    /// `--metrics-port`: binds, says where on stderr, or fails the run with exit 3 before any device starts.
    static func start(port: Int?, board: FleetMetricsBoard) throws -> FleetMetricsServer? {
        guard let port else { return nil }
        // BEHAVIOUR O3: the engines' own metrics go to the registry the scrape renders; bootstrapped before any device.
        MetricsSystem.bootstrap(EngineMetricsRegistry.shared)
        do {
            let server = try FleetMetricsServer(port: port) { board.snapshot() }
            writeStandardError("metrics on http://127.0.0.1:\(server.port)/metrics\n")
            return server
        } catch {
            writeStandardError("outbox fleet: \(error)\n")
            throw FleetExit(code: 3)
        }
    }
}
