import Foundation
import OutboxTestSupport
import Outbox
import OutboxMock
import Testing

/// The real `outbox fleet` binary against the real mock (SPEC F1–F3).
@Suite("outbox fleet (SPEC F1–F4)")
struct FleetEndToEndTests {
    /// SPEC F1: the closing object has exactly these keys.
    static let keys: Set<String> = ["devices", "tracked", "delivered", "duplicates", "dead_lettered", "evicted", "pending",
                                    "lost", "cross_mock_duplicates", "events_per_s", "delay_ms", "peak_rss_kib", "cpu_s"]

    /// Short intervals and quick retries, so that a fault scenario resolves in seconds.
    static let fast = ["--testing", "--interval", "0.1", "--retry-intervals", "0.1,0.2,0.4", "--batch-size", "10"]

    // SPEC F1, F2, F3: 20 devices × 50 events through 30 % 503s, a fifth of them offline for a second: everything
    // tracked is delivered, nothing is lost, and the report holds its plots. Each device's events sit in a session
    // of their own: its startSession and endSession logs count as tracked too (FleetSessions.swift).
    @Test func aFleetUnderFaultsWithDevicesOfflineLosesNothingAndWritesTheReport() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let report = dir.path + "/report"
        let result = try runOutbox(["fleet", "--devices", "20", "--events", "50", "--seed", "7",
                                    "--scenario", try MockServer.scenarioPath("flaky"),
                                    "--offline-fraction", "0.2", "--offline-s", "1",
                                    "--dir", dir.path + "/stores", "--report", report, "--timeout", "120"] + Self.fast, in: dir)
        #expect(result.status == 0, "stderr: \(result.errors)")
        let summary = jsonObject(result.output)
        #expect(Set(summary.keys) == Self.keys)
        #expect(summary["devices"] as? Int == 20)
        #expect(summary["tracked"] as? Int == 20 * (50 + 2))
        #expect(summary["delivered"] as? Int == 20 * (50 + 2))
        #expect(summary["lost"] as? Int == 0)
        #expect(summary["pending"] as? Int == 0)
        let delay = summary["delay_ms"] as? [String: Any]
        #expect(Set(delay?.keys.map { $0 } ?? []) == ["p50", "p90", "p99", "max"])
        #expect((summary["peak_rss_kib"] as? Int ?? 0) > 0)

        // SPEC F3, F7: summary.json is the closing object and the delay histogram's [ms, count] pairs, one pair per
        // recorded bucket, ascending, their counts one per delivered log whose delay was measured; report.html is
        // self-contained with its four plots.
        var written = jsonObject(try String(contentsOfFile: report + "/summary.json", encoding: .utf8))
        let pairs = try #require(written.removeValue(forKey: "delay_histogram") as? [[Int]])
        let samples = try #require(written.removeValue(forKey: "samples") as? [[Any]])
        #expect(!samples.isEmpty && samples.allSatisfy { $0.count == 3 })
        // SPEC F9's recovery figures: null, the flaky scenario refusing nothing in a window.
        for key in ["fault_requests_per_device_per_min", "recovery_s", "recovery_peak_rps", "steady_rps",
                    "devices_open_at_first_event"] {
            #expect(written.removeValue(forKey: key) is NSNull, "\(key)")
        }
        #expect(NSDictionary(dictionary: written) == NSDictionary(dictionary: summary))
        #expect(pairs.allSatisfy { $0.count == 2 && $0[1] > 0 })
        #expect(pairs.map { $0[0] } == pairs.map { $0[0] }.sorted())
        #expect(pairs.reduce(0) { $0 + $1[1] } == 20 * (50 + 2))
        #expect(pairs.last?[0] ?? -1 >= (delay?["max"] as? Int ?? .max))
        let html = try String(contentsOfFile: report + "/report.html", encoding: .utf8)
        #expect(html.components(separatedBy: "<svg").count - 1 == 4)
        #expect(html.contains("<polyline"))
        #expect(!html.contains("<script"))
        #expect(!html.contains("src=\"http"))
        // The status plot shows the scenario's 503s beside the 200s.
        #expect(html.contains(">503<"))

        // Each device has its own store directory, and its disk reserve (SPEC S7) is the fleet's small one, not the
        // 256 KiB default that would take 2.5 GB at 10 000 devices.
        let stores = try FileManager.default.contentsOfDirectory(atPath: dir.path + "/stores").filter { $0.hasPrefix("device-") }
        #expect(stores.count == 20)
        let reserve = try FileManager.default.attributesOfItem(atPath: dir.path + "/stores/device-0/outbox.sqlite-reserve")
        #expect((reserve[.size] as? Int) == 64 * 1024)
    }

    // SPEC F6: the run's records read from several mocks directly. Two mocks, the devices sending to one: the union
    // holds everything, nothing is counted twice, exit 0. The same mock named twice holds every log twice: each is a
    // cross-mock duplicate, and the run fails (exit 1) though nothing is lost.
    @Test func accountingAcrossMocksCountsCrossMockDuplicates() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let sending = try startMock()
        defer { try? sending.stop() }
        let other = try startMock()
        defer { try? other.stop() }
        let common = ["fleet", "--devices", "4", "--events", "10", "--endpoint", sending.baseURL, "--timeout", "60"] + Self.fast
        let union = try runOutbox(common + ["--accounting-endpoint", other.baseURL, "--accounting-endpoint", sending.baseURL], in: dir)
        #expect(union.status == 0, "stderr: \(union.errors)")
        let clean = jsonObject(union.output)
        #expect(clean["lost"] as? Int == 0 && clean["cross_mock_duplicates"] as? Int == 0)
        #expect(clean["delivered"] as? Int == 4 * (10 + 2))

        let twice = try runOutbox(common + ["--accounting-endpoint", sending.baseURL, "--accounting-endpoint", sending.baseURL], in: dir)
        #expect(twice.status == 1, "stderr: \(twice.errors)")
        let doubled = jsonObject(twice.output)
        #expect(doubled["lost"] as? Int == 0)
        #expect(doubled["cross_mock_duplicates"] as? Int == 4 * (10 + 2))
        #expect(twice.errors.contains("recorded by more than one mock"))
        #expect(try runOutbox(common + ["--accounting-endpoint", "https://x"], in: dir).status != 0)
    }

    // SPEC F2: logs the mock forgot (a reset in mid-run) are lost: exit 1, and `missing DEVICE LOG-ID` lines
    // (at most 10) on stderr naming them.
    // Synchronous on purpose: the watch below must not wait for a cooperative thread to resume it (on 2 cores the
    // pool is 2 threads, which other tests' blocking process waits can hold past the fleet's whole run).
    @Test func logsTheMockNoLongerHoldsAreCountedLostAndNamed() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let outPath = dir.path + "/stdout"
        let errPath = dir.path + "/stderr"
        FileManager.default.createFile(atPath: outPath, contents: nil)
        FileManager.default.createFile(atPath: errPath, contents: nil)
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: builtProduct("outbox"))
        process.arguments = ["fleet", "--devices", "4", "--events", "40", "--rate", "10", "--endpoint", server.baseURL,
                             "--dir", dir.path + "/stores", "--timeout", "60"] + Self.fast
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        try process.run()
        // Tracking lasts four seconds; once the first logs arrived, the mock forgets them. The mock has no event to
        // wait on, so its count is watched.
        let deadline = Date().addingTimeInterval(60)
        while server.stats().logsUnique == 0 && Date() < deadline && process.isRunning { usleep(5_000) }
        let forgotten = server.stats().logsUnique
        server.reset()
        process.waitUntilExit()
        let output = try String(contentsOfFile: outPath, encoding: .utf8)
        let errors = try String(contentsOfFile: errPath, encoding: .utf8)
        #expect(forgotten > 0)
        #expect(process.terminationStatus == 1, "stderr: \(errors)")
        let summary = jsonObject(output)
        let lost = summary["lost"] as? Int ?? 0
        #expect(lost >= forgotten)
        #expect(summary["tracked"] as? Int == 4 * (40 + 2))
        let missing = errors.split(separator: "\n").filter { $0.hasPrefix("missing ") }
        #expect(missing.count == min(10, lost))
        // DEVICE is a device number; LOG-ID names the install and the event's ordinal.
        for line in missing {
            let fields = line.split(separator: " ")
            #expect(fields.count == 3)
            #expect(Int(fields[1]).map { (0..<4).contains($0) } == true)
            #expect(fields[2].split(separator: "/").count == 2)
        }
    }

    // SPEC F2: against a server that is not an outbox-mock (nginx: no /_mock/stats), loss cannot be counted:
    // "lost": null and exit 2, whatever was delivered.
    @Test(.enabled(if: NginxServer.isAvailable)) func aServerThatIsNotAnOutboxMockGivesLostNullAndExit2() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let nginx = try NginxServer(); defer { nginx.stop() }
        let result = try runOutbox(["fleet", "--devices", "2", "--events", "5", "--endpoint", nginx.url(.http1),
                                    "--dir", dir.path + "/stores", "--timeout", "1"] + Self.fast, in: dir)
        #expect(result.status == 2, "stderr: \(result.errors)")
        let summary = jsonObject(result.output)
        #expect(Set(summary.keys) == Self.keys)
        #expect(summary["lost"] is NSNull)
        #expect(summary["delay_ms"] is NSNull)
        #expect(summary["tracked"] as? Int == 2 * (5 + 2))
        #expect(!result.errors.contains("missing "))
    }

    /// `outbox` with RLIMIT_NOFILE lowered to `descriptors` (soft and hard, so that the fleet cannot raise it).
    static func runLimited(to descriptors: Int, _ arguments: [String], in dir: TempDirectory) throws
        -> (status: Int32, output: String, errors: String) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "ulimit -n \(descriptors) && exec \"$0\" \"$@\" 2>\"$OUTBOX_ERR\"", builtProduct("outbox")] + arguments
        let errPath = dir.path + "/stderr-\(UUID().uuidString)"
        process.environment = ProcessInfo.processInfo.environment.merging(["OUTBOX_ERR": errPath]) { $1 }
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = readToEnd(out.fileHandleForReading)
        process.waitUntilExit()
        let errors = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        return (process.terminationStatus, String(decoding: data, as: UTF8.self), errors)
    }

    /// A number from the `fleet resources` notice line, e.g. `outbox.peak_open_devices=10`.
    static func resource(_ key: String, in errors: String) -> Double? {
        guard let range = errors.range(of: "outbox.\(key)=") else { return nil }
        return Double(errors[range.upperBound...].prefix { $0.isNumber || $0 == "." })
    }

    // SPEC F4: when not even one device per loop fits the descriptor limit, the fleet refuses before anything starts,
    // saying what it needs.
    @Test func aFleetBeyondTheDescriptorLimitIsRefusedSayingWhatItNeeds() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try Self.runLimited(to: 150, ["fleet", "--devices", "1000", "--events", "1", "--dir", dir.path + "/stores"], in: dir)
        #expect(result.status != 0)
        #expect(result.status < 128)
        #expect(result.errors.contains("file descriptors"), "stderr: \(result.errors)")
        #expect(result.errors.contains("RLIMIT_NOFILE"))
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/stores"))
    }

    // SPEC F4: with room for 10 devices at once, 30 devices still deliver everything: a device is opened when another
    // one tracked all its events and drained and was closed (idle stores hold no descriptor), never more than 10 are
    // open, and an open one holds at most 4 descriptors in its store directory (its database and WAL; the commit
    // mark and the WAL's write-back for a moment) — no -shm, no .lock held.
    @Test func devicesBeyondTheLimitWaitForIdleOnesToCloseAndEachHoldsAtMost4Descriptors() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        // In-process mock on N loops: 64 + N × (10 + 2 × 65) fixed descriptors, then 2 a device (Fleet.swift).
        let loops = min(30, ProcessInfo.processInfo.activeProcessorCount)
        let limit = 64 + loops * 140 + 10 * 2
        let result = try Self.runLimited(to: limit, ["fleet", "--devices", "30", "--events", "20", "--rate", "10",
                                                           "--dir", dir.path + "/stores", "--timeout", "120",
                                                           "--log-level", "notice"] + Self.fast, in: dir)
        #expect(result.status == 0, "stderr: \(result.errors)")
        let summary = jsonObject(result.output)
        // 20 events and the session's start and end per device (FleetSessions.swift).
        #expect(summary["tracked"] as? Int == 660)
        #expect(summary["delivered"] as? Int == 660)
        #expect(summary["lost"] as? Int == 0)
        #expect(result.errors.contains("at most 10 devices are open at once"), "stderr: \(result.errors)")
        let peakOpen = try #require(Self.resource("peak_open_devices", in: result.errors))
        #expect(peakOpen >= 1 && peakOpen <= 10, "stderr: \(result.errors)")
        let storeFDs = try #require(Self.resource("store_fds_per_device", in: result.errors))
        #expect(storeFDs > 0 && storeFDs <= 4, "stderr: \(result.errors)")
        // Every device ran and closed its store: no WAL is left beside any of them.
        let stores = try FileManager.default.contentsOfDirectory(atPath: dir.path + "/stores").filter { $0.hasPrefix("device-") }
        #expect(stores.count == 30)
        for store in stores {
            #expect(!FileManager.default.fileExists(atPath: dir.path + "/stores/\(store)/outbox.sqlite-shm"))
        }
    }

    // SPEC F1: bad values are usage errors naming the option.
    @Test(arguments: [
        (["--offline-fraction", "1.5"], "--offline-fraction"),
        (["--rate", "0"], "--rate"),
        (["--offline-s", "nan"], "--offline-s"),
        (["--endpoint", "ftp://x"], "--endpoint"),
        (["--metrics-port", "65536"], "--metrics-port"),
    ])
    func badFleetArgumentsNameTheOption(extra: [String], option: String) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runOutbox(["fleet", "--devices", "2", "--events", "1"] + extra, in: dir)
        #expect(result.status != 0)
        #expect(result.status < 128)
        #expect(result.errors.contains(option), "stderr: \(result.errors)")
    }
}

extension FleetEndToEndTests {
    // SPEC F5: the fleet sends the app secret it is given (flag, file or environment) instead of a fixed one, so it
    // runs against a server that checks it; the flag and the file form each deliver everything.
    @Test func aFleetWithTheServersAppSecretDeliversEverything() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        var configuration = MockServer.Configuration()
        configuration.appSecret = "s3cret"
        let server = try MockServer(configuration: configuration)
        try server.start()
        defer { try? server.stop() }
        let secretFile = dir.file("secret")
        try Data("s3cret\n".utf8).write(to: URL(fileURLWithPath: secretFile))
        for (index, form) in [["--app-secret", "s3cret"], ["--app-secret-file", secretFile]].enumerated() {
            let result = try runOutbox(["fleet", "--devices", "2", "--events", "5", "--endpoint", server.baseURL,
                                        "--dir", dir.path + "/stores-\(index)", "--timeout", "20"] + form + Self.fast, in: dir)
            #expect(result.status == 0, "\(form[0]): \(result.errors)")
            let summary = jsonObject(result.output)
            #expect(summary["lost"] as? Int == 0)
            #expect(summary["delivered"] as? Int == summary["tracked"] as? Int)
            #expect(!result.errors.contains("s3cret"), "the secret never appears in the fleet's output")
        }
        #expect(server.stats().statusCounts["401"] == nil)
    }

    // A fleet pointed at a port where nothing listens says so before it starts any device.
    @Test func aFleetAtADeadEndpointSaysSoAtOnce() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let started = Date()
        let result = try runOutbox(["fleet", "--devices", "2", "--events", "5", "--endpoint", "http://127.0.0.1:1",
                                    "--dir", dir.path + "/stores", "--timeout", "60"] + Self.fast, in: dir)
        #expect(result.status != 0)
        #expect(result.errors.contains("cannot reach --endpoint http://127.0.0.1:1"), "\(result.errors)")
        #expect(Date().timeIntervalSince(started) < 30, "not after the 60 s drain")
    }
}

extension FleetEndToEndTests {
    // SPEC F2a, D4: the fleet's accounting reads the destination's records: on each wire every log, the session logs
    // too, is found in /_mock/logs by its fields (on PostHog and Segment each device's session_start/Session Started
    // and its end by the session id its events carry, so a session log matched to no device would count as lost),
    // and nothing is lost.
    // Every destination and profile the engine speaks: a profile nobody iterated (RudderStack's `originalTimestamp`
    // and numeric `sessionId`) once went unread, and its fleets reported every log lost.
    static let everyWire: [([String], Int, Int)] = [
        (["appcenter"], 3, 10), (["otlp"], 4, 25), (["otlp", "--otlp-encoding", "json"], 3, 10),
        (["posthog"], 3, 10), (["segment"], 3, 10),
        (["segment", "--segment-profile", "rudderstack", "--write-key", "K"], 3, 10),
        (["amplitude"], 3, 10), (["mixpanel"], 3, 10),
        (["sensors"], 3, 10), (["ga4"], 3, 10)]

    // The fleet's line reader has a case per destination (the compiler sees to that); this sees that each is run.
    @Test func theFleetRunsCoverEveryDestination() {
        #expect(Set(Self.everyWire.map { $0.0[0] }) == Set(Destination.allCases.map(\.name)))
    }

    @Test(arguments: everyWire)
    func aFleetOnADestinationAccountsForEveryLogAndSession(destination: [String], devices: Int, events: Int) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runOutbox(["fleet", "--devices", "\(devices)", "--events", "\(events)", "--destination"]
                                   + destination + ["--dir", dir.path + "/stores", "--timeout", "20"] + Self.fast, in: dir)
        #expect(result.status == 0, "\(destination): \(result.errors)")
        let summary = jsonObject(result.output)
        #expect(summary["lost"] as? Int == 0)
        #expect(summary["tracked"] as? Int == devices * (events + 2))
        #expect(summary["delivered"] as? Int == summary["tracked"] as? Int)
    }
}

extension FleetEndToEndTests {
    // SPEC F1, F3: the live line, the report's samples and `duplicates` are read through the destination, like the
    // final accounting: on OTLP and PostHog under lost acknowledgements the samples end with everything delivered and
    // the re-sent logs the mock absorbed are counted (they were 0 whatever happened).
    @Test(arguments: ["otlp", "posthog"])
    func aFleetOnAnotherWireSamplesDeliveryAndCountsDuplicates(destination: String) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let report = dir.path + "/report"
        let result = try runOutbox(["fleet", "--devices", "3", "--events", "20", "--destination", destination,
                                    "--scenario", try MockServer.scenarioPath("lost-ack"), "--report", report,
                                    "--dir", dir.path + "/stores", "--timeout", "30"] + Self.fast, in: dir)
        #expect(result.status == 0, "\(destination): \(result.errors)")
        let summary = jsonObject(result.output)
        #expect(summary["lost"] as? Int == 0)
        #expect((summary["duplicates"] as? Int ?? 0) > 0, "\(destination): \(result.output)")
        let written = jsonObject(try String(contentsOfFile: report + "/summary.json", encoding: .utf8))
        let samples = try #require(written["samples"] as? [[Any]])
        #expect(samples.last?[2] as? Int == summary["tracked"] as? Int, "\(destination): \(samples.suffix(2))")
        #expect(result.errors.contains("delivered \(summary["tracked"] as? Int ?? -1)  pending 0"), "\(result.errors)")
    }

    // SPEC F9: a run whose logs are still pending at its end exits 1 and says why, though nothing is lost.
    @Test func aFleetWithLogsPendingAtItsEndExits1SayingWhy() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let scenario = dir.file("down.json")
        try Data(#"{"rules": [{"match": {}, "respond": {"status": 503}}]}"#.utf8).write(to: URL(fileURLWithPath: scenario))
        let result = try runOutbox(["fleet", "--devices", "2", "--events", "5", "--scenario", scenario,
                                    "--dir", dir.path + "/stores", "--timeout", "1"] + Self.fast, in: dir)
        let summary = jsonObject(result.output)
        #expect(summary["lost"] as? Int == 0)
        #expect((summary["pending"] as? Int ?? 0) > 0)
        #expect(result.status == 1, "\(result.errors)")
        #expect(result.errors.contains("still pending"), "\(result.errors)")
        #expect(result.errors.contains("devices: 2 "), "the devices' state is named: \(result.errors)")
    }

    // SPEC K2 for the fleet: the devices present a client certificate to an endpoint behind mutual TLS (nginx), and
    // deliver everything; without it nginx refuses them (403) and nothing is delivered.
    @Test(.enabled(if: NginxServer.isAvailable)) func aFleetDeliversBehindMutualTLSWithItsIdentity() throws {
        let nginx = try NginxServer(mutualTLS: true)
        defer { nginx.stop() }
        let dir = TempDirectory(); defer { dir.remove() }
        let endpoint = "https://127.0.0.1:\(nginx.mutualTLSPort ?? 0)"
        let identity = ["--ca-file", nginx.certificatePath, "--client-certificate", nginx.clientCertificatePath,
                        "--client-key", nginx.clientKeyPath, "--pinned-public-key", try nginx.publicKeyPin()]
        let report = dir.path + "/report"
        let result = try runOutbox(["fleet", "--devices", "2", "--events", "5", "--endpoint", endpoint, "--report", report,
                                    "--dir", dir.path + "/stores", "--timeout", "20"] + identity + Self.fast, in: dir)
        // Not an outbox-mock: loss is not counted (exit 2), but the stores say what was delivered.
        #expect(result.status == 2, "\(result.errors)")
        let summary = jsonObject(result.output)
        #expect(summary["delivered"] as? Int == 2 * (5 + 2), "\(result.output) \(result.errors)")
        #expect(summary["pending"] as? Int == 0)
        let refused = try runOutbox(["fleet", "--devices", "1", "--events", "2", "--endpoint", endpoint,
                                     "--ca-file", nginx.certificatePath, "--dir", dir.path + "/stores-2",
                                     "--timeout", "2"] + Self.fast, in: dir)
        #expect(jsonObject(refused.output)["delivered"] as? Int == 0)
        #expect(refused.status != 0)
    }

    // README's named scenarios, by name, in the fleet's in-process mock and in outbox-mock.
    @Test func aNamedScenarioIsFoundByName() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runOutbox(["fleet", "--devices", "2", "--events", "5", "--scenario", "ok",
                                    "--dir", dir.path + "/stores", "--timeout", "30"] + Self.fast, in: dir)
        #expect(result.status == 0, "\(result.errors)")
        // outbox-mock starts with it: it says where it listens (it exits at once, a usage error, when it cannot load it).
        let mock = ChildProcess()
        mock.executableURL = URL(fileURLWithPath: builtProduct("outbox-mock"))
        mock.arguments = ["--port", "0", "--host", "127.0.0.1", "--scenario", "flaky"]
        let pipe = Pipe()
        mock.standardOutput = pipe
        mock.standardError = FileHandle.nullDevice
        try mock.run()
        let firstLine = String(decoding: readAvailable(pipe.fileHandleForReading), as: UTF8.self)
        if mock.isRunning { mock.terminate() }
        mock.waitUntilExit()
        #expect(firstLine.hasPrefix("listening on "), "outbox-mock --scenario flaky: \(firstLine)")
        let unknown = try runOutbox(["fleet", "--devices", "1", "--events", "1", "--scenario", "no-such-scenario",
                                     "--dir", dir.path + "/stores-2"], in: dir)
        #expect(unknown.status != 0)
        #expect(unknown.errors.contains("flaky"), "the error lists the named scenarios: \(unknown.errors)")
    }
}

extension FleetEndToEndTests {
    // BEHAVIOUR D18, F2: a fleet with two destinations (`--to`, both on the run's mock, each on its vendor's route)
    // accounts each on its own — its records read with its wire's fields, its stores' own pending — and the counts
    // add both: every tracked log delivered to each, nothing lost or pending on either.
    @Test func aFleetWithTwoDestinationsAccountsEach() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let (devices, events) = (3, 10)
        let result = try runOutbox(["fleet", "--devices", "\(devices)", "--events", "\(events)",
                                    "--to", "ops=otlp", "--to", "product=posthog",
                                    "--dir", dir.path + "/stores", "--timeout", "20"] + Self.fast, in: dir)
        #expect(result.status == 0, "\(result.errors)")
        let summary = jsonObject(result.output)
        let tracked = devices * (events + 2)
        #expect(summary["tracked"] as? Int == tracked)
        #expect(summary["lost"] as? Int == 0 && summary["pending"] as? Int == 0)
        #expect(summary["delivered"] as? Int == 2 * tracked, "the counts add both destinations': \(result.output)")
        let each = try #require(summary["destinations"] as? [String: [String: Any]], "\(result.output)")
        #expect(Set(each.keys) == ["ops", "product"])
        for (name, wire) in [("ops", "otlp"), ("product", "posthog")] {
            #expect(each[name]?["destination"] as? String == wire)
            #expect(each[name]?["delivered"] as? Int == tracked, "\(name): \(result.output)")
            #expect(each[name]?["lost"] as? Int == 0 && each[name]?["pending"] as? Int == 0, "\(name): \(result.output)")
        }
    }

    // BEHAVIOUR D16, D18, F9: one destination that cannot deliver (nothing listens at its endpoint) leaves its logs
    // pending for it only — the other delivers everything — and the run exits 1 naming that destination.
    @Test func aDestinationThatCannotDeliverIsPendingForItAloneAndFailsTheRun() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let (devices, events) = (2, 5)
        let result = try runOutbox(["fleet", "--devices", "\(devices)", "--events", "\(events)",
                                    "--to", "ops=otlp", "--to", "product=posthog,endpoint=http://127.0.0.1:1",
                                    "--dir", dir.path + "/stores", "--timeout", "2"] + Self.fast, in: dir)
        #expect(result.status == 1, "\(result.errors)")
        let summary = jsonObject(result.output)
        let tracked = devices * (events + 2)
        let each = try #require(summary["destinations"] as? [String: [String: Any]], "\(result.output)")
        #expect(each["ops"]?["delivered"] as? Int == tracked && each["ops"]?["pending"] as? Int == 0, "\(result.output)")
        #expect(each["product"]?["delivered"] as? Int == 0 && each["product"]?["pending"] as? Int == tracked,
                "\(result.output)")
        #expect(each["ops"]?["lost"] as? Int == 0 && each["product"]?["lost"] as? Int == 0)
        #expect(summary["pending"] as? Int == tracked)
        #expect(result.errors.contains("\(tracked) logs still pending for product at the end"), "\(result.errors)")
        #expect(!result.errors.contains("pending for ops"), "\(result.errors)")
    }
}
