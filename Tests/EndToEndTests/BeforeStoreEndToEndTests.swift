import Foundation
import OutboxMock
import Testing
@testable import Outbox

/// Whether any file in `directory` (the store, its WAL and shared memory, its reserve) holds `needle`'s bytes: `strings`
/// over the store's files, as an attacker with the disk would run it.
private func filesContain(_ directory: TempDirectory, _ needle: String) -> Bool {
    let bytes = Data(needle.utf8)
    return directory.contents().contains { name in
        guard let data = FileManager.default.contents(atPath: directory.file(name)) else { return false }
        return data.range(of: bytes) != nil
    }
}

@Suite("The before-store hook end to end (SPEC H1)")
struct BeforeStoreEndToEndTests {
    // SPEC H1: on a plain store (no key), what the hook removes or drops is in none of the store's files — not the
    // store, not its WAL, not the dead letter the server's refusal made — while what it kept is (the scan finds what
    // is there); the server receives the hook's events and nothing it dropped.
    @Test func whatTheHookRemovesNeverReachesTheDisk() async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let server = try startMock("poison"); defer { try? server.stop() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: server.baseURL)
        configuration.sessionTracking = .manual
        configuration.beforeStore = { event in
            if event.name.hasPrefix("debug.") { return false }
            if event.name == "signup" { event.name = "sign_up" }
            event.properties["email"] = nil
            event.properties["card"] = nil
            return true
        }
        let engine = try OutboxEngine(configuration: configuration)
        var shutDown = false
        defer { if !shutDown { engine.shutdown() } }
        engine.setReachability(.offline)
        try engine.trackEvent("signup", properties: ["email": "h1-secret-email@example.com", "plan": "h1-kept-plan"])
        try engine.trackEvent("debug.trace", properties: ["token": "h1-dropped-token"], flags: .critical)
        try engine.trackEvent("poison", properties: ["card": "h1-secret-card", "note": "h1-kept-note"], flags: .critical)
        let timer = try engine.trackTimerStart("debug.timer")
        try engine.trackTimerEnd(timer, properties: ["where": "h1-dropped-timer"])
        await engine.persisted()
        // Stored, not yet sent: the WAL holds the fresh rows.
        #expect(filesContain(dir, "h1-kept-plan") && filesContain(dir, "sign_up"))
        for secret in ["h1-secret-email", "h1-dropped-token", "h1-secret-card", "h1-dropped-timer", "debug.trace"] {
            #expect(!filesContain(dir, secret), "\(secret) is on disk before delivery")
        }

        engine.setReachability(.online)
        #expect(await engine.waitUntilDelivered(timeout: .seconds(20)))
        let letters = try await engine.deadLetters()
        #expect(letters.count == 1)
        let status = try await engine.status()
        #expect(status.droppedByPolicy == 2)
        #expect(status.deadLettered == 1)
        let received = server.uniqueLogs()
        #expect(received.compactMap(\.name).sorted() == ["sign_up"])
        #expect(received.allSatisfy { !$0.json.contains("h1-secret") })
        engine.shutdown()
        shutDown = true

        // The dead letter (the poison event, kept for the host to see) is in the store without the removed card.
        #expect(filesContain(dir, "h1-kept-note"))
        for secret in ["h1-secret-email", "h1-dropped-token", "h1-secret-card", "h1-dropped-timer", "debug.trace"] {
            #expect(!filesContain(dir, secret), "\(secret) is on disk after delivery")
        }
    }
}
