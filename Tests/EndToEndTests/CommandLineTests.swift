import Foundation
import OutboxMock
import OutboxTestSupport
import Testing

/// Runs a command to completion and returns its exit status and standard error.
private func runCapturingErrors(_ executable: String, _ arguments: [String]) throws -> (status: Int32, errors: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = FileHandle.nullDevice
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: builtProduct("outbox"))
        process.arguments = ["emit", "--store", dir.file(), "--count", "300", "--payload-bytes", "200",
                             "--endpoint", server.baseURL, "--app-secret", "k", "--compression", "zlib:9",
                             "--wait-delivered", "--timeout", "30"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
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
                                     "dead_letters", "enabled", "disabled_reason", "install_id"])
        #expect(object["pending_critical"] as? Int == 5)
        #expect((object["pending_normal"] as? Int ?? 0) >= 20)  // plus the session's own logs (SPEC A1)
        #expect(object["in_flight"] as? Int == 0)
        #expect(object["enabled"] as? Bool == true)
    }

    // SPEC X5: `outbox demo` run as a process delivers through its flaky scenario and reports lost 0.
    @Test func demoRunsToItsReport() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let result = try runOutbox(["demo", "--seconds", "3", "--rate", "100", "--directory", dir.path + "/demo"], in: dir)
        #expect(result.status == 0, "\(result.output)\n\(result.errors)")
        #expect(result.output.contains("lost"))
    }
}
