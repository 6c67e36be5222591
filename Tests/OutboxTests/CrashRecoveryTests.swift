import Foundation
import Logging
import OutboxTestSupport
import Testing
@testable import Outbox

@Suite("Crash recovery (SPEC T5, S6, C9)", .serialized)
struct CrashRecoveryTests {
    /// A child tracks events (every 10th critical) and claims batches; it is killed with SIGKILL at a random
    /// moment, 20 times over the same store. After each kill the store must hold every committed log exactly
    /// once, in a gap-free ascending sequence, with no row left in flight.
    @Test func killingTheWriterAtRandomMomentsLosesNoCommittedLog() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let store = dir.file()
        let child = builtProduct("outbox-crash-child")
        try #require(FileManager.default.isExecutableFile(atPath: child), "build the package first: \(child)")
        var random = SystemRandomNumberGenerator()
        for run in 1...20 {
            let process = ChildProcess()
            process.executableURL = URL(fileURLWithPath: child)
            process.arguments = [store, String(run)]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let reader = LineReader(output.fileHandleForReading)
            #expect(reader.next() == "ready")
            // A random moment: after a random number of commits, then a random extra delay inside a commit window.
            let commitsBeforeKill = Int.random(in: 1...15, using: &random)
            var committed = 0
            var lines = 0
            while lines < commitsBeforeKill, let line = reader.next() {
                let parts = line.split(separator: " ")
                if parts.count == 3, parts[0] == "committed", let count = Int(parts[2]) { committed = count }
                lines += 1
            }
            usleep(UInt32.random(in: 0...20_000, using: &random))
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            #expect(process.terminationReason == .uncaughtSignal)
            // Read without recovering: the child had claimed batches, so rows were in flight when it died.
            #expect(try StoreReport.read(path: store).inFlight > 0, "run \(run): the child claimed no batch")

            // The child's cap: with the default 10 MiB, opening would evict the oldest pending logs of a store
            // grown past it (S2 at open) and show their sequence numbers as gaps.
            let logStore = try LogStore(path: store, limits: StoreLimits(maxStorageSize: 1 << 30), clock: SystemClock(),
                                        logger: Logger(label: "test"))
            defer { logStore.close() }
            let counts = try logStore.counts()
            #expect(counts.inFlight == 0, "run \(run): in-flight rows must return to pending at open")
            let logs = try logStore.allLogs()
            let seqs = logs.map(\.seq)
            let firstGap = zip(seqs, seqs.dropFirst()).first { $0.1 != $0.0 + 1 }
            #expect(firstGap == nil, "run \(run): sequence gap after \(String(describing: firstGap))")
            #expect(Set(logs.map(\.id)).count == logs.count, "run \(run): duplicate id")
            let ordinals = logs.map { properties(of: $0) }.filter { ($0["run"] as? Int) == run }.compactMap { $0["i"] as? Int }
            let misplaced = ordinals.enumerated().first { $0.offset != $0.element }
            #expect(misplaced == nil, "run \(run): stored ordinals are not a gap-free prefix: \(String(describing: misplaced))")
            #expect(ordinals.count >= committed, "run \(run): lost committed logs (\(ordinals.count) < \(committed))")
        }
    }
}
