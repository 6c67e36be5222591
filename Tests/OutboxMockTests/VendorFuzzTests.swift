import Foundation
import NIOHTTP1
import Testing
@testable import OutboxMock

/// Mutated captured requests through every vendor's decoder (SPEC V3: bad input gets an answer, never a crash).
@Suite("Vendor decoders under random input")
struct VendorFuzzTests {
    /// `OUTBOX_FUZZ_ITERATIONS` (default 2 000) inputs from `OUTBOX_FUZZ_SEED` (default 5), spread over the
    /// captured fixtures (each decoded as the body of its own path); a failure names the iteration, so
    /// `OUTBOX_FUZZ_SEED=<seed + iteration> OUTBOX_FUZZ_ITERATIONS=1` replays it.
    @Test func mutatedRequestsAreAnsweredAndCountedConsistently() throws {
        let environment = ProcessInfo.processInfo.environment
        let iterations = environment["OUTBOX_FUZZ_ITERATIONS"].flatMap { Int($0) } ?? 2000
        let seed = environment["OUTBOX_FUZZ_SEED"].flatMap { UInt64($0) } ?? 5
        var fixtures: [VendorFixture] = []
        for vendor in [Vendor.segment, .posthog, .snowplow, .mixpanel] { fixtures += try VendorFixture.all(vendor) }
        // gzip fixtures are fuzzed as their plain bodies (the pipeline inflates before the decoder runs);
        // the deflate one is left out, its plain twin is in.
        let plain = fixtures.compactMap { f -> (VendorFixture, [UInt8])? in
            switch f.headers.first(where: { $0.0.lowercased() == "content-encoding" })?.1 {
            case nil: (f, f.body)
            case "gzip"?: (try? TestGzip.decompress(f.body)).map { (f, $0) }
            default: nil
            }
        }
        let tokens = Array(#"{}[],:"\ 0-9e.truefalsenull%+=&data=W3siZXZlbnQiOiJFIn1d"#.utf8)
        for iteration in 0..<iterations {
            var random = SplitMix64(seed: seed &+ UInt64(iteration))
            let (fixture, original) = plain[Int(random.next() % UInt64(plain.count))]
            var body = original
            for _ in 0...Int(random.next() % 8) {
                let at = body.isEmpty ? 0 : Int(random.next() % UInt64(body.count))
                switch random.next() % 4 {
                case 0 where !body.isEmpty: body[at] = UInt8(truncatingIfNeeded: random.next())
                case 1: body.insert(tokens[Int(random.next() % UInt64(tokens.count))], at: at)
                case 2 where !body.isEmpty: body.removeSubrange(at..<min(body.count, at + Int(random.next() % 64)))
                default: body = Array(body.prefix(at))
                }
            }
            var head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: fixture.method), uri: fixture.uri)
            for (name, value) in fixture.headers where name.lowercased() != "content-encoding" {
                head.headers.add(name: name, value: value)
            }
            let path = ConnectionHandler.path(of: fixture.uri)
            let batch = body.withUnsafeBufferPointer {
                VendorWires.decode(fixture.vendor, head: head, path: path, body: $0, failure: nil)
            }
            #expect((200..<600).contains(batch.normal.status), "iteration \(iteration)")
            #expect(batch.events.count + batch.refused <= max(batch.eventCount, 1), "iteration \(iteration)")
            #expect(batch.events.allSatisfy { !$0.json.isEmpty }, "iteration \(iteration)")
        }
    }
}
