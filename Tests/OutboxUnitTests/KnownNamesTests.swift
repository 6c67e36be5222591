import Glibc
import Testing
@testable import Outbox

@Suite("Known event names, read without the intake's lock (SPEC T4)")
struct KnownNamesTests {
    @Test func aNameIsFoundOnceInsertedAndOnlyThen() {
        let names = KnownNames(expected: 200)
        let samples = ["bench", "b", "", "checkout>pay", "ü😀", String(repeating: "n", count: 256), "aaaaaaaa", "aaaaaaab", "aaaaaaaaa"]
        for name in samples { #expect(!names.contains(name)) }
        for (index, name) in samples.enumerated() {
            names.insert(name)
            for (other, candidate) in samples.enumerated() { #expect(names.contains(candidate) == (other <= index), "\(candidate)") }
        }
        names.insert("bench")  // again: nothing changes
        #expect(names.contains("bench"))
        #expect(!names.contains("benc") && !names.contains("bench ") && !names.contains("Bench"))
    }

    // The table stops taking names at half its slots: lookups of names never added still end (at an empty slot).
    @Test func aFullTableStopsTakingNamesAndStillAnswers() {
        let names = KnownNames(expected: 4)  // 16 slots, 8 names
        for index in 0..<20 { names.insert("name-\(index)") }
        let found = (0..<20).filter { names.contains("name-\($0)") }
        #expect(found == Array(0..<8))
        #expect(!names.contains("other"))
    }

    // Readers racing the writer see a name either not yet or whole, never half-written, and never lose it.
    @Test func readersRacingTheWriterSeeWholeNamesOnly() async {
        let names = KnownNames(expected: 2000)
        let count = 1500
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for index in 0..<count { names.insert("event-\(index)-" + String(repeating: "x", count: index % 40)) }
                return true
            }
            for _ in 0..<2 {
                group.addTask {
                    var seen = 0
                    while seen < count {
                        // A name once found stays found; the next may not be there yet.
                        if names.contains("event-\(seen)-" + String(repeating: "x", count: seen % 40)) { seen += 1 }
                        if names.contains("event-\(seen)-y") { return false }
                    }
                    return (0..<count).allSatisfy { names.contains("event-\($0)-" + String(repeating: "x", count: $0 % 40)) }
                }
            }
            for await ok in group { #expect(ok) }
        }
    }
}

@Suite("Intake: distinct event names (SPEC T4)")
struct IntakeNameTests {
    private func draft() -> EventDraft { EventDraft(priority: .normal, wallMs: 1, monoNs: 2, body: []) }

    private func admit(_ intake: Intake, _ name: String) throws(OutboxError) {
        let body: StaticString = "{}"
        _ = try intake.admit(name: name, draft: draft(), body: UnsafeRawBufferPointer(start: body.utf8Start, count: body.utf8CodeUnitCount),
                             onLoopThread: false)
    }

    private func newNames(_ batch: IntakeBatch) -> [String] {
        batch.items.compactMap { item -> String? in
            guard case .event(let draft) = item else { return nil }
            return draft.newName
        }
    }

    // SPEC T4: exactly the limit of distinct names is admitted; known names go on being admitted after it; each
    // new name is carried (to be stored) by its first event only.
    @Test func theLimitIsExactAndKnownNamesStayAdmitted() throws {
        let intake = Intake(enabled: true, names: ["stored"], maxNames: 3, capacity: 1000)
        for name in ["stored", "a", "a", "b", "stored", "b"] { try admit(intake, name) }
        #expect(throws: OutboxError.tooManyEventNames(name: "c", limit: 3)) {
            try admit(intake, "c")
        }
        for name in ["a", "stored", "b"] { try admit(intake, name) }
        #expect(throws: OutboxError.tooManyEventNames(name: "c", limit: 3)) {
            try admit(intake, "c")
        }
        let batch = intake.takeAll()
        #expect(batch.items.count == 9)
        #expect(newNames(batch) == ["a", "b"])
    }

    // SPEC T4: names are Swift strings: a canonically equivalent spelling is the same name, not a new one.
    @Test func aCanonicallyEquivalentSpellingIsTheSameName() throws {
        let intake = Intake(enabled: true, names: [], maxNames: 1, capacity: 1000)
        try admit(intake, "caf\u{E9}")
        try admit(intake, "cafe\u{301}")
        try admit(intake, "cafe\u{301}")
        #expect(newNames(intake.takeAll()) == ["caf\u{E9}"])
    }

    // SPEC T4 under contention: threads racing with new names admit exactly the limit, each name once.
    @Test func racingCallersAdmitExactlyTheLimit() async throws {
        let intake = Intake(enabled: true, names: [], maxNames: 50, capacity: 100_000)
        let accepted = await withTaskGroup(of: Set<String>.self) { group in
            for thread in 0..<4 {
                group.addTask {
                    var mine = Set<String>()
                    for round in 0..<3 {
                        for index in 0..<100 {
                            let name = "n\((index * 7 + thread * 13 + round) % 100)"
                            if (try? admit(intake, name)) != nil { mine.insert(name) }
                        }
                    }
                    return mine
                }
            }
            return await group.reduce(into: Set<String>()) { $0.formUnion($1) }
        }
        let names = newNames(intake.takeAll())
        #expect(accepted.count == 50)
        #expect(names.count == 50 && Set(names) == accepted)
    }
}
