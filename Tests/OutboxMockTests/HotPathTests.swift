import Foundation
import Testing
@testable import OutboxMock

/// The pieces SPEC M10 made faster (id parsing, the id set, number checks, the token storage) hold to exactly
/// what the slower code they replaced answered.
@Suite("Hot path equivalences (SPEC M10, M1, M2)")
struct HotPathTests {
    /// The reference: one character at a time.
    private static func slowUUID(_ text: [UInt8]) -> UUIDKey? {
        guard text.count == 36 else { return nil }
        var words: [UInt64] = [0, 0]
        var digit = 0
        for (i, c) in text.enumerated() {
            if [8, 13, 18, 23].contains(i) {
                guard c == UInt8(ascii: "-") else { return nil }
                continue
            }
            let v: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): v = c - UInt8(ascii: "A") + 10
            default: return nil
            }
            words[digit / 16] = words[digit / 16] << 4 | UInt64(v)
            digit += 1
        }
        return UUIDKey(high: words[0], low: words[1])
    }

    private static func parse(_ bytes: [UInt8]) -> UUIDKey? {
        bytes.withUnsafeBufferPointer { UUIDKey($0) }
    }

    // SPEC M1 (ids must be UUIDs), M10: every byte value at every position is read as the reference reads it.
    @Test func uuidParsingMatchesTheReferenceForEveryByteAtEveryPosition() {
        let base = Array("0123abcd-ef45-6789-ABCD-ef0123456789".utf8)
        #expect(Self.parse(base) == Self.slowUUID(base))
        #expect(Self.parse(base)?.uuidString == "0123abcd-ef45-6789-abcd-ef0123456789")
        var mismatches = 0
        for position in 0..<36 {
            for byte in UInt8.min...UInt8.max {
                var text = base
                text[position] = byte
                if Self.parse(text) != Self.slowUUID(text) { mismatches += 1 }
            }
        }
        #expect(mismatches == 0)
        #expect(Self.parse(Array(base.dropLast())) == nil)
        #expect(Self.parse(base + [UInt8(ascii: "0")]) == nil)
        var random = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let text = Array(UUID().uuidString.utf8)
            let mixed = text.map { Bool.random(using: &random) && (0x41...0x46).contains($0) ? $0 | 0x20 : $0 }
            #expect(Self.parse(mixed) == Self.slowUUID(mixed))
        }
    }

    // SPEC M2: the id set de-duplicates exactly as a Set does, across growth and for the all-zero id.
    @Test func idSetAgreesWithASet() {
        var fast = UUIDSet()
        var reference = Set<UUIDKey>()
        var random = SystemRandomNumberGenerator()
        var recent: [UUIDKey] = [UUIDKey(high: 0, low: 0)]
        for i in 0..<50_000 {
            let key: UUIDKey
            if i % 7 == 0, let again = recent.randomElement(using: &random) {
                key = again  // a duplicate
            } else if i % 11 == 0 {
                key = UUIDKey(high: UInt64(i), low: 0)  // keys that differ in one word only
            } else {
                key = UUIDKey(high: random.next(), low: random.next())
            }
            let inserted = fast.insert(key)
            #expect(inserted == reference.insert(key).inserted)
            if recent.count < 64 { recent.append(key) } else { recent[i % 64] = key }
        }
        #expect(fast.count == reference.count)
        #expect(reference.allSatisfy { fast.contains($0) })
        #expect(!fast.contains(UUIDKey(high: 1, low: 1)) || reference.contains(UUIDKey(high: 1, low: 1)))
    }

    /// The reading of `text` as a number token: `double(_:)` and `isFiniteNumber(_:)`; nil if it is not JSON.
    private static func read(_ text: String) -> (value: Double?, finite: Bool)? {
        Array("[\(text)]".utf8).withUnsafeBufferPointer { buffer in
            guard let tape = try? JSONTape.parse(buffer) else { return nil }
            let view = JSONView(bytes: buffer, tape: tape)
            return (view.double(1), view.isFiniteNumber(1))
        }
    }

    // SPEC T3 (double and long values), M1: the short-decimal reading is bit for bit strtod's, and the
    // finiteness check agrees with reading the number.
    @Test func numbersReadAsStrtodReadsThem() throws {
        let texts = ["0", "-0", "5321.5", "0.99", "12.290000000000001", "-90", "90.000000000001", "123456789012345",
                     "1234567890123456", "0.1", "0.3", "-0.000000000000001", "9007199254740993", "1e5", "1.5E3",
                     "-1e309", "1e309", "1E-400", String(repeating: "9", count: 308), String(repeating: "9", count: 309),
                     "-" + String(repeating: "9", count: 400) + ".5", "0." + String(repeating: "0", count: 400) + "1"]
        for text in texts {
            let read = try #require(Self.read(text))
            let expected = Double(text).flatMap { $0.isFinite ? $0 : nil }
            #expect(read.value?.bitPattern == expected?.bitPattern, "\(text)")
            #expect(read.finite == (expected != nil), "\(text)")
        }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            let whole = String(Int.random(in: -999_999...999_999, using: &random))
            let text = whole + "." + String(Int.random(in: 0...99_999_999, using: &random))
            let read = try #require(Self.read(text))
            #expect(read.value?.bitPattern == Double(text)?.bitPattern, "\(text)")
        }
    }

    // SPEC M10: a connection's token storage is reused from body to body; a body with more tokens than the
    // storage holds grows it, and every tape reads as one parsed into fresh storage.
    @Test func reusedTokenStorageParsesLikeFreshStorage() throws {
        let storage = JSONTokenStorage(capacity: 16)
        let bodies = [
            "[" + Array(repeating: "1", count: 5000).joined(separator: ",") + "]",
            #"{"a":[true,false,null,{"b":"c\"d"}],"e":-1.5e3}"#,
            "[" + Array(repeating: #"{"device":{"x":1}}"#, count: 300).joined(separator: ",") + "]",
        ]
        for body in bodies {
            let bytes = Array(body.utf8)
            try bytes.withUnsafeBufferPointer { buffer in
                let reused = try JSONTape.parse(buffer, storage: storage)
                let fresh = try JSONTape.parse(buffer)
                #expect(reused.count == fresh.count)
                var same = true
                for i in 0..<fresh.count {
                    let (a, b) = (reused[i], fresh[i])
                    same = same && a.kind == b.kind && a.flags == b.flags && a.start == b.start && a.end == b.end
                        && a.count == b.count && a.next == b.next
                }
                #expect(same, "\(body.prefix(40))")
            }
        }
        #expect(storage.capacity >= 5001)
    }

    // SPEC M7, M4, M9: the delay percentiles, sorted outside the state's lock from the delays that arrived since
    // the last reading, are those of every delay since start or reset, whatever the readings in between.
    @Test func delayPercentilesStayExactAcrossReadingsAndResets() throws {
        let clock = ManualMockClock()
        try withServer(MockServer.Configuration(threads: 1, clock: clock)) { (server: MockServer) throws in
            let now = Date(timeIntervalSince1970: Double(clock.wallMs()) / 1000)
            var delays: [Int64] = []
            func post(_ seconds: [Int]) throws {
                let logs = seconds.map { Wire.event(timestamp: Wire.timestamp(now.addingTimeInterval(-Double($0)))) }
                #expect(try Wire.post(server.port, logs).status == 200)
                delays += seconds.map { Int64($0) * 1000 }
            }
            func expected() -> MockStats.DelayPercentiles { .of(sorted: delays.sorted()) }
            try post([50, 10, 30])
            #expect(server.stats().delayMs == expected())
            try post([5, 70, 20, 20])  // both below and above those before
            #expect(try metricsText(server.port).contains("outbox_mock_delivery_delay_ms_sum \(delays.reduce(0, +))"))
            try post([1, 1000])
            #expect(server.stats().delayMs == expected())
            #expect(server.stats().delayMs == MockStats.DelayPercentiles(p50: 20_000, p90: 1_000_000, p99: 1_000_000,
                                                                         max: 1_000_000))
            server.reset()
            delays = []
            #expect(server.stats().delayMs == .zero)
            try post([7, 3])
            #expect(server.stats().delayMs == expected())
        }
        #expect(MockCore.merge([1, 3, 3, 9], [0, 3, 4, 10]) == [0, 1, 3, 3, 3, 4, 9, 10])
    }

    private func metricsText(_ port: Int) throws -> String {
        String(decoding: try HTTP.get(port, "/_mock/metrics").body, as: UTF8.self)
    }

    // SPEC M1, M8, M10: eliding repeated devices and reusing token storage change no verdict. Bodies of several
    // logs sharing a device, mutated at random (bytes changed, inserted, removed, truncated), get the same
    // answer, logs and reason with and without elision, in fresh and in reused storage.
    @Test func verdictsDoNotDependOnDeviceElisionOrStorageReuse() {
        var random = SystemRandomNumberGenerator()
        // Devices A A B B A: the second of each pair is elided, the last A is not (B came between).
        var logs = Wire.events(4)
        var other = Wire.device
        other["timeZoneOffset"] = 120
        logs[2]["device"] = other
        logs[3]["device"] = other
        logs.append(Wire.log("startSession"))
        logs[4]["sid"] = Wire.newID()
        let seed = Array(Wire.json(["logs": logs]).utf8)
        let interesting = Array(#"{}[],:"0123456789-.eE\ tfnul"#.utf8)
        let reused = JSONTokenStorage(capacity: 16)
        var disagreements: [String] = []
        var accepted = 0
        for round in 0..<4000 {
            var body = seed
            for _ in 0..<Int.random(in: 1...3, using: &random) where !body.isEmpty {
                let at = Int.random(in: 0..<body.count, using: &random)
                let byte = interesting.randomElement(using: &random) ?? 0
                switch Int.random(in: 0..<4, using: &random) {
                case 0: body[at] = byte
                case 1: body.insert(byte, at: at)
                case 2: body.remove(at: at)
                default: if round % 8 == 0 { body.removeLast(Int.random(in: 0...min(40, body.count), using: &random)) }
                }
            }
            body.withUnsafeBufferPointer { buffer in
                let elided = LogValidator.check(body: buffer, storage: reused)
                let full = LogValidator.check(body: buffer, storage: JSONTokenStorage(), elidingDevices: false)
                if elided.failure == nil { accepted += 1 }
                let same = elided.failure == full.failure && elided.logCount == full.logCount
                    && elided.logs.map(\.id) == full.logs.map(\.id)
                    && elided.logs.map(\.span) == full.logs.map(\.span)
                if !same, disagreements.count < 3 { disagreements.append(String(decoding: body, as: UTF8.self)) }
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements)")
        #expect(accepted > 0)
        // The unmutated body is accepted, with two devices elided.
        seed.withUnsafeBufferPointer { buffer in
            #expect(LogValidator.check(body: buffer).logs.count == 5)
            let elided = (try? JSONTape.parse(buffer, elidingRepeatedDevices: true))?.count ?? 0
            let full = (try? JSONTape.parse(buffer))?.count ?? 0
            #expect(full - elided == 2 * 2 * Wire.device.count)
        }
    }
}
