import Foundation
import Outbox
import OutboxTestSupport
import Testing

/// SPEC K2 end to end: the real engine (curl underneath) against a real nginx that demands a client certificate, or
/// whose key a pin names; what the engine does when its identity is refused or the pin does not match, and `update`.
@Suite("TLS identity and pinning (SPEC K2)", .enabled(if: NginxServer.isAvailable, "nginx is not installed: `make deps` installs it"))
struct TLSIdentityTests {
    /// Waits until `condition` holds of the engine's status, at most 120 s. A status read while the test's task could
    /// not run (the whole suite keeps the cooperative threads busy for long stretches) is stale by the time it is seen:
    /// the one that decides at the deadline is read after it.
    static func status(_ engine: OutboxEngine, until condition: (EngineStatus) -> Bool) async throws -> EngineStatus {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            let status = try await engine.status()
            if condition(status) { return status }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await engine.status()
    }

    // SPEC K2: without a client certificate nginx answers 403: sending stops with the reason, the logs stay, nothing is
    // dead-lettered; `update` with the certificate and key resumes and delivers them.
    @Test func aRefusedHostStopsAndResumesWithItsCertificate() async throws {
        let nginx = try NginxServer(mutualTLS: true)
        defer { nginx.stop() }
        let dir = TempDirectory(); defer { dir.remove() }
        var configuration = fastConfiguration(store: dir.file(), endpoint: "https://127.0.0.1:\(nginx.mutualTLSPort ?? 0)")
        configuration.caFile = nginx.certificatePath
        let engine = try OutboxEngine(configuration: configuration)
        for index in 0..<20 { try engine.trackEvent("mtls-\(index)") }
        let refused = try await Self.status(engine) { $0.disabledReason != nil }
        #expect(refused.disabledReason?.contains("403") == true, "\(refused.disabledReason ?? "no reason")")
        #expect(refused.deadLetters == 0 && refused.pendingNormal + refused.inFlight == 20)
        try engine.update {
            $0.clientCertificate = nginx.clientCertificatePath
            $0.clientKey = nginx.clientKeyPath
        }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(120)))
        let delivered = try await engine.status()
        #expect(delivered.delivered == 20 && delivered.disabledReason == nil && delivered.deadLetters == 0)
        await engine.shutdown(drainFor: .seconds(1))
    }

    // SPEC K2: a pin that matches no key of the server stops sending with curl's reason (error 90), the logs stay;
    // `update` with the server's pin resumes. The right pin among others delivers from the start.
    @Test func aPinMismatchStopsAndTheRightPinResumes() async throws {
        let nginx = try NginxServer()
        defer { nginx.stop() }
        let dir = TempDirectory(); defer { dir.remove() }
        let right = try nginx.publicKeyPin()
        let wrong = "sha256//" + String(repeating: "A", count: 43) + "="
        var configuration = fastConfiguration(store: dir.file(), endpoint: nginx.url(.https1))
        configuration.caFile = nginx.certificatePath
        configuration.pinnedPublicKey = wrong
        let engine = try OutboxEngine(configuration: configuration)
        for index in 0..<10 { try engine.trackEvent("pinned-\(index)") }
        let stopped = try await Self.status(engine) { $0.disabledReason != nil }
        #expect(stopped.disabledReason?.contains("pinned") == true, "\(stopped.disabledReason ?? "no reason")")
        #expect(stopped.deadLetters == 0 && stopped.delivered == 0)
        try engine.update { $0.pinnedPublicKey = wrong + ";" + right }
        #expect(await engine.waitUntilDelivered(timeout: .seconds(120)))
        #expect(try await engine.status().delivered == 10)
        await engine.shutdown(drainFor: .seconds(1))
    }

    // SPEC K2: bad identity files and pins are refused at configuration, naming the file or the value.
    @Test func badIdentityIsRefusedAtConfiguration() throws {
        let nginx = try NginxServer(mutualTLS: true)
        defer { nginx.stop() }
        let dir = TempDirectory(); defer { dir.remove() }
        let pin = try nginx.publicKeyPin()
        let notPEM = dir.file("not.pem")
        try Data("not a certificate\n".utf8).write(to: URL(fileURLWithPath: notPEM))
        func refusal(_ change: (inout Configuration) -> Void) -> String {
            var configuration = fastConfiguration(store: dir.file(), endpoint: "https://127.0.0.1:9")
            change(&configuration)
            do {
                try configuration.validate()
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal { $0.clientCertificate = dir.file("missing.pem"); $0.clientKey = nginx.clientKeyPath }
            .contains("missing.pem is not a readable file"))
        #expect(refusal { $0.clientCertificate = notPEM; $0.clientKey = nginx.clientKeyPath }.contains("holds no PEM certificate"))
        #expect(refusal { $0.clientCertificate = nginx.clientCertificatePath; $0.clientKey = notPEM }.contains("no unencrypted PEM private key"))
        #expect(refusal { $0.clientCertificate = nginx.clientCertificatePath; $0.clientKey = nginx.strangerKeyPath }
            .contains("is not the key of clientCertificate"))
        #expect(refusal { $0.clientCertificate = nginx.clientCertificatePath }.contains("without clientKey"))
        #expect(refusal { $0.pinnedPublicKey = "sha1//abc" }.contains("is not a sha256//BASE64 pin"))
        #expect(refusal { $0.pinnedPublicKey = "sha256//short=" }.contains("is not a SHA-256 digest"))
        // curl splits at `;sha256//`: a space before a pin would make it never match.
        #expect(refusal { $0.pinnedPublicKey = pin + "; " + pin }.contains("is not a sha256//BASE64 pin"))
        #expect(refusal { $0.pinnedPublicKey = pin + ";" + pin } == "accepted")
        #expect(refusal { $0.clientCertificate = nginx.clientCertificatePath; $0.clientKey = nginx.clientKeyPath;
                          $0.pinnedPublicKey = pin } == "accepted")
    }
}
