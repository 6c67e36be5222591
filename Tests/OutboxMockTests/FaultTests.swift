import Foundation
import Testing
@testable import OutboxMock

/// The one fault type from the scenario file to the connection (SPEC M2, M3, M8): every fault decodes from the way a
/// scenario file spells it and is written back the same way; a name that is no fault is refused with the known ones.
@Suite("Faults from the scenario file")
struct FaultTests {
    /// Every fault as a rule spells it. `everyFaultHasASpelling` fails when a new fault has no line here.
    static let spellings: [(rule: String, fault: Scenario.Outcome)] = [
        (#"{"respond":{"status":503,"headers":{"Retry-After":"2"},"delay_ms":5}}"#,
         .respond(.init(status: 503, headers: ["Retry-After": "2"], delayMs: 5))),
        (#"{"network":{"latency_ms":800}}"#, .respond(.init())),
        (#"{"action":"refuse","duration_s":10}"#, .refuse(durationSeconds: 10)),
        (#"{"match":{"until_s":5},"action":"refuse"}"#, .refuse(durationSeconds: nil)),
        (#"{"action":"reset"}"#, .reset),
        (#"{"action":"drop_before_body"}"#, .dropBeforeBody),
        (#"{"action":"drop_after_body"}"#, .dropAfterBody),
        (#"{"action":"hang"}"#, .hang),
        (#"{"action":"malformed"}"#, .malformed),
    ]

    static func scenario(_ rule: String) throws -> Scenario {
        try Scenario.decode(from: Data(#"{"rules":[\#(rule)]}"#.utf8))
    }

    @Test func everyFaultHasASpelling() {
        let faults = Set(FaultKind.allCases.filter { $0.isAction || $0 == .respond })
        #expect(Set(Self.spellings.map(\.fault.kind)) == faults)
    }

    @Test(arguments: spellings.indices)
    func everyFaultDecodesFromItsSpellingAndRoundTrips(_ i: Int) throws {
        let (rule, fault) = Self.spellings[i]
        let decoded = try Self.scenario(rule)
        #expect(decoded.rules.first?.outcome == fault)
        // Written as a scenario file again (`GET /_mock/scenario`), it reads back as the same fault.
        let written = decoded.jsonData()
        let again = try Scenario.decode(from: written)
        #expect(again == decoded)
        let text = String(decoding: written, as: UTF8.self)
        if let action = fault.actionName {
            #expect(text.contains(#""action" : "\#(action)""#))
        } else {
            #expect(!text.contains(#""action""#))
        }
    }

    @Test(arguments: ["explode", "respond", "latency", "Reset", ""])
    func anUnknownFaultIsRefusedByName(_ name: String) throws {
        do {
            _ = try Self.scenario(#"{"action":"\#(name)"}"#)
            Issue.record("\"\(name)\" was taken as a fault")
        } catch let error as ScenarioError {
            let message = "\(error)"
            #expect(message.contains(#"unknown action "\#(name)""#))
            for known in FaultKind.allCases where known.isAction {
                #expect(message.contains(known.rawValue), "\(message) does not list \(known.rawValue)")
            }
        }
    }

    /// A recording's `action` replays as the fault it names; a name that is no action replays as nothing.
    @Test func aRecordedActionReplaysAsItsFault() {
        for (_, fault) in Self.spellings {
            guard let action = fault.actionName else { continue }
            var exchange = RecordedExchange(at: 0, method: "POST", path: "/logs", install: nil, bytes: 0,
                                            contentEncoding: nil, logs: 0, logIds: [], response: nil, action: action,
                                            durationSeconds: 3, fault: action)
            let expected: Scenario.Outcome = fault.kind == .refuse ? .refuse(durationSeconds: 3) : fault
            #expect(exchange.replayOutcome == expected)
            exchange.action = "latency"
            #expect(exchange.replayOutcome == nil)
        }
    }

    // SPEC M3: every file under Fixtures/scenarios (the named scenarios and the comparison's) loads.
    @Test func everyScenarioFileLoads() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures/scenarios").resolvingSymlinksInPath()
        let files = try #require(FileManager.default.subpaths(atPath: root.path)).filter { $0.hasSuffix(".json") }.sorted()
        #expect(files.contains("ok.json") && files.contains("compare/outage.json"))
        for name in files {
            #expect(throws: Never.self, "\(name)") { try Scenario.load(path: root.appendingPathComponent(name).path) }
        }
    }
}
