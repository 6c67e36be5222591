import Foundation
import OutboxTestSupport
import Testing
@testable import Outbox

/// A writer process killed with SIGKILL in the middle of its work: nothing it committed is lost.
/// The child is this test binary again, running only `crashChildWriter` (enabled by an environment variable).
struct LogStoreCrashTests {
    static let childStoreKey = "OUTBOX_CRASH_CHILD_STORE"

    // SPEC T5, S6, C9: a killed process loses no committed log, its in-flight rows come back pending, and its
    // lock dies with it.
    @Test func killedWriterLosesNoCommittedLog() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let path = dir.file("store.sqlite")
        let child = ChildProcess()
        child.executableURL = URL(fileURLWithPath: "/proc/self/exe")
        child.arguments = ["--testing-library", "swift-testing", "--filter", "crashChildWriter"]
        var environment = ProcessInfo.processInfo.environment
        environment[Self.childStoreKey] = path
        child.environment = environment
        let output = Pipe()
        child.standardOutput = output
        child.standardError = FileHandle.nullDevice
        try child.run()
        defer { if child.isRunning { kill(child.processIdentifier, SIGKILL) } }

        // Read progress lines until enough is committed; no sleeping, the child reports each commit.
        var committed = 0
        var buffer = ""
        while committed < 5_000 {
            let data = output.fileHandleForReading.availableData
            guard !data.isEmpty else { break }
            buffer += String(decoding: data, as: UTF8.self)
            while let newline = buffer.firstIndex(of: "\n") {
                let line = buffer[..<newline]
                if line.hasPrefix("committed "), let value = Int(line.dropFirst("committed ".count)) {
                    committed = value
                }
                buffer = String(buffer[buffer.index(after: newline)...])
            }
        }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        #expect(committed >= 5_000, "the child stopped early")

        let store = try Fixture.open(path)
        defer { store.close() }
        let ordinals = Set(try store.allLogs().map(Fixture.ordinal))
        #expect((0..<committed).allSatisfy { ordinals.contains($0) })
        #expect(try store.counts().inFlight == 0)
        #expect(try store.claim(limit: 10, nowMs: 0)?.logs.map(Fixture.ordinal) == Array(0..<10))
    }

    /// The child's work: appends groups of 100 and claims a batch now and then, reporting every commit.
    @Test(.enabled(if: ProcessInfo.processInfo.environment[childStoreKey] != nil))
    func crashChildWriter() throws {
        let path = try #require(ProcessInfo.processInfo.environment[Self.childStoreKey])
        let store = try Fixture.open(path)
        let parent = getppid()
        var next = 0
        // Bounded, and ends when the parent test process is gone, so an orphan never spins on.
        while next < 2_000_000 && getppid() == parent {
            let result = try store.append((next..<next + 100).map { Fixture.log($0, payloadBytes: 200) })
            #expect(result.stored == 100)
            next += 100
            if next % 1000 == 0 { _ = try store.claim(limit: 50, nowMs: 0) }
            FileHandle.standardOutput.write(Data("committed \(next)\n".utf8))
        }
    }
}
