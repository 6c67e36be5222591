import Foundation
import Outbox
import OutboxMock
import OutboxTestSupport
import Testing

/// SPEC D7, D11–D14: every named scenario of Fixtures/scenarios/ end to end on Sensors, GA4, Amplitude and Mixpanel —
/// `outbox emit` against the mock speaking the wire — with exact accounting: every tracked log is delivered,
/// dead-lettered or still pending (none evicted, expired or unaccounted: lost 0), and the mock holds exactly the
/// delivered ones once each by the vendor's key (GA4's `events_unique`, its resends counted as duplicates).
// One serialized suite per wire (below), the four side by side: 48 children at once loaded 2 cores for nothing, and
// one after another they took 220 s of `make test`. (The crashes once blamed on starting them all at once were
// Foundation's Process.run reading past a buffer: the tests start children with `ChildProcess` now.)
@Suite("Every named scenario on the Sensors, GA4, Amplitude and Mixpanel wires (SPEC D7, D11–D14)")
struct NamedScenarioDestinationTests {
    static let scenarios = ["ok", "flaky", "lost-ack", "drop-before-body", "slow-network", "throttle", "skewed-clock",
                            "too-large", "poison", "unauthorized", "outage", "outage-60"]

    // A scenario added to Fixtures/scenarios/ is run here too, or this fails.
    @Test func theScenariosAreEveryNamedOne() throws {
        let directory = URL(fileURLWithPath: try MockServer.scenarioPath("ok")).deletingLastPathComponent().path
        let named = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".json") }
        #expect(Set(named.map { String($0.dropLast(".json".count)) }) == Set(Self.scenarios))
    }

    /// The wire's credential flags (the secret in a file) and what follows the mock's URL.
    static func wireArguments(_ wire: Vendor, secret: String) -> (arguments: [String], path: String) {
        switch wire {
        case .sensors: ([], "/sa?project=default")
        case .ga4: (["--measurement-id", "G-TEST123", "--api-secret-file", secret], "")
        case .amplitude: (["--api-key-file", secret], "")
        default: (["--project-token-file", secret], "")
        }
    }

    static func everyLogIsAccountedForUnderTheScenario(wire: Vendor, scenario: String) async throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let secret = dir.file("secret")
        try "s3cr3t-of-\(wire.rawValue)\n".write(toFile: secret, atomically: true, encoding: .utf8)
        let (arguments, path) = Self.wireArguments(wire, secret: secret)
        let count = 100
        var extra: [String] = []
        var adjust: ((inout Scenario) -> Void)?
        switch scenario {
        case "poison":
            // Half the events are named `poison` (each batch holding one is refused: bisected down to them), half
            // `poison-critical`, which pass.
            extra = ["--name-prefix", "poison", "--critical-every", "2"]
        case "outage":
            // Tracking spans the port's closing at 2 s: the logs after it wait out the 10 s outage.
            extra = ["--rate", "40"]
        case "outage-60":
            // The same refusal at a tenth of its time (6–12 s instead of 60–120 s: a minute per wire otherwise).
            extra = ["--rate", "12"]
            adjust = { scenario in
                for index in scenario.rules.indices {
                    scenario.rules[index].match.afterSeconds = scenario.rules[index].match.afterSeconds.map { $0 / 10 }
                    scenario.rules[index].match.untilSeconds = scenario.rules[index].match.untilSeconds.map { $0 / 10 }
                }
            }
        default: break
        }
        let run = try await emitToMock(wire, scenario: scenario, adjust: adjust, count: count,
                                       arguments: arguments + extra, path: path, in: dir)
        let label = "\(wire.rawValue)/\(scenario)"
        let delivered = run.count("delivered") ?? -1, deadLettered = run.count("dead_lettered") ?? -1
        let pending = run.count("pending") ?? -1
        #expect(run.count("tracked") == count, "\(label): \(run.output) \(run.errors)")
        #expect(run.count("evicted") == 0 && run.count("expired") == 0, "\(label): \(run.output)")
        #expect(count - delivered - deadLettered - pending == 0, "\(label): lost 0 — \(run.output)")
        #expect(run.stats?.eventsUnique == delivered, "\(label): the mock holds each delivered log once: \(String(describing: run.stats))")
        #expect(run.stats?.eventsRefused == 0 && (run.stats?.eventsInvalid ?? 0) == 0, "\(label): \(String(describing: run.stats))")
        #expect(!run.shows("s3cr3t-of-"), "\(label): the secret is never shown")
        switch scenario {
        case "unauthorized":
            // R1: a 401 stops sending at once and keeps every log.
            #expect(run.status == 1 && run.errors.contains("401"), "\(label): \(run.errors)")
            #expect(pending == count && delivered == 0)
        case "poison":
            #expect(run.status == 0, "\(label): \(run.errors)")
            #expect(deadLettered == count / 2 && delivered == count / 2, "\(label): \(run.output)")
        default:
            #expect(run.status == 0, "\(label): \(run.errors)")
            #expect(delivered == count && pending == 0 && deadLettered == 0, "\(label): \(run.output)")
        }
        if ["flaky", "lost-ack", "drop-before-body", "throttle", "outage", "outage-60"].contains(scenario) {
            #expect((run.count("retries") ?? 0) > 0, "\(label): the fault was met: \(run.output)")
        }
        if scenario == "lost-ack" {
            #expect((run.stats?.eventsDuplicate ?? 0) > 0, "\(label): the lost answers' resends reached the mock")
        }
        if scenario == "too-large" || scenario == "throttle" {
            let status = scenario == "too-large" ? "413" : "429"
            #expect((run.mock.statusCounts[status] ?? 0) > 0, "\(label): the mock answered \(status)")
        }
    }
}

@Suite("Every named scenario on the Sensors wire (SPEC D7, D11)", .serialized)
struct NamedScenarioSensorsTests {
    @Test(arguments: NamedScenarioDestinationTests.scenarios)
    func everyLogIsAccountedForUnderTheScenario(scenario: String) async throws {
        try await NamedScenarioDestinationTests.everyLogIsAccountedForUnderTheScenario(wire: .sensors, scenario: scenario)
    }
}

@Suite("Every named scenario on the GA4 wire (SPEC D7, D12)", .serialized)
struct NamedScenarioGA4Tests {
    @Test(arguments: NamedScenarioDestinationTests.scenarios)
    func everyLogIsAccountedForUnderTheScenario(scenario: String) async throws {
        try await NamedScenarioDestinationTests.everyLogIsAccountedForUnderTheScenario(wire: .ga4, scenario: scenario)
    }
}

@Suite("Every named scenario on the Amplitude wire (SPEC D7, D13)", .serialized)
struct NamedScenarioAmplitudeTests {
    @Test(arguments: NamedScenarioDestinationTests.scenarios)
    func everyLogIsAccountedForUnderTheScenario(scenario: String) async throws {
        try await NamedScenarioDestinationTests.everyLogIsAccountedForUnderTheScenario(wire: .amplitude, scenario: scenario)
    }
}

@Suite("Every named scenario on the Mixpanel wire (SPEC D7, D14)", .serialized)
struct NamedScenarioMixpanelTests {
    @Test(arguments: NamedScenarioDestinationTests.scenarios)
    func everyLogIsAccountedForUnderTheScenario(scenario: String) async throws {
        try await NamedScenarioDestinationTests.everyLogIsAccountedForUnderTheScenario(wire: .mixpanel, scenario: scenario)
    }
}
