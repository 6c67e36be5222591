// The child of the crash tests (SPEC T5, S6, C9): tracks events in a loop until it is killed with SIGKILL.
// Usage: outbox-crash-child STORE RUN [KEYFILE MARKER]
// Every event carries `run` and its ordinal `i`; every 10th is critical. After each `persisted()` it prints
// "committed RUN N" (all ordinals < N are committed); before each such line it claims a batch, so that the
// store always holds in-flight rows when the kill comes.
// With KEYFILE (SPEC K1) the store is sealed under that key, and MARKER goes into the user id, the event names
// (20 of them) and a property of every event, so that the test can search the files for it.
@testable import Outbox
import Foundation

let arguments = CommandLine.arguments
guard arguments.count == 3 || arguments.count == 5, let run = Int64(arguments[2]) else {
    FileHandle.standardError.write(Data("usage: outbox-crash-child STORE RUN [KEYFILE MARKER]\n".utf8))
    exit(2)
}
let marker = arguments.count == 5 ? arguments[4] : nil
let engine: OutboxEngine
do {
    var configuration = Configuration(storePath: arguments[1])
    // Twenty runs accumulate ~45k logs: no eviction (SPEC S2) may blur what the crash test checks.
    configuration.maxStorageSize = 1 << 30
    if arguments.count == 5 { configuration.storeKey = try StoreKey(contentsOfFile: arguments[3]) }
    engine = try OutboxEngine(configuration: configuration)
    if let marker { try engine.setUserId("user-\(marker)") }
} catch {
    FileHandle.standardError.write(Data("outbox-crash-child: \(error)\n".utf8))
    exit(1)
}
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }  // unbuffered
say("ready")
var ordinal: Int64 = 0
while true {
    for _ in 0..<200 {
        let critical = ordinal % 10 == 9
        do {
            if let marker {
                try engine.trackEvent("\(marker)-name-\(ordinal % 20)",
                                      properties: ["run": .int(run), "i": .int(ordinal), "secret": .string("\(marker)-prop-\(ordinal)")],
                                      flags: critical ? .critical : .normal)
            } else {
                try engine.trackEvent(critical ? "crash-critical" : "crash", properties: ["run": .int(run), "i": .int(ordinal)],
                                      flags: critical ? .critical : .normal)
            }
        } catch {
            FileHandle.standardError.write(Data("outbox-crash-child: \(error)\n".utf8))
            exit(1)
        }
        ordinal += 1
    }
    await engine.persisted()
    _ = try? await engine.withStore { store in try store.claim(limit: 50, nowMs: Int64.max) }
    say("committed \(run) \(ordinal)")
}
