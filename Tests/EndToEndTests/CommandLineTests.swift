import Foundation
import Outbox
import OutboxMock
import OutboxTestSupport
import Testing

/// Runs a command to completion and returns its exit status and standard error; `environment`, when given, is the
/// command's whole environment.
func runCapturingErrors(_ executable: String, _ arguments: [String],
                        environment: [String: String]? = nil) throws -> (status: Int32, errors: String) {
    let process = ChildProcess()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let pipe = Pipe()
    process.standardOutput = FileHandle.nullDevice
    process.standardError = pipe
    try process.run()
    let data = readToEnd(pipe.fileHandleForReading)
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// The real `outbox` binary with bad arguments (SPEC X3): a non-zero exit and a message that names the option,
/// never a trap; and nothing written to the store.
@Suite("Command line arguments (SPEC X3)")
struct CommandLineTests {
    @Test(arguments: [
        (["--timeout", "inf", "--endpoint", "http://127.0.0.1:9", "--app-secret", "k", "--wait-delivered"], "--timeout"),
        (["--timeout", "nan", "--endpoint", "http://127.0.0.1:9", "--app-secret", "k", "--wait-delivered"], "--timeout"),
        (["--interval", "1e30"], "--interval"),
        (["--interval", "-5"], "--interval"),
        (["--retry-intervals", "10,1e30"], "--retry-intervals"),
        (["--retry-intervals", "10,x"], "--retry-intervals"),
        (["--compression", "zlib:0"], "--compression"),
        (["--compression", "lz4"], "--compression"),
        (["--count", "-1"], "--count"),
        (["--wait-delivered"], "--wait-delivered"),
        (["--testing-clock-offset-file", "/nonexistent/outbox-clock-offset"], "--testing-clock-offset-file"),
        // SPEC X3a: an empty item is an error, not skipped; an endpoint must be an absolute http(s) URL with a host.
        (["--retry-intervals", "1,,2"], "--retry-intervals"),
        (["--retry-intervals", "10,"], "--retry-intervals"),
        (["--endpoint", "http://", "--app-secret", "k"], "--endpoint"),
        (["--endpoint", "http://exa mple.com", "--app-secret", "k"], "--endpoint"),
        (["--batch-size", "501"], "--batch-size"),
        (["--max-storage-bytes", "1000"], "--max-storage-bytes"),
        // SPEC D1: an unknown destination, a header without a colon or with a reserved name: refused by the flag.
        (["--destination", "kafka"], "--destination: unknown destination 'kafka': the destinations are appcenter, otlp"),
        (["--header", "NoColonHere"], "--header: a header has no colon"),
        (["--header", "Content-Type: text/plain"], "--header: header Content-Type is set by the engine"),
        // SPEC D1: a header the destination's wire sets itself, in any case, is refused for that destination.
        (["--destination", "segment", "--write-key", "wk", "--endpoint", "http://127.0.0.1:9", "--header", "authorization: Basic x"],
         "header authorization is set by the segment destination"),
        (["--endpoint", "http://127.0.0.1:9", "--app-secret", "k", "--header", "APP-SECRET: y"],
         "header APP-SECRET is set by the appcenter destination"),
        (["--header-file", "/nonexistent/headers"], "--header-file: cannot read /nonexistent/headers"),
    ])
    func badEmitArgumentsExitNonZeroNamingTheOption(extra: [String], option: String) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runCapturingErrors(builtProduct("outbox"), ["emit", "--store", dir.file(), "--count", "1"] + extra)
        #expect(result.status != 0)
        #expect(result.status < 128, "killed by a signal: \(result.errors)")
        #expect(result.errors.contains(option), "message: \(result.errors)")
        #expect(!FileManager.default.fileExists(atPath: dir.file()))
    }
}

extension CommandLineTests {
    // SPEC X3, W1: `--compression zlib:9` reaches the engine; the mock inflates every body and stores every log.
    @Test func emitWithZlibCompressionDeliversEverything() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: builtProduct("outbox"))
        process.arguments = ["emit", "--store", dir.file(), "--count", "300", "--payload-bytes", "200",
                             "--endpoint", server.baseURL, "--app-secret", "k", "--compression", "zlib:9",
                             "--wait-delivered", "--timeout", "30"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: readToEnd(pipe.fileHandleForReading), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "output: \(output)")
        #expect(output.contains(#""delivered":300"#))
        #expect(server.stats().logsUnique == 300)
    }
}

extension CommandLineTests {
    // SPEC X4: `outbox status` run as a process prints the store's counts as JSON with exactly X4's keys.
    @Test func statusPrintsTheStoresCounts() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let emitted = try runOutbox(["emit", "--store", dir.file(), "--count", "25", "--critical-every", "5"], in: dir)
        #expect(emitted.status == 0, "\(emitted.errors)")
        let result = try runOutbox(["status", "--store", dir.file()], in: dir)
        #expect(result.status == 0, "\(result.errors)")
        let object = try #require(jsonLines(result.output).first)
        #expect(Set(object.keys) == ["pending_normal", "pending_critical", "in_flight", "bytes", "oldest_age_s",
                                     "dead_letters", "enabled", "disabled_reason", "install_id",
                                     "destination", "server_rejected", "rotating_store_key", "sending"])  // SPEC X4, D1, K1
        #expect(object["rotating_store_key"] as? Bool == false)
        #expect(object["destination"] is NSNull, "nothing was sent")
        #expect(object["server_rejected"] as? Int == 0)
        #expect(object["pending_critical"] as? Int == 5)
        #expect((object["pending_normal"] as? Int ?? 0) >= 20)  // plus the session's own logs (SPEC A1)
        #expect(object["in_flight"] as? Int == 0)
        #expect(object["enabled"] as? Bool == true)
        #expect(object["sending"] as? String == "on")
    }

    // SPEC X5: `outbox demo` run as a process delivers through its flaky scenario and reports lost 0.
    @Test func demoRunsToItsReport() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runOutbox(["demo", "--seconds", "3", "--rate", "100", "--directory", dir.path + "/demo"], in: dir)
        #expect(result.status == 0, "\(result.output)\n\(result.errors)")
        #expect(result.output.contains("lost"))
    }
}

/// SPEC X3a: the command line checks its flags in their own units against the library's bounds, and says so.
extension CommandLineTests {
    @Test func aFlagOutOfBoundsIsNamedInItsOwnUnitWithWhatTestingLowers() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runCapturingErrors(builtProduct("outbox"), ["emit", "--store", dir.file(), "--count", "1", "--interval", "1"])
        #expect(result.status != 0)
        #expect(result.errors.contains("--interval must be between 6 and 86400 s, got 1 s"), "\(result.errors)")
        #expect(result.errors.contains("--testing lowers the minimum to 0.001 s"), "\(result.errors)")
        #expect(!result.errors.contains("transmissionInterval"))
        let testing = try runCapturingErrors(builtProduct("outbox"), ["emit", "--store", dir.file(), "--count", "0",
                                                                      "--interval", "1", "--testing"])
        #expect(testing.status == 0, "\(testing.errors)")
    }

    // Every flag that sets a bounded field takes exactly the field's bounds: just below the minimum (or above the
    // maximum) is refused naming the flag, the minimum and the maximum are accepted.
    @Test(arguments: [
        ("--interval", BoundedField.transmissionInterval, 1000.0),
        ("--retry-intervals", BoundedField.retryIntervals, 1000.0),
        ("--batch-size", BoundedField.batchSize, 1.0),
        ("--max-storage-bytes", BoundedField.maxStorageSize, 1.0),
    ])
    func everyBoundedFlagTakesItsFieldsBounds(flag: String, field: BoundedField, scale: Double) throws {
        let dir = TempDirectory(); defer { dir.remove() }
        func run(_ value: Double) throws -> (status: Int32, errors: String) {
            let text = value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
            return try runCapturingErrors(builtProduct("outbox"), ["emit", "--store", dir.file(), "--count", "0", flag, text])
        }
        let range = field.range(testing: false)
        let step = scale == 1 ? 1.0 : 0.001
        let minimum = Double(range.lowerBound) / scale, maximum = Double(range.upperBound) / scale
        for accepted in [minimum, maximum] {
            let result = try run(accepted)
            #expect(result.status == 0, "\(flag) \(accepted): \(result.errors)")
        }
        for refused in [minimum - step, maximum + step] {
            let result = try run(refused)
            #expect(result.status != 0, "\(flag) \(refused) was accepted")
            #expect(result.errors.contains(flag), "\(result.errors)")
        }
    }

    // SPEC X3a: `--wait-delivered` exits 1 when logs are still pending at the timeout (the JSON is printed all the
    // same), and 0 when nothing is pending even though the server refused every log (dead-lettered, counted).
    @Test func waitDeliveredFailsWhileLogsArePendingAndNotForDeadLetters() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let down = try startMock(scenario: try Scenario.decode(from: Data(#"{"rules": [{"match": {}, "respond": {"status": 503}}]}"#.utf8)))
        defer { try? down.stop() }
        let pending = try runOutbox(["emit", "--store", dir.file("down.outbox"), "--count", "5", "--endpoint", down.baseURL,
                                     "--app-secret", "k", "--wait-delivered", "--timeout", "1"], in: dir)
        #expect(pending.status == 1, "\(pending.errors)")
        let stuck = try #require(jsonLines(pending.output).first)
        #expect(stuck["pending"] as? Int == 5)
        #expect(pending.errors.contains("still pending"))

        let refusing = try startMock(scenario: try Scenario.decode(from: Data(#"{"rules": [{"match": {}, "respond": {"status": 400}}]}"#.utf8)))
        defer { try? refusing.stop() }
        let settled = try runOutbox(["emit", "--store", dir.file("refused.outbox"), "--count", "5", "--endpoint", refusing.baseURL,
                                     "--app-secret", "k", "--wait-delivered", "--timeout", "20"], in: dir)
        #expect(settled.status == 0, "\(settled.errors)")
        let object = try #require(jsonLines(settled.output).first)
        #expect(object["pending"] as? Int == 0)
        #expect(object["dead_lettered"] as? Int == 5)
    }
}

extension CommandLineTests {
    // SPEC S7 from the command line, as a new user met it: a mistyped --store naming a text file is refused with the
    // path named, the file left byte for byte, nothing created beside it, and the exit is not 0.
    @Test func emitRefusesATextFileAsTheStoreAndLeavesItUntouched() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let notes = dir.file("notes.txt")
        let text = Data("remember the milk\n".utf8)
        try text.write(to: URL(fileURLWithPath: notes))
        let result = try runCapturingErrors(builtProduct("outbox"), ["emit", "--store", notes, "--count", "1"])
        #expect(result.status != 0)
        #expect(result.errors.contains("\(notes) is not an Outbox store"), "\(result.errors)")
        #expect(FileManager.default.contents(atPath: notes) == text)
        #expect(dir.contents() == ["notes.txt"])
    }
}

extension CommandLineTests {
    // SPEC R1, R8, X3a: once the server refused the client (401) sending has stopped until an update, so
    // `emit --wait-delivered` exits 1 at once with the reason instead of idling to its --timeout; `status` then says
    // the install is opted in but its sending stopped.
    @Test func waitDeliveredExitsAtOnceWhenSendingStoppedForGood() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("unauthorized"); defer { try? server.stop() }
        let started = Date()
        let result = try runOutbox(["emit", "--store", dir.file(), "--count", "5", "--endpoint", server.baseURL,
                                    "--app-secret", "k", "--wait-delivered", "--timeout", "60"], in: dir)
        #expect(result.status == 1, "\(result.errors)")
        #expect(Date().timeIntervalSince(started) < 20, "not after the 60 s timeout")
        #expect(result.errors.contains("401"), "\(result.errors)")
        let status = try #require(jsonLines(try runOutbox(["status", "--store", dir.file()], in: dir).output).first)
        #expect(status["enabled"] as? Bool == true)
        #expect(status["sending"] as? String == "stopped")
        #expect((status["disabled_reason"] as? String)?.contains("401") == true)
    }

    // docs/CLI.md: `status` and `dead-letters` read a store read-only, also on a read-only file system (a tmpfs
    // remounted read-only after the store was written).
    @Test func statusAndDeadLettersReadAStoreOnAReadOnlyFileSystem() throws {
        guard let disk = SmallDisk.mount(megabytes: 8) else { return }
        defer { disk.unmount() }
        let dir = TempDirectory(); defer { dir.remove() }
        let refusing = try startMock(scenario: try Scenario.decode(from: Data(#"{"rules": [{"match": {}, "respond": {"status": 400}}]}"#.utf8)))
        defer { try? refusing.stop() }
        let emitted = try runOutbox(["emit", "--store", disk.store, "--count", "3", "--endpoint", refusing.baseURL,
                                     "--app-secret", "k", "--wait-delivered", "--timeout", "20"], in: dir)
        #expect(emitted.status == 0, "\(emitted.errors)")
        let more = try runOutbox(["emit", "--store", disk.store, "--count", "4"], in: dir)
        #expect(more.status == 0, "\(more.errors)")
        let remount = try run("/usr/bin/mount", ["-o", "remount,ro", disk.path])
        #expect(remount.status == 0, "\(remount.output)")
        let status = try runOutbox(["status", "--store", disk.store], in: dir)
        #expect(status.status == 0, "\(status.errors)")
        let object = try #require(jsonLines(status.output).first)
        #expect(object["dead_letters"] as? Int == 3)
        #expect(object["pending_normal"] as? Int == 4)
        let letters = try runOutbox(["dead-letters", "--store", disk.store], in: dir)
        #expect(letters.status == 0, "\(letters.errors)")
        #expect(jsonLines(letters.output).count == 3)
    }

    // SPEC D4: OTLP's `service.name` is the app's namespace; `--app-namespace`, `--app-version` and `--app-build` set
    // it and the app's identity from `emit` and `fleet` (every CLI run reported `outbox`).
    @Test func emitAndFleetSetTheAppsNamespaceVersionAndBuild() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("ok"); defer { try? server.stop() }
        let identity = ["--app-namespace", "com.example.shop", "--app-version", "4.2.0", "--app-build", "421"]
        let emitted = try runOutbox(["emit", "--store", dir.file(), "--count", "2", "--destination", "otlp",
                                     "--endpoint", server.baseURL, "--wait-delivered", "--timeout", "20"] + identity, in: dir)
        #expect(emitted.status == 0, "\(emitted.errors)")
        let fleet = try runOutbox(["fleet", "--devices", "1", "--events", "2", "--destination", "otlp",
                                   "--endpoint", server.baseURL, "--dir", dir.path + "/stores", "--timeout", "20"]
                                  + identity, in: dir)
        #expect(fleet.status == 0, "\(fleet.errors)")
        let events = server.vendorEvents().filter { $0.vendor == .otlp }
        #expect(events.count == 2 + 1 * (2 + 2))
        for event in events {
            #expect(event.json.contains(#"{"key":"service.name","value":{"stringValue":"com.example.shop"}}"#), "\(event.json)")
            #expect(event.json.contains(#""stringValue":"4.2.0""#))
        }
    }
}

/// SPEC D1: the command line's checks come from each destination's spec: over every destination, its credential is
/// required by name, and every field another destination owns is refused by its flag.
@Suite("Command line per destination (SPEC D1)")
struct CommandLineDestinationTests {
    /// A flag and a value for each destination field the command line sets, by its `Configuration.schema` name. App
    /// Center's `--app-secret` belongs to `emit` and `fleet` and is accepted with any destination.
    static let flags: [String: [String]] = [
        "otlpEncoding": ["--otlp-encoding", "json"], "apiKey": ["--api-key", "k"], "writeKey": ["--write-key", "k"],
        "segmentProfile": ["--segment-profile", "rudderstack"],
        "projectToken": ["--project-token-file", "/nonexistent/token"], "serviceAccountUser": ["--service-account-user", "u"],
        "serviceAccountSecret": ["--service-account-secret-file", "/nonexistent/secret"], "projectId": ["--project-id", "1"],
        "measurementId": ["--measurement-id", "G-ABC123"], "apiSecret": ["--api-secret-file", "/dev/null"],
    ]

    // A field a new wire adds without a flag here would go untested: this fails first.
    @Test func everyDestinationFieldHasAFlagHere() {
        let fields = Set(Destination.allCases.flatMap(\.spec.fields)).subtracting(["appSecret"])
        #expect(fields == Set(Self.flags.keys))
    }

    private func emit(_ extra: [String]) throws -> (status: Int32, errors: String) {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runCapturingErrors(builtProduct("outbox"), ["emit", "--store", dir.file(), "--count", "1",
                                                                     "--endpoint", "http://127.0.0.1:9"] + extra)
        #expect(!FileManager.default.fileExists(atPath: dir.file()), "a refused command wrote the store")
        return result
    }

    @Test(arguments: Destination.allCases)
    func aDestinationWithoutItsCredentialIsRefusedNamingIt(destination: Destination) throws {
        guard let credential = destination.spec.credential else { return }  // OTLP: credentials go in headers
        let flag = credential.field == "appSecret" ? "--app-secret" : Self.flags[credential.field]?[0] ?? "?"
        let result = try emit(["--destination", destination.name])
        #expect(result.status != 0 && result.status < 128, "\(destination): \(result.errors)")
        #expect(result.errors.contains(flag), "\(destination): \(result.errors)")
    }

    @Test(arguments: Destination.allCases)
    func anotherDestinationsFieldIsRefusedByItsFlag(destination: Destination) throws {
        for other in Destination.allCases where other != destination {
            // A field both own (`apiKey`: PostHog's and Amplitude's) is this destination's too.
            for field in other.spec.fields where field != "appSecret" && !destination.spec.fields.contains(field) {
                guard let flag = Self.flags[field] else { continue }
                let result = try emit(["--destination", destination.name] + flag)
                #expect(result.status != 0 && result.status < 128, "\(flag[0]) with \(destination): \(result.errors)")
                #expect(result.errors.contains("\(flag[0])") && result.errors.contains("--destination \(other)"),
                        "\(flag[0]) with \(destination): \(result.errors)")
            }
        }
    }
}
