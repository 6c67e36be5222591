import Foundation
import OutboxMock
import OutboxTestSupport
import Testing

/// `outbox fleet --metrics-port` and the devices' sessions, end to end (SPEC F1, F2, M9's text format).
@Suite("outbox fleet metrics and sessions (SPEC F1, F2)")
struct FleetMetricsEndToEndTests {
    /// A running `outbox fleet` with its stdout and stderr in files.
    final class RunningFleet {
        let process = ChildProcess()
        let outPath: String
        let errPath: String

        init(_ arguments: [String], in dir: TempDirectory) throws {
            outPath = dir.path + "/stdout"
            errPath = dir.path + "/stderr"
            _ = FileManager.default.createFile(atPath: outPath, contents: nil)
            _ = FileManager.default.createFile(atPath: errPath, contents: nil)
            process.executableURL = URL(fileURLWithPath: builtProduct("outbox"))
            process.arguments = ["fleet"] + arguments
            process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
            process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
            try process.run()
        }

        var output: String { (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "" }
        var errors: String { (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "" }

        /// The port of the `metrics on http://127.0.0.1:PORT/metrics` line. The process writes it once listening and
        /// has no other signal to wait on, so the file is watched.
        func metricsPort(timeout: TimeInterval = 60) -> Int? {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline && process.isRunning {
                if let line = errors.split(separator: "\n").first(where: { $0.hasPrefix("metrics on http://127.0.0.1:") }) {
                    return Int(line.split(separator: ":").last?.split(separator: "/").first ?? "")
                }
                usleep(10_000)
            }
            return nil
        }

        func kill() { if process.isRunning { process.terminate(); process.waitUntilExit() } }
    }

    /// `GET /metrics` over a plain socket (no HTTP client in swift-corelibs-foundation without FoundationNetworking):
    /// the status, the content type, and the `name{labels} value` lines by name with their labels. nil when nothing
    /// listens.
    static func scrape(port: Int) -> (status: Int, contentType: String, values: [String: Double])? {
        let request = Array("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        guard let answer = LoopbackHTTP.exchange(port: port, request: request) else { return nil }
        let text = String(decoding: answer, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { return nil }
        let head = text[..<split.lowerBound].split(separator: "\r\n")
        guard let statusLine = head.first, let status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") else { return nil }
        let contentType = head.first { $0.lowercased().hasPrefix("content-type:") }
            .map { String($0.dropFirst("content-type:".count)).trimmingCharacters(in: .whitespaces) } ?? ""
        return (status, contentType, values(String(text[split.upperBound...])))
    }

    /// Prometheus text: the value of each sample by its name with its labels.
    static func values(_ text: String) -> [String: Double] {
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = value
        }
        return values
    }

    /// Short intervals and quick retries.
    static let fast = ["--testing", "--interval", "0.1", "--retry-intervals", "0.1,0.2,0.4", "--batch-size", "10"]

    // SPEC F1 (--metrics-port), M9's format: while every request fails the scrape shows everything tracked and
    // nothing delivered; once the server accepts, the run ends with the same counts in its closing object, and every
    // scrape agreed with it (counters never above the end's).
    @Test func theFleetServesItsCountersWhileItRunsAndTheyAgreeWithTheClosingObject() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock(scenario: Scenario(seed: 1, rules: [.init(outcome: .respond(.init(status: 503)))]))
        defer { try? server.stop() }
        let fleet = try RunningFleet(["--devices", "3", "--events", "20", "--endpoint", server.baseURL, "--metrics-port", "0",
                                      "--dir", dir.path + "/stores", "--report", dir.path + "/report", "--timeout", "60"] + Self.fast,
                                     in: dir)
        defer { fleet.kill() }
        let port = try #require(fleet.metricsPort(), "stderr: \(fleet.errors)")

        // Every device tracks 20 events inside one session: 22 logs each (FleetSessions.swift). The scrapes are
        // watched until tracking ended and the 503s show: the fleet has nothing to wait on from outside.
        let tracked = 3 * 22.0
        var during: [String: Double] = [:]
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if let scrape = Self.scrape(port: port) {
                #expect(scrape.status == 200)
                #expect(scrape.contentType == "text/plain; version=0.0.4; charset=utf-8")
                during = scrape.values
                if during["outbox_fleet_tracked_total"] == tracked && (during[#"outbox_fleet_requests_total{status="503"}"#] ?? 0) > 0 {
                    break
                }
            }
            usleep(50_000)
        }
        #expect(during["outbox_fleet_devices"] == 3)
        #expect(during["outbox_fleet_tracked_total"] == tracked)
        #expect(during["outbox_fleet_delivered_total"] == 0)
        #expect(during["outbox_fleet_devices_done_tracking"] == 3)
        #expect(during["outbox_fleet_finished"] == 0)
        #expect((during[#"outbox_fleet_requests_total{status="503"}"#] ?? 0) > 0)
        // BEHAVIOUR O3: the engines' own metrics on the same path, summed over the three devices' engines.
        #expect(during[#"outbox_logs_total{outcome="tracked"}"#] == tracked)
        #expect((during[#"outbox_requests_total{destination="default",status="503"}"#] ?? 0) > 0)
        // Held between retries, the logs are leased (neither pending nor on the wire): the stores hold them.
        #expect((during["outbox_store_bytes"] ?? 0) > 0)

        // The server recovers; the fleet drains and ends. Scrapes go on until the port closes.
        server.setScenario(nil)
        var last: [String: Double] = during
        while fleet.process.isRunning {
            if let scrape = Self.scrape(port: port) {
                #expect((scrape.values["outbox_fleet_delivered_total"] ?? 0) >= (last["outbox_fleet_delivered_total"] ?? 0))
                last = scrape.values
            }
            usleep(20_000)
        }
        fleet.process.waitUntilExit()
        #expect(fleet.process.terminationStatus == 0, "stderr: \(fleet.errors)")
        let summary = jsonObject(fleet.output)
        #expect(summary["tracked"] as? Int == Int(tracked))
        #expect(summary["delivered"] as? Int == Int(tracked))
        #expect(summary["lost"] as? Int == 0)
        #expect(last["outbox_fleet_tracked_total"] == tracked)
        #expect((last["outbox_fleet_delivered_total"] ?? 0) <= tracked)
        // The scrape at the end (written beside summary.json, since a live one races the exit) shows exactly the
        // closing object's counts.
        let end = Self.values((try? String(contentsOfFile: dir.path + "/report/metrics.prom", encoding: .utf8)) ?? "")
        #expect(end["outbox_fleet_finished"] == 1)
        #expect(end["outbox_fleet_tracked_total"] == tracked)
        #expect(end["outbox_fleet_delivered_total"] == tracked)
        #expect(end["outbox_fleet_pending"] == 0)
        #expect(end["outbox_fleet_lost"] == 0)
        #expect(end["outbox_fleet_dead_lettered"] == 0)
        #expect(end["outbox_fleet_devices_done_tracking"] == 3)
        #expect(end["outbox_fleet_delivery_delay_ms_count"] == tracked)
        #expect(end[#"outbox_fleet_delivery_delay_ms_bucket{le="+Inf"}"#] == tracked)
        #expect((end[#"outbox_fleet_requests_total{status="503"}"#] ?? 0) >= (during[#"outbox_fleet_requests_total{status="503"}"#] ?? 0))
        // BEHAVIOUR O3: every device's deliveries add up to the closing object's; the gauges back to 0 once drained.
        #expect(end[#"outbox_logs_total{outcome="tracked"}"#] == tracked)
        #expect(end[#"outbox_logs_total{outcome="delivered",destination="default"}"#] == tracked)
        #expect(end[#"outbox_requests_total{destination="default",status="503"}"#] == end[#"outbox_fleet_requests_total{status="503"}"#])
        #expect(end[#"outbox_pending{priority="normal"}"#] == 0)
        #expect(end["outbox_store_bytes"] == 0)
        #expect(end[#"outbox_in_flight{destination="default"}"#] == 0)
        #expect((end[#"outbox_request_duration_seconds_count{destination="default"}"#] ?? 0) > 0)
        if last["outbox_fleet_finished"] == 1 { #expect(last == end) }
        // The port closed with the run.
        #expect(Self.scrape(port: port) == nil)
    }

    // SPEC F1: a --metrics-port that is taken fails the run before any device starts, naming the port, with exit 3.
    @Test func aMetricsPortInUseFailsTheRunNamingThePort() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let taken = try #require(URL(string: server.baseURL)?.port)
        let result = try runOutbox(["fleet", "--devices", "2", "--events", "1", "--endpoint", server.baseURL,
                                    "--metrics-port", String(taken), "--dir", dir.path + "/stores"], in: dir)
        #expect(result.status == 3, "stderr: \(result.errors)")
        #expect(result.errors.contains("--metrics-port"))
        #expect(result.errors.contains("127.0.0.1:\(taken)"))
        #expect(result.output.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/stores"))
        #expect(server.stats().requests == 0)
    }

    // SPEC F1 "its own sessions", A2, A3, F2: each device sends one startSession and one endSession log around its
    // events, in a session of its own; they count as tracked and delivered, and nothing is lost.
    @Test func eachDeviceSendsOneSessionAroundItsEventsAndTheAccountingAddsUp() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let result = try runOutbox(["fleet", "--devices", "4", "--events", "10", "--endpoint", server.baseURL,
                                    "--dir", dir.path + "/stores", "--timeout", "60"] + Self.fast, in: dir)
        #expect(result.status == 0, "stderr: \(result.errors)")
        let summary = jsonObject(result.output)
        #expect(summary["tracked"] as? Int == 4 * 12)
        #expect(summary["delivered"] as? Int == 4 * 12)
        #expect(summary["lost"] as? Int == 0)

        let logs = server.uniqueLogs()
        let starts = logs.filter { $0.type == .startSession }
        let ends = logs.filter { $0.type == .endSession }
        #expect(starts.count == 4)
        #expect(ends.count == 4)
        // One install per device, each with its own session: the start's install and sid are those of its events.
        #expect(Set(starts.map(\.install)).count == 4)
        for start in starts {
            let sid = Self.sid(start.json)
            #expect(sid != nil)
            let events = logs.filter { $0.type == .event && $0.install == start.install }
            #expect(events.count == 10)
            #expect(events.allSatisfy { Self.sid($0.json) == sid })
            #expect(ends.filter { Self.sid($0.json) == sid }.count == 1)
        }
    }

    static func sid(_ json: String) -> String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] else { return nil }
        return object["sid"] as? String
    }
}
