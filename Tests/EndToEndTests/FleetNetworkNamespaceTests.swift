import Foundation
import OutboxTestSupport
import OutboxMock
import Testing

/// SPEC F1 "one netlink watcher for the whole fleet", N1, N2, R7 with the real kernel: `outbox fleet` runs in a
/// network namespace of the test's own, the mock in a second one, joined by a veth pair. Needs root and iproute2,
/// like `ReachabilityNamespaceTests`.
@Suite("outbox fleet in network namespaces (SPEC F1, N1, R7)", .serialized)
struct FleetNetworkNamespaceTests {
    static var canRun: Bool { ReachabilityNamespaceTests.canRun }
    fileprivate static var ip: String { FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") ? "/usr/sbin/ip" : "/sbin/ip" }

    @discardableResult
    private func ip(_ arguments: String) throws -> Int32 {
        try run(Self.ip, arguments.split(separator: " ").map(String.init)).status
    }

    /// Two namespaces joined by a veth pair, without a default route: the fleet's side is offline for the kernel
    /// (SPEC N1), though the mock is reachable on the pair's own subnet, so the fleet can read its stats.
    private struct Bench {
        var fleetNS: String
        var net: String
        var port: Int
        var recording: String
        var serverStart: Int64
        var dir: TempDirectory

        /// The ingestion requests the mock recorded, with the wall time of the first (over-stated by the mock's
        /// start-up, a few ms: `serverStart` is taken once it said it listens).
        func exchanges() -> (installs: Set<String>, firstAtMs: Int64?) {
            let lines = ((try? String(contentsOfFile: recording, encoding: .utf8)) ?? "").split(separator: "\n").map { jsonObject(String($0)) }
            let first = lines.compactMap { $0["at"] as? Int }.min().map { serverStart + Int64($0) }
            return (Set(lines.compactMap { $0["install"] as? String }), first)
        }
    }

    private func withBench(_ body: (Bench) throws -> Void) throws {
        guard Self.canRun else {
            print("skipped: this test creates network namespaces and needs root and iproute2 (uid \(getuid()))")
            return
        }
        let suffix = String(getpid() % 10000 + 1)
        let fleetNS = "obxF\(suffix)", serverNS = "obxM\(suffix)"
        let dir = TempDirectory(); defer { dir.remove() }
        defer {
            _ = try? ip("netns del \(fleetNS)")
            _ = try? ip("netns del \(serverNS)")
        }
        let net = "10.233.\((Int(suffix) ?? 1) % 200)"
        #expect(try ip("netns add \(fleetNS)") == 0)
        #expect(try ip("netns add \(serverNS)") == 0)
        #expect(try ip("link add vG\(suffix) netns \(fleetNS) type veth peer name vN\(suffix) netns \(serverNS)") == 0)
        try ip("-n \(fleetNS) addr add \(net).1/24 dev vG\(suffix)")
        try ip("-n \(serverNS) addr add \(net).2/24 dev vN\(suffix)")
        for (ns, dev) in [(fleetNS, "vG\(suffix)"), (serverNS, "vN\(suffix)")] {
            try ip("-n \(ns) link set lo up")
            try ip("-n \(ns) link set \(dev) up")
        }
        // The mock, recording every ingestion request with its time and install.
        let port = 20_000 + (Int(suffix) ?? 1) % 20_000
        let recording = dir.path + "/exchanges.jsonl"
        let server = ChildProcess()
        server.executableURL = URL(fileURLWithPath: Self.ip)
        server.arguments = ["netns", "exec", serverNS, builtProduct("outbox-mock"), "--host", "\(net).2", "--port", "\(port)",
                            "--record", recording]
        let serverOutput = Pipe()
        server.standardOutput = serverOutput
        try server.run()
        defer { if server.isRunning { kill(server.processIdentifier, SIGTERM); server.waitUntilExit() } }
        #expect(LineReader(serverOutput.fileHandleForReading).next() == "listening on http://\(net).2:\(port)")
        try body(Bench(fleetNS: fleetNS, net: net, port: port, recording: recording, serverStart: wallMs(), dir: dir))
    }

    /// `outbox fleet` in the fleet's namespace, its stderr read line by line (the engines log each reachability
    /// change they are told, N2, at info).
    private final class Fleet {
        let process = ChildProcess()
        let output = Pipe(), log = Pipe()
        let reader: LineReader
        var lines: [String] = []

        init(_ bench: Bench, devices: Int, extra: [String]) throws {
            process.executableURL = URL(fileURLWithPath: FleetNetworkNamespaceTests.ip)
            process.arguments = ["netns", "exec", bench.fleetNS, builtProduct("outbox"), "fleet", "--devices", "\(devices)",
                                 "--events", "10", "--endpoint", "http://\(bench.net).2:\(bench.port)",
                                 "--dir", bench.dir.path + "/stores", "--timeout", "60", "--testing", "--interval", "0.05",
                                 "--retry-intervals", "0.1,0.2,0.4", "--log-level", "info"] + extra
            process.standardOutput = output
            process.standardError = log
            reader = LineReader(log.fileHandleForReading)
            try process.run()
        }

        /// Waits for `count` lines containing `text` (bounded: stderr ends when the fleet exits).
        func awaitLines(containing text: String, count: Int) -> Bool {
            var seen = lines.filter { $0.contains(text) }.count
            while seen < count, let line = reader.next() {
                lines.append(line)
                if line.contains(text) { seen += 1 }
            }
            return seen >= count
        }

        /// Drains stderr until the fleet exits; its closing object.
        func finish() -> [String: Any] {
            while reader.next() != nil {}
            process.waitUntilExit()
            return jsonObject(String(decoding: readToEnd(output.fileHandleForReading), as: UTF8.self))
        }

        deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
    }

    // SPEC F1, N1, R7: without a default route every device, on every loop, is told it is offline and sends nothing;
    // when the route appears, every device is told it is online and delivers at once.
    @Test func theFleetsOneWatcherTakesEveryDeviceOfflineAndBackOnline() throws {
        try withBench { bench in
            let devices = 3  // on two loops (one per core, at most the devices)
            let fleet = try Fleet(bench, devices: devices, extra: [])
            #expect(fleet.awaitLines(containing: "network offline", count: devices))
            // The fleet's stats reading at start went over the pair's subnet; nothing went to ingestion (R7).
            #expect(bench.exchanges().installs.isEmpty)

            let online = wallMs()
            #expect(try ip("-n \(bench.fleetNS) route add default via \(bench.net).2") == 0)
            #expect(fleet.awaitLines(containing: "network changed", count: 1))
            let summary = fleet.finish()
            let doneAt = wallMs()
            #expect(fleet.process.terminationStatus == 0)
            #expect(summary["lost"] as? Int == 0)
            #expect(summary["delivered"] as? Int == devices * 12)
            #expect(doneAt - online < 10_000, "delivered \(doneAt - online) ms after the default route appeared")
            // Every device sent, none before the route appeared.
            let (installs, firstAt) = bench.exchanges()
            #expect(installs.count == devices)
            #expect((firstAt ?? 0) >= online - 50, "a request \(online - (firstAt ?? 0)) ms before the network came up")
        }
    }

    // SPEC F1: a device the fleet took offline stays offline when the network comes up, until its offline period
    // ends. Every device is taken offline for 3 s during its tracking, while the network is still down; the route
    // appears at once: no request may come before the fleet started plus 3 s.
    @Test func devicesTheFleetHoldsOfflineStayOfflineWhenTheNetworkComesUp() throws {
        try withBench { bench in
            let devices = 3
            let launched = wallMs()
            let fleet = try Fleet(bench, devices: devices, extra: ["--offline-fraction", "1", "--offline-s", "3"])
            // Told offline twice each: by the watcher (no route), then by the fleet at its offline event.
            #expect(fleet.awaitLines(containing: "network offline", count: 2 * devices))
            let online = wallMs()
            #expect(try ip("-n \(bench.fleetNS) route add default via \(bench.net).2") == 0)
            let summary = fleet.finish()
            #expect(fleet.process.terminationStatus == 0)
            #expect(summary["lost"] as? Int == 0)
            #expect(summary["delivered"] as? Int == devices * 12)
            let (installs, firstAt) = bench.exchanges()
            #expect(installs.count == devices)
            #expect(online - launched < 2500, "the route came \(online - launched) ms after the start: too late to tell")
            #expect((firstAt ?? 0) >= launched + 3000, "a request \(launched + 3000 - (firstAt ?? 0)) ms before any offline period ended")
        }
    }
}
