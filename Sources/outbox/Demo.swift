import ArgumentParser
import Foundation
import Outbox

/// SPEC X5 (first part): a simulated app tracks events into a fresh store while a live line shows progress.
/// Delivery to the in-process mock server joins it with the delivery issue.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the main job on embedded defaults (SPEC X5).")

    @Option(help: "Directory for the demo's store (default: a fresh temporary directory).") var directory: String?
    @Option(help: "Seconds the simulated app runs.") var seconds: Double = 5
    @Option(help: "Events per second the simulated app tracks.") var rate: Double = 2000

    func run() async throws {
        let dir = directory ?? NSTemporaryDirectory() + "outbox-demo-\(getpid())"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/demo.outbox"
        var configuration = Configuration(storePath: path)
        configuration.maxStorageSize = 4 * 1024 * 1024
        // Only the app's events go into the store (no startSession log, SPEC A2), so that the report adds up.
        configuration.sessionTracking = .manual
        let engine = try OutboxEngine(configuration: configuration)
        print("outbox demo: store \(path), install \(engine.installID.uuidString.lowercased())")
        let screens = ["home", "search", "product", "cart", "checkout"]
        let start = Date()
        var tracked = 0
        var rejected = 0
        var lastPrint = Date.distantPast
        while Date().timeIntervalSince(start) < seconds {
            let due = start.addingTimeInterval(Double(tracked + rejected) / rate)
            let wait = due.timeIntervalSinceNow
            if wait > 0 { try await Task.sleep(nanoseconds: UInt64(wait * 1e9)) }
            let n = tracked + rejected
            let isPurchase = n % 100 == 99
            do {
                try engine.trackEvent(isPurchase ? "purchase" : "Shop>View>\(screens[n % screens.count])",
                                      properties: ["i": .int(Int64(n)), "price": 9.99, "sku": .string("A-\(n % 37)")],
                                      flags: isPurchase ? .critical : .normal)
                tracked += 1
            } catch {
                rejected += 1
            }
            if Date().timeIntervalSince(lastPrint) > 0.25 {
                lastPrint = Date()
                let status = try await engine.status()
                let line = String(format: "\r%6.1fs  tracked %7d  stored %7d  pending %7d  evicted %5d  %@",
                                  Date().timeIntervalSince(start), tracked, status.stored,
                                  status.pendingNormal + status.pendingCritical, status.evicted,
                                  status.enabled ? "enabled" : "disabled")
                FileHandle.standardOutput.write(Data(line.utf8))
            }
        }
        await engine.persisted()
        let status = try await engine.status()
        engine.shutdown()
        let report = try StoreReport.read(path: path)
        print("\n\nreport")
        print("  tracked          \(tracked) (rejected \(rejected))")
        print("  stored           \(status.stored) (critical pending \(report.pendingCritical))")
        print("  evicted          \(status.evicted)")
        print("  pending on disk  \(report.pendingNormal + report.pendingCritical) in \(report.bytes) bytes")
        print("  lost             \(tracked - status.stored - status.evicted - status.rejected)")
        print("  delivery         not in this build yet: logs wait in the store for the delivery issue")
    }
}
