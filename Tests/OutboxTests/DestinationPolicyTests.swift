import Foundation
import Testing
@testable import Outbox

/// BEHAVIOUR H2–H4: a destination's policy — which logs it sends (include, exclude, sample) and which properties it
/// leaves out (redact) — decided on stored logs, and encoded by every wire exactly as a log tracked without them.
@Suite("Per-destination policies (BEHAVIOUR H2–H4)")
struct DestinationPolicyTests {
    static let stamp = Stamp.bytes(sid: UUIDBytes(high: 0x0193_0000_0000_7000, low: 0x8000_0000_0000_0001), userID: "u-1")

    /// A stored log of `type` whose own fields are `body`, as the engine writes it.
    static func log(_ type: LogType, _ body: [UInt8], index: Int) -> StoredLog {
        .made(type, id: UUIDBytes(high: 0x0193_0000_0000_7000 | UInt64(index), low: 0x8000_0000_0000_0000 | UInt64(index)),
              stamp: stamp, body: body, seq: Int64(index + 1), wallMs: 1_795_332_826_123 + Int64(index),
              monoNs: 5_000_000_000 + Int64(index) * 1_000_000)
    }

    static func event(_ name: String, _ properties: [String: PropertyValue] = [:], index: Int) throws -> StoredLog {
        log(.event, try EventValidator.validate(name: name, properties: properties).body, index: index)
    }

    static func policy(include: [String]? = nil, exclude: [String] = [], redact: [String] = [],
                       sample: [String: Double] = [:]) throws -> DestinationPolicy {
        try #require(DestinationPolicy.make(include: include, exclude: exclude, redact: redact, sample: sample))
    }

    static func names(_ policy: DestinationPolicy, _ logs: [StoredLog]) -> [String] {
        policy.partition(logs).kept.map { log in
            let object = try? JSONSerialization.jsonObject(with: Data(log.payload)) as? [String: Any]
            let type = object?["type"] as? String ?? "?"
            return type == "event" ? object?["name"] as? String ?? "?" : "$" + type
        }
    }

    // BEHAVIOUR H: nothing asked, no policy: a destination without one pays nothing per log.
    @Test func aPolicyThatAsksForNothingIsNone() {
        #expect(DestinationPolicy.make(include: nil, exclude: [], redact: [], sample: [:]) == nil)
        #expect(DestinationPolicy.make(include: nil, exclude: [], redact: [], sample: ["*": 1]) == nil)
        #expect(DestinationPolicy.make(include: [], exclude: [], redact: [], sample: [:]) != nil, "include [] sends nothing")
    }

    // BEHAVIOUR H2: with include only its names pass, then exclude removes; the most specific pattern decides (exact,
    // then the longest prefix, then `*`); non-event logs go by the engine's names on every wire.
    @Test func includeAndExcludeDecideByTheMostSpecificPattern() throws {
        let logs = [
            try Self.event("checkout_started", index: 0), try Self.event("checkout_debug", index: 1),
            try Self.event("debug_tick", index: 2), try Self.event("viewed", index: 3),
            Self.log(.screen, try LogBodies.screen(title: "Home", path: nil, durationNs: nil, properties: [:]).body, index: 4),
            Self.log(.identify, try LogBodies.identify(["plan": "pro"]).body, index: 5),
            Self.log(.startSession, [], index: 6),
        ]
        #expect(Self.names(try Self.policy(exclude: ["debug*", "$screen"]), logs)
                == ["checkout_started", "checkout_debug", "viewed", "$identify", "$startSession"])
        #expect(Self.names(try Self.policy(include: ["checkout*", "$identify"], exclude: ["checkout_debug"]), logs)
                == ["checkout_started", "$identify"])
        // The exact include is more specific than the exclude's prefix; `*` is the least specific of all.
        #expect(Self.names(try Self.policy(include: ["checkout_debug", "*"], exclude: ["checkout*", "$*"]), logs)
                == ["checkout_debug", "debug_tick", "viewed"])
        // The same pattern in both lists excludes.
        #expect(Self.names(try Self.policy(include: ["viewed"], exclude: ["viewed"]), logs) == [])
        #expect(Self.names(try Self.policy(include: []), logs) == [])
        let (kept, skipped) = try Self.policy(exclude: ["viewed"]).partition(logs)
        #expect(kept.count == 6 && skipped == [4], "the skipped are given by seq")
    }

    // BEHAVIOUR H4: a rate per event name, decided by a hash of the log id: the same decision every time (every
    // attempt, every restart), about `rate` of the events sent; non-event logs are never sampled.
    @Test func samplingDecidesByTheLogIdAndKeepsAboutTheRate() throws {
        let policy = try Self.policy(sample: ["noisy*": 0.25, "noisy_critical": 1, "*": 0])
        var logs: [StoredLog] = []
        for index in 0..<4000 { logs.append(try Self.event("noisy_tick", index: index)) }
        let first = policy.partition(logs)
        let again = policy.partition(logs.reversed())
        #expect(Set(first.skipped) == Set(again.skipped), "the same logs, whatever the batch")
        let share = Double(first.kept.count) / Double(logs.count)
        #expect(share > 0.22 && share < 0.28, "kept \(share) of the events at a rate of 0.25")
        #expect(policy.partition([try Self.event("noisy_critical", index: 1)]).skipped.isEmpty, "the exact name's rate 1")
        #expect(policy.partition([try Self.event("other", index: 1)]).kept.isEmpty, "`*`'s rate 0")
        let screen = Self.log(.screen, try LogBodies.screen(title: "Home", path: nil, durationNs: nil, properties: [:]).body, index: 2)
        #expect(policy.partition([screen]).kept.count == 1, "only events are sampled")
        // A fixed hash: the same fraction on every machine and in every release.
        #expect(DestinationPolicy.sampleFraction(UUIDBytes(high: 0, low: 0)) == 0)
        #expect(DestinationPolicy.sampleFraction(UUIDBytes(high: 1, low: 2)) == DestinationPolicy.sampleFraction(UUIDBytes(high: 1, low: 2)))
    }

    // BEHAVIOUR H: bad input refused naming the key and the pattern, in Swift, C JSON and a list's element.
    @Test func badPoliciesAreRefusedNamingTheKey() throws {
        func refusal(_ change: (inout Configuration) -> Void) -> String {
            var configuration = Configuration(storePath: "/tmp/policy.sqlite")
            configuration.endpoint = "http://127.0.0.1:1"
            configuration.appSecret = "secret"
            change(&configuration)
            do {
                try configuration.validate()
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal { $0.sample = ["debug*": 1.5] }.contains("sample's rate for 'debug*' must be between 0 and 1, got 1.5"))
        #expect(refusal { $0.sample = ["x": -0.1] }.contains("between 0 and 1"))
        #expect(refusal { $0.sample = ["x": .nan] }.contains("between 0 and 1"))
        #expect(refusal { $0.include = ["ok", ""] }.contains("include holds an empty name"))
        #expect(refusal { $0.redact = ["card*number"] }.contains("redact's 'card*number': '*' goes only at the end"))
        #expect(refusal { $0.exclude = ["*debug"] }.contains("exclude's '*debug'"))
        #expect(refusal { $0.exclude = ["debug*", "*"]; $0.redact = ["email"]; $0.sample = ["*": 0.5] } == "accepted")
        #expect(refusal { configuration in
            configuration.endpoint = nil
            configuration.appSecret = ""
            var ops = NamedDestination(name: "ops", destination: .otlp, endpoint: "http://127.0.0.1:1")
            ops.sample = ["a": 2]
            configuration.destinations = [ops]
        }.contains("destination 'ops': sample's rate for 'a'"))
        #expect(refusal { configuration in
            configuration.endpoint = nil
            configuration.appSecret = ""
            configuration.exclude = ["debug"]
            configuration.destinations = [NamedDestination(name: "ops", destination: .otlp, endpoint: "http://127.0.0.1:1")]
        }.contains("together with the single destination's fields"))
    }

    // BEHAVIOUR H, E3: the four keys read from C JSON, at the top level and in a destinations element.
    @Test func theKeysReadFromCJSON() throws {
        var configuration = Configuration(storePath: "-")
        #expect(try configuration.decode("include", .array([.string("a"), .string("b*")])))
        #expect(try configuration.decode("exclude", .array([.string("$screen")])))
        #expect(try configuration.decode("redact", .array([.string("email")])))
        #expect(try configuration.decode("sample", .object([("debug*", .double(0.1)), ("*", .integer(1))])))
        #expect(configuration.include == ["a", "b*"] && configuration.exclude == ["$screen"] && configuration.redact == ["email"])
        #expect(configuration.sample == ["debug*": 0.1, "*": 1])
        #expect(throws: ConfigurationValueError.self) { try configuration.decode("include", .string("a")) }
        #expect(throws: ConfigurationValueError.self) { try configuration.decode("sample", .object([("a", .string("x"))])) }
        #expect(try configuration.decode("destinations", .array([.object([
            ("name", .string("ops")), ("destination", .string("otlp")), ("endpoint", .string("http://127.0.0.1:1")),
            ("exclude", .array([.string("debug*")])), ("sample", .object([("*", .double(0.5))])),
        ])])))
        #expect(configuration.destinations.first?.exclude == ["debug*"] && configuration.destinations.first?.sample == ["*": 0.5])
    }

    /// The logs every wire is given: an event, a screen, user properties and an identify, with and without the
    /// properties a policy redacts.
    static func redactionLogs(redacted: Bool) throws -> [StoredLog] {
        let secret: [String: PropertyValue] = redacted ? [:] : ["email": "ada@example.com", "card_number": "4111", "card_cvc": "123"]
        let merge: ([String: PropertyValue]) -> [String: PropertyValue] = { $0.merging(secret) { a, _ in a } }
        return [
            try event("checkout", merge(["plan": "pro", "n": 3, "price": 9.99]), index: 0),
            log(.screen, try LogBodies.screen(title: "Cart", path: "/cart", durationNs: 1_500_000_000,
                                              properties: merge(["source": "search"])).body, index: 1),
            log(.userProperties, try LogBodies.userProperties(merge(["seats": 3])).body, index: 2),
            log(.identify, try LogBodies.identify(merge(["plan": "pro"])).body, index: 3),
            try event("viewed", index: 4),
        ]
    }

    // BEHAVIOUR H3, golden per wire: on every wire, a batch whose redacted properties were removed by the policy
    // encodes byte for byte as the same batch tracked without them, and none of their values is on the wire.
    @Test(arguments: Destination.allCases)
    func aRedactedLogEncodesAsOneTrackedWithoutTheProperty(destination: Destination) throws {
        let wire = try WireEncodeBench.wire(named: destination.rawValue)
        let contexts: [Int64: [UInt8]] = [1: Array(#"{"appVersion":"1.0","appBuild":"1","sdkName":"outbox","sdkVersion":"0.2.0","osName":"Linux","osVersion":"6.1","model":"m","oemName":"o","locale":"en_US","timeZoneOffset":0}"#.utf8)]
        let times = WireTimes(sentAtMs: 1_795_332_900_000, timestamp: \.wallMs)
        let policy = try Self.policy(redact: ["email", "card_*"])
        let tracked = try Self.redactionLogs(redacted: false)
        let withoutThem = try Self.redactionLogs(redacted: true)
        let sent = policy.redacting(tracked)
        #expect(sent.map(\.seq) == tracked.map(\.seq) && sent.map(\.id) == tracked.map(\.id))
        let body = wire.encode(sent, contexts: contexts, times: times)
        let golden = wire.encode(withoutThem, contexts: contexts, times: times)
        #expect(body == golden, "\(destination): \(String(decoding: body, as: UTF8.self))\n\(String(decoding: golden, as: UTF8.self))")
        let plain = wire.encode(tracked, contexts: contexts, times: times)
        #expect(plain != body, "\(destination): the unredacted batch differs")
        // Sensors sends base64 of gzip: its plain text is checked through the encoding of the payloads above.
        if destination != .sensors {
            let text = String(decoding: body, as: UTF8.self)
            #expect(!text.contains("ada@example.com") && !text.contains("4111"), "\(destination): \(text)")
            #expect(String(decoding: plain, as: UTF8.self).contains("ada@example.com"))
        }
        // Every kind at once on this wire: what include/exclude and sample leave out is not encoded at all.
        let all = try Self.policy(exclude: ["$screen"], redact: ["email", "card_*"], sample: ["viewed": 0])
        let (kept, skipped) = all.partition(tracked)
        #expect(skipped == [2, 5], "the screen (seq 2) and the sampled-out event (seq 5)")
        let expected = withoutThem.filter { ![2, 5].contains($0.seq) }
        #expect(wire.encode(all.redacting(kept), contexts: contexts, times: times) == wire.encode(expected, contexts: contexts, times: times),
                "\(destination): the batch with every policy applied")
        // An exact name does not reach a longer one: `email` leaves `email_verified` alone.
        let signup = policy.redacting([try Self.event("signup", ["email_verified": true], index: 9)])
        #expect(String(decoding: signup[0].payload, as: UTF8.self).contains("email_verified"))
    }
}
