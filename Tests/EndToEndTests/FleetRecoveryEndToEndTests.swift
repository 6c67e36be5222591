import Foundation
import Testing

/// SPEC F9: recovery at fleet scale, on a small fleet through a short refusal (the 10 000-device run is in
/// BENCHMARKS.md).
@Suite("outbox fleet through an outage (SPEC F9)")
struct FleetRecoveryEndToEndTests {
    /// The probes' scale under `--testing` with sub-second retry intervals (RecoveryOptions): the shortest interval
    /// doubling up to the longest.
    static let retryIntervals = [0.5, 1.0, 2.0]
    static let fault = (from: 2.0, until: 6.0)

    /// `outbox fleet` at `rate` events/s per device while the in-process mock refuses connections over `fault` (seconds
    /// after the first event), with sub-second delivery settings and R9's probes on `retryIntervals`.
    static func pacedFleetThroughARefusal(_ fault: (from: Double, until: Double), devices: Int, events: Int, rate: Double,
                                          report: String, in dir: TempDirectory) throws -> (status: Int32, output: String, errors: String) {
        let scenario = dir.file("outage.json")
        let rule = #"{"match": {"after_s": \#(fault.from), "until_s": \#(fault.until)}, "action": "refuse"}"#
        try Data(#"{"rules": [\#(rule)]}"#.utf8).write(to: URL(fileURLWithPath: scenario))
        return try runOutbox(["fleet", "--devices", "\(devices)", "--events", "\(events)", "--rate", "\(rate)",
                              "--scenario", scenario, "--dir", dir.path + "/stores", "--report", report,
                              "--timeout", "60", "--testing", "--interval", "0.1", "--batch-size", "10",
                              "--retry-intervals", retryIntervals.map { "\($0)" }.joined(separator: ",")],
                             in: dir)
    }

    // SPEC F9, R9: 20 devices × 60 events at 5 per second (12 s) while the in-process mock refuses connections from
    // 2 s to 6 s after the first event. Nothing is lost or left pending; summary.json measures the fault from the
    // engines' own counters (a refused connection never reaches the mock): each device probes one request at a time
    // on R9's schedule; the backlog — what was tracked before the fault ended, not the 6 s of tracking after it —
    // arrives within seconds of the fault's end; the report shades the fault on its plots.
    @Test func aFleetThroughAShortOutageRecoversAndMeasuresIt() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let report = dir.path + "/report"
        let devices = 20
        let result = try Self.pacedFleetThroughARefusal(Self.fault, devices: devices, events: 60, rate: 5, report: report, in: dir)
        #expect(result.status == 0, "stderr: \(result.errors)")
        let summary = jsonObject(result.output)
        #expect(summary["lost"] as? Int == 0)
        #expect(summary["pending"] as? Int == 0)
        #expect(summary["delivered"] as? Int == devices * (60 + 2))

        let written = jsonObject(try String(contentsOfFile: report + "/summary.json", encoding: .utf8))
        let perDevicePerMinute = try #require(written["fault_requests_per_device_per_min"] as? Double, "\(written)")
        // R9: one request at a time while the fault holds — the (at most C3's three) requests in flight that met
        // it, then probes at intervals drawn between half and all of 0.5, 1, 2, 2 s: at most 5 in the fault's 4 s.
        // The counters are read once a second and the window's edges fall between two readings: one more.
        let minutes = (Self.fault.until - Self.fault.from) / 60
        #expect(perDevicePerMinute > 0, "the devices kept probing: \(written)")
        #expect(perDevicePerMinute <= (3 + 5 + 1) / minutes, "\(written)")
        let recovery = try #require(written["recovery_s"] as? Double, "\(written)")
        // The next probe comes at most 2 s after the fault's end, and the drain's interval is 0.1 s.
        #expect(recovery >= 0 && recovery <= 4, "\(written)")
        // BEHAVIOUR F9: a paced run opens every device before the first event, so the minute before the fault is the
        // whole fleet's.
        #expect(written["devices_open_at_first_event"] as? Int == devices, "\(written)")
        let steady = try #require(written["steady_rps"] as? Double, "\(written)")
        #expect(steady > 0)
        #expect((written["recovery_peak_rps"] as? Double ?? -1) >= 0, "\(written)")

        let html = try String(contentsOfFile: report + "/report.html", encoding: .utf8)
        #expect(html.contains("<rect class=\"fault\""), "the fault is shaded")
        #expect(html.contains("sent by devices"), "the devices' own request counts are plotted")
        #expect(html.contains("fault end → its backlog delivered"))
    }

    // BEHAVIOUR F9: a paced run opens every device before any tracks, however many walks the opening takes (16
    // devices a walk per loop): 400 devices on at most 2 loops need at least 13 walks, over which, without that, the
    // first devices would track while the others still waited to open.
    @Test func aPacedFleetOpensEveryDeviceBeforeTheFirstEvent() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let report = dir.path + "/report"
        let devices = 400
        let result = try Self.pacedFleetThroughARefusal((1, 2), devices: devices, events: 4, rate: 2, report: report, in: dir)
        #expect(result.status == 0, "stderr: \(result.errors)")
        #expect(jsonObject(result.output)["lost"] as? Int == 0)
        let written = jsonObject(try String(contentsOfFile: report + "/summary.json", encoding: .utf8))
        #expect(written["devices_open_at_first_event"] as? Int == devices)
    }

    // A run that ends inside its fault (the drains' --timeout passes while connections are refused) measures the
    // requests made during the fault so far, and no recovery: recovery_s and recovery_peak_rps are null; it exits 1,
    // its logs pending.
    @Test func aRunEndingInsideTheFaultHasNoRecoveryFigures() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let scenario = dir.file("down.json")
        try Data(#"{"rules": [{"match": {"after_s": 0, "until_s": 600}, "action": "refuse"}]}"#.utf8)
            .write(to: URL(fileURLWithPath: scenario))
        let report = dir.path + "/report"
        let result = try runOutbox(["fleet", "--devices", "2", "--events", "5", "--scenario", scenario, "--report", report,
                                    "--dir", dir.path + "/stores", "--timeout", "2"] + FleetEndToEndTests.fast, in: dir)
        #expect(result.status == 1, "stderr: \(result.errors)")
        #expect((jsonObject(result.output)["pending"] as? Int ?? 0) > 0)
        let written = jsonObject(try String(contentsOfFile: report + "/summary.json", encoding: .utf8))
        #expect((written["fault_requests_per_device_per_min"] as? Double ?? -1) > 0, "\(written)")
        #expect(written["recovery_s"] is NSNull, "\(written)")
        #expect(written["recovery_peak_rps"] is NSNull, "\(written)")
    }

    // Without a fault window the recovery figures are null, and nothing is shaded.
    @Test func aRunWithoutAFaultHasNullRecoveryFigures() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let report = dir.path + "/report"
        let result = try runOutbox(["fleet", "--devices", "2", "--events", "5", "--scenario", "ok", "--report", report,
                                    "--dir", dir.path + "/stores", "--timeout", "30"] + FleetEndToEndTests.fast, in: dir)
        #expect(result.status == 0, "stderr: \(result.errors)")
        let written = jsonObject(try String(contentsOfFile: report + "/summary.json", encoding: .utf8))
        for key in ["fault_requests_per_device_per_min", "recovery_s", "recovery_peak_rps", "steady_rps",
                    "devices_open_at_first_event"] {
            #expect(written.keys.contains(key) && written[key] is NSNull, "\(key): \(written)")
        }
        let html = try String(contentsOfFile: report + "/report.html", encoding: .utf8)
        #expect(!html.contains("class=\"fault\""))
    }
}
