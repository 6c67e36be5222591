import Foundation
import OutboxTestSupport
import Logging
import Testing
@testable import Outbox

/// SPEC N1, R6, R7 with the real rtnetlink watcher: the engine (`outbox emit`) runs in a network namespace of
/// the test's own, the mock server in a second one, joined by a veth pair. Needs root (CI has it) and iproute2.
@Suite("Reachability in network namespaces (SPEC N1, R6, R7)", .serialized)
struct ReachabilityNamespaceTests {
    static var canRun: Bool {
        getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip")
            || FileManager.default.isExecutableFile(atPath: "/sbin/ip") && getuid() == 0
    }

    private static var ip: String { FileManager.default.isExecutableFile(atPath: "/usr/sbin/ip") ? "/usr/sbin/ip" : "/sbin/ip" }

    @discardableResult
    private func ip(_ arguments: String) throws -> Int32 {
        try run(Self.ip, arguments.split(separator: " ").map(String.init)).status
    }

    /// How the engine's network changes while its batch waits for a 5-minute retry.
    enum Change { case offlineThenOnline, defaultRouteMoves }

    // SPEC R6, R7, N1: offline (the link and the default route go), then online again.
    @Test func aNetworkChangeResetsBackOffAndSendsAtOnce() async throws {
        try await networkChange(.offlineThenOnline)
    }

    // SPEC R6, N1: the default route moves to another interface while online: a network change too.
    @Test func aDefaultRouteMovingToAnotherInterfaceResetsBackOff() async throws {
        try await networkChange(.defaultRouteMoves)
    }

    /// Two namespaces joined by a veth pair (`engineDev` with `net`.1, `serverDev` with `net`.2), loopback up in both,
    /// and the engine's default route through the server's side. The caller deletes them.
    private func linkedNamespaces(_ engineNS: String, _ serverNS: String, net: String, engineDev: String,
                                  serverDev: String) throws {
        #expect(try ip("netns add \(engineNS)") == 0)
        #expect(try ip("netns add \(serverNS)") == 0)
        #expect(try ip("link add \(engineDev) netns \(engineNS) type veth peer name \(serverDev) netns \(serverNS)") == 0)
        try ip("-n \(engineNS) addr add \(net).1/24 dev \(engineDev)")
        try ip("-n \(serverNS) addr add \(net).2/24 dev \(serverDev)")
        for (ns, dev) in [(engineNS, engineDev), (serverNS, serverDev)] {
            try ip("-n \(ns) link set lo up")
            try ip("-n \(ns) link set \(dev) up")
        }
        #expect(try ip("-n \(engineNS) route add default via \(net).2") == 0)
    }

    private func networkChange(_ change: Change) async throws {
        guard Self.canRun else {
            print("skipped: this test creates network namespaces and needs root and iproute2 (uid \(getuid()))")
            return
        }
        let suffix = String(getpid() % 10000)
        let engineNS = "obxE\(suffix)", serverNS = "obxS\(suffix)"
        let dir = TempDirectory(); defer { dir.remove() }
        defer {
            _ = try? ip("netns del \(engineNS)")
            _ = try? ip("netns del \(serverNS)")
        }
        // Two namespaces joined by a veth pair; the engine's side has a default route through the server's side.
        try linkedNamespaces(engineNS, serverNS, net: "10.231.\(Int(suffix)! % 200)", engineDev: "vE\(suffix)",
                             serverDev: "vS\(suffix)")
        let serverAddress = "10.231.\(Int(suffix)! % 200).2"
        if change == .defaultRouteMoves {
            // A second pair of interfaces for the route to move to; the server stays reachable through the first.
            let second = "10.232.\(Int(suffix)! % 200)"
            #expect(try ip("link add vF\(suffix) netns \(engineNS) type veth peer name vT\(suffix) netns \(serverNS)") == 0)
            try ip("-n \(engineNS) addr add \(second).1/24 dev vF\(suffix)")
            try ip("-n \(serverNS) addr add \(second).2/24 dev vT\(suffix)")
            try ip("-n \(engineNS) link set vF\(suffix) up")
            try ip("-n \(serverNS) link set vT\(suffix) up")
        }

        let outbox = builtProduct("outbox"), mock = builtProduct("outbox-mock")
        let port = 20_000 + Int(suffix)! % 20_000
        // Phase 1: no server yet. The first attempt is refused, the second retry is scheduled 2.5–5 minutes out.
        let emit = ChildProcess()
        emit.executableURL = URL(fileURLWithPath: Self.ip)
        emit.arguments = ["netns", "exec", engineNS, outbox, "emit", "--store", dir.file(), "--count", "50",
                          "--endpoint", "http://\(serverAddress):\(port)", "--app-secret", "k", "--wait-delivered",
                          "--timeout", "60", "--testing", "--interval", "0.05", "--retry-intervals", "0.1,300,300",
                          // R6 against App Center's back-off (R3): R9's probes would find the server first.
                          "--no-recovery-probe", "--log-level", "info"]
        let emitOutput = Pipe(), emitLog = Pipe()
        emit.standardOutput = emitOutput
        emit.standardError = emitLog
        try emit.run()
        defer { if emit.isRunning { kill(emit.processIdentifier, SIGKILL) } }
        // Wait for the events, not for time: the child logs each retry it schedules (R3, at info) and each change of
        // the network it sees (N1). Two refused attempts: the second retry is minutes away. (Bounded: the child
        // gives up after its --timeout, and its stderr then ends.)
        let log = LineReader(emitLog.fileHandleForReading)
        func awaitLogLines(containing text: String, count: Int) -> Bool {
            var seen = 0
            while seen < count, let line = log.next() { if line.contains(text) { seen += 1 } }
            return seen == count
        }
        #expect(awaitLogLines(containing: "batch will be retried", count: 2))

        // Phase 2: offline (the link goes down, the default route with it). The server starts meanwhile.
        if change == .offlineThenOnline { try ip("-n \(engineNS) link set vE\(suffix) down") }
        let server = ChildProcess()
        server.executableURL = URL(fileURLWithPath: Self.ip)
        let recording = dir.path + "/exchanges.jsonl"
        server.arguments = ["netns", "exec", serverNS, mock, "--host", serverAddress, "--port", "\(port)", "--record", recording]
        let serverOutput = Pipe()
        server.standardOutput = serverOutput
        try server.run()
        defer { if server.isRunning { kill(server.processIdentifier, SIGTERM); server.waitUntilExit() } }
        let ready = LineReader(serverOutput.fileHandleForReading).next() ?? ""
        #expect(ready == "listening on http://\(serverAddress):\(port)")
        // Taken after the server started, so `serverStart + at` can only overstate the request's time.
        let serverStart = wallMs()
        // The engine has seen the network go (R7: nothing is attempted while offline).
        if change == .offlineThenOnline { #expect(awaitLogLines(containing: "network offline", count: 1)) }

        // Phase 3: back online, or the default route moves. R6: back-off reset, the waiting batch goes at once — not
        // in 2.5–5 minutes.
        switch change {
        case .offlineThenOnline:
            try ip("-n \(engineNS) link set vE\(suffix) up")
            try ip("-n \(engineNS) route add default via \(serverAddress)")
        case .defaultRouteMoves:
            #expect(try ip("-n \(engineNS) route replace default via 10.232.\(Int(suffix)! % 200).2 dev vF\(suffix)") == 0)
        }
        let online = wallMs()
        emit.waitUntilExit()
        let doneAt = wallMs()
        let result = jsonObject(String(decoding: readToEnd(emitOutput.fileHandleForReading), as: UTF8.self))
        #expect(result["delivered"] as? Int == 50)
        #expect(result["retries"] as? Int == 2)  // the 0.1 s retry and the 5-minute one; none while offline (R7)

        // The child exits right after its only request was answered: an upper bound on the time to that request.
        // "At once" against a back-off of 150–300 s: 3 s leaves a loaded 2-core machine room for netlink, a
        // process exit and iproute2, and still tells the two apart by a factor of 50.
        #expect(doneAt - online < 3000, "delivered \(doneAt - online) ms after the network came back")
        // The server's recording dates the first request (ms since the server started).
        let firstLine = (try? String(contentsOfFile: recording, encoding: .utf8))?.split(separator: "\n").first.map(String.init) ?? ""
        let firstAt = serverStart + Int64((jsonObject(firstLine)["at"] as? Int) ?? 1_000_000)
        print("network back -> first request: at most \(firstAt - online) ms; delivered and exited after \(doneAt - online) ms")
        #expect(firstAt - online < 3000)
    }

    // SPEC N1, R8: whether to watch the network is decided again on every endpoint change — none for loopback, one
    // for a remote endpoint, none again back on loopback. (No request goes: nothing is tracked.)
    @Test func anUpdateDecidesAgainWhetherToWatchTheNetwork() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        var configuration = Configuration(storePath: dir.file())
        configuration.endpoint = "http://127.0.0.1:9"
        configuration.appSecret = "k"
        let engine = try OutboxEngine(configuration: configuration)
        defer { engine.shutdown() }
        #expect(await Self.watches(engine) == false, "loopback needs no watcher")
        try engine.update { $0.endpoint = "http://192.0.2.1:9" }
        #expect(await Self.watches(engine) == true, "a remote endpoint is watched")
        try engine.update { $0.endpoint = "http://localhost:9" }
        #expect(await Self.watches(engine) == false, "back on loopback the watcher goes")
        var unwatched = configuration
        unwatched.storePath = dir.file("b")
        unwatched.watchesNetwork = false
        let second = try OutboxEngine(configuration: unwatched)
        defer { second.shutdown() }
        try second.update { $0.endpoint = "http://192.0.2.1:9" }
        #expect(await Self.watches(second) == false, "watchesNetwork false stays so")
    }

    static func watches(_ engine: OutboxEngine) async -> Bool {
        await withCheckedContinuation { continuation in
            engine.onLoop({ continuation.resume(returning: $0.watchesNetworkNow) },
                          orElse: { continuation.resume(returning: false) })
        }
    }

    // SPEC N1, R6, R7, R8 with the real rtnetlink watcher and no `setReachability`: an engine started on a loopback
    // endpoint, updated to a remote one, sees the network go and come back (R7: nothing attempted while offline);
    // updated back to loopback while the network is down, it delivers (loopback is always reachable). The engine
    // runs in this process, created on a thread that joined the test's namespace (its loop thread inherits it); one
    // mock listens on that namespace's loopback, the other in a second namespace behind a veth pair.
    @Test func anEngineUpdatedFromLoopbackToRemoteAndBackWatchesTheNetworkOnlyWhileRemote() async throws {
        guard Self.canRun else {
            print("skipped: this test creates network namespaces and needs root and iproute2 (uid \(getuid()))")
            return
        }
        let suffix = String((getpid() + 7) % 10000)
        let engineNS = "obxU\(suffix)", serverNS = "obxV\(suffix)"
        let net = "10.233.\(Int(suffix)! % 200)"
        let dir = TempDirectory(); defer { dir.remove() }
        defer {
            _ = try? ip("netns del \(engineNS)")
            _ = try? ip("netns del \(serverNS)")
        }
        try linkedNamespaces(engineNS, serverNS, net: net, engineDev: "vU\(suffix)", serverDev: "vV\(suffix)")

        // One mock on the engine namespace's loopback, one in the server namespace.
        let mock = builtProduct("outbox-mock")
        let port = 20_000 + Int(suffix)! % 20_000
        var servers: [ChildProcess] = []
        defer { for server in servers where server.isRunning { kill(server.processIdentifier, SIGTERM); server.waitUntilExit() } }
        for (ns, host) in [(engineNS, "127.0.0.1"), (serverNS, "\(net).2")] {
            let server = ChildProcess()
            server.executableURL = URL(fileURLWithPath: Self.ip)
            server.arguments = ["netns", "exec", ns, mock, "--host", host, "--port", "\(port)"]
            let output = Pipe()
            server.standardOutput = output
            try server.run()
            servers.append(server)
            #expect(LineReader(output.fileHandleForReading).next() == "listening on http://\(host):\(port)")
        }

        let lines = LogLines()
        var configuration = Configuration(storePath: dir.file())
        configuration.endpoint = "http://127.0.0.1:\(port)"
        configuration.appSecret = "k"
        configuration.logger = Logger(label: "outbox.test", factory: { _ in lines })
        configuration.dispatchInterval = .zero  // manual: requests go when the test dispatches
        let engine = try Self.inNamespace(engineNS) { [configuration] in try OutboxEngine(configuration: configuration) }
        defer { engine.shutdown() }
        func deliver(_ count: Int) async throws -> DispatchResult {
            for i in 0..<count { try engine.trackEvent("e", properties: ["i": .int(Int64(i))]) }
            return await withCheckedContinuation { continuation in engine.dispatch { continuation.resume(returning: $0) } }
        }

        // Loopback: no watcher; delivered to the namespace's loopback mock.
        #expect(try await deliver(5) == .good)
        #expect(await Self.watches(engine) == false)

        // Remote: the watcher starts; the network going is seen (R7: no attempt), and its return (R6).
        try engine.update { $0.endpoint = "http://\(net).2:\(port)" }
        #expect(await Self.watches(engine) == true)
        #expect(try await deliver(5) == .good)
        var mark = lines.count
        try ip("-n \(engineNS) link set vU\(suffix) down")
        #expect(lines.waitFor("network offline", since: mark), "the watcher saw the link go: \(lines.all)")
        let requestsBefore = try await engine.status().requests
        #expect(try await deliver(5) == .error)
        #expect(try await engine.status().requests == requestsBefore, "nothing is attempted while offline (R7)")
        mark = lines.count
        try ip("-n \(engineNS) link set vU\(suffix) up")
        try ip("-n \(engineNS) route add default via \(net).2")
        #expect(lines.waitFor("network online", since: mark), "the watcher saw it come back: \(lines.all)")
        #expect(try await deliver(0) == .good, "the waiting logs go")

        // Back to loopback while the network is down: no watcher, online, delivered.
        mark = lines.count
        try ip("-n \(engineNS) link set vU\(suffix) down")
        #expect(lines.waitFor("network offline", since: mark), "\(lines.all)")
        try engine.update { $0.endpoint = "http://127.0.0.1:\(port)" }
        #expect(await Self.watches(engine) == false)
        #expect(try await deliver(5) == .good, "loopback is always reachable: \(lines.all)")
        let status = try await engine.status()
        #expect(status.delivered >= 20)  // and the engine's own logs (its session's start)
        #expect(status.store.pendingNormal == 0)
    }

    /// Runs `body` on a thread of its own that joined the network namespace `name` (`ip netns add`'s), and returns
    /// its result; the threads it creates (an engine's loop thread) stay in that namespace.
    static func inNamespace<T>(_ name: String, _ body: @escaping @Sendable () throws -> T) throws -> T {
        typealias SetNS = @convention(c) (Int32, Int32) -> Int32
        guard let symbol = dlsym(nil, "setns") else { throw OutboxError.invalidConfiguration("no setns") }
        let setns = unsafeBitCast(symbol, to: SetNS.self)
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Result<T, any Error> = .failure(OutboxError.invalidConfiguration("not run"))
        let thread = Thread {
            defer { done.signal() }
            let fd = open("/var/run/netns/\(name)", O_RDONLY)
            guard fd >= 0, setns(fd, 0x4000_0000 /* CLONE_NEWNET */) == 0 else {
                result = .failure(OutboxError.invalidConfiguration("setns \(name): errno \(errno)"))
                return
            }
            close(fd)
            result = Result { try body() }
        }
        thread.start()
        done.wait()
        return try result.get()
    }
}

/// The engine's log lines, for a test to wait for one (the watcher's and delivery's reports) without polling.
final class LogLines: LogHandler, @unchecked Sendable {
    private let condition = NSCondition()
    private var lines: [String] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .info

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        condition.lock()
        lines.append(event.message.description)
        condition.broadcast()
        condition.unlock()
    }

    var all: [String] { condition.lock(); defer { condition.unlock() }; return lines }
    var count: Int { condition.lock(); defer { condition.unlock() }; return lines.count }

    /// Waits until a line after the first `since` contains `text`; false after 20 s (a bound for a failing test,
    /// not a delay).
    func waitFor(_ text: String, since: Int) -> Bool {
        let deadline = Date().addingTimeInterval(20)
        condition.lock()
        defer { condition.unlock() }
        while !lines.dropFirst(since).contains(where: { $0.contains(text) }) {
            if !condition.wait(until: deadline) { return false }
        }
        return true
    }
}
