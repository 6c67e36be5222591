import Foundation
import OutboxMock
import Testing

/// SPEC F1 "one netlink watcher for the whole fleet", N1, N2, R7 with the real kernel: `outbox fleet` runs in a
/// network namespace of the test's own, the mock in a second one, joined by a veth pair. Needs root and iproute2,
/// like `ReachabilityNamespaceTests`.
@Suite("outbox fleet in network namespaces (SPEC F1, N1, R7)", .serialized)
struct FleetNetworkNamespaceTests {
    static var canRun: Bool { ReachabilityNamespaceTests.canRun }
    private static var ip: String { FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") ? "/usr/sbin/ip" : "/sbin/ip" }

    @discardableResult
    private func ip(_ arguments: String) throws -> Int32 {
        try run(Self.ip, arguments.split(separator: " ").map(String.init)).status
    }

    // SPEC F1, N1, R7: the fleet starts with no default route — offline for the kernel, though the mock is reachable
    // on the veth's own subnet, so the fleet can read its stats. Every device, on every loop, is told so and sends
    // nothing; when the default route appears, every device is told it is online and delivers at once.
    @Test func theFleetsOneWatcherTakesEveryDeviceOfflineAndBackOnline() throws {
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
        let server = Process()
        server.executableURL = URL(fileURLWithPath: Self.ip)
        server.arguments = ["netns", "exec", serverNS, builtProduct("outbox-mock"), "--host", "\(net).2", "--port", "\(port)",
                            "--record", recording]
        let serverOutput = Pipe()
        server.standardOutput = serverOutput
        try server.run()
        defer { if server.isRunning { kill(server.processIdentifier, SIGTERM); server.waitUntilExit() } }
        #expect(LineReader(serverOutput.fileHandleForReading).next() == "listening on http://\(net).2:\(port)")
        let serverStart = wallMs()

        // Three devices on two loops (one per core, at most the devices).
        let devices = 3
        let fleet = Process()
        fleet.executableURL = URL(fileURLWithPath: Self.ip)
        fleet.arguments = ["netns", "exec", fleetNS, builtProduct("outbox"), "fleet", "--devices", "\(devices)", "--events", "10",
                           "--endpoint", "http://\(net).2:\(port)", "--dir", dir.path + "/stores", "--timeout", "60",
                           "--testing", "--interval", "0.05", "--retry-intervals", "0.1,0.2,0.4", "--log-level", "info"]
        let fleetOutput = Pipe(), fleetLog = Pipe()
        fleet.standardOutput = fleetOutput
        fleet.standardError = fleetLog
        try fleet.run()
        defer { if fleet.isRunning { kill(fleet.processIdentifier, SIGKILL) } }
        // Each device's delivery logs the state it was told (N2, at info): wait for all of them, not for time.
        let log = LineReader(fleetLog.fileHandleForReading)
        var lines: [String] = []
        func awaitLogLines(containing text: String, count: Int) -> Bool {
            var seen = lines.filter { $0.contains(text) }.count
            while seen < count, let line = log.next() {
                lines.append(line)
                if line.contains(text) { seen += 1 }
            }
            return seen >= count
        }
        #expect(awaitLogLines(containing: "network offline", count: devices))
        // The fleet's stats reading at start went over the veth's subnet; nothing was sent to ingestion (R7).
        #expect(((try? String(contentsOfFile: recording, encoding: .utf8)) ?? "").isEmpty)

        // The default route appears: the watcher says online, every device hears it and delivers.
        let online = wallMs()
        #expect(try ip("-n \(fleetNS) route add default via \(net).2") == 0)
        #expect(awaitLogLines(containing: "network changed", count: 1))
        while log.next() != nil {}  // drains stderr until the fleet exits
        fleet.waitUntilExit()
        let doneAt = wallMs()
        let summary = jsonObject(String(decoding: fleetOutput.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        #expect(fleet.terminationStatus == 0)
        #expect(summary["lost"] as? Int == 0)
        #expect(summary["delivered"] as? Int == devices * 12)
        #expect(doneAt - online < 10_000, "delivered \(doneAt - online) ms after the default route appeared")

        // Every device sent, and none before the route appeared. The recording dates requests from the server's start,
        // which `serverStart` follows by the mock's start-up (a few ms): that much is the check's slack.
        let exchanges = ((try? String(contentsOfFile: recording, encoding: .utf8)) ?? "").split(separator: "\n").map { jsonObject(String($0)) }
        #expect(Set(exchanges.compactMap { $0["install"] as? String }).count == devices)
        let firstAt = serverStart + Int64(exchanges.compactMap { $0["at"] as? Int }.min() ?? -1_000_000)
        #expect(firstAt >= online - 50, "a request \(online - firstAt) ms before the network came up")
    }
}
