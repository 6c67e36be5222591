import Foundation
import Testing
import CFastGzip
import CZlib
import OutboxTestSupport
@testable import Outbox

/// SPEC W1: the default body compressor (`BodyCompression.fast`, Sources/CFastGzip) writes gzip that zlib's
/// inflate reads back byte for byte, whatever the input: every small length, incompressible bytes, runs, matches
/// at the window's edge, and bodies that follow a larger one through the same (never cleared) hash table.
struct FastGzipTests {
    /// Compresses, checks the bound and the magic, inflates with zlib; returns whether the bytes came back.
    @discardableResult
    private func roundTrip(_ compressor: FastGzip, _ input: [UInt8], _ context: Comment = "",
                           sourceLocation: SourceLocation = #_sourceLocation) throws -> Bool {
        let compressed = try #require(compressor.compress(input), context, sourceLocation: sourceLocation)
        #expect(compressed.count <= input.count + input.count / 8 + 64, context, sourceLocation: sourceLocation)
        #expect(Array(compressed.prefix(3)) == [0x1F, 0x8B, 0x08], context, sourceLocation: sourceLocation)
        let inflated = try Gzip.decompress(compressed, limit: input.count + 1)
        #expect(inflated == input, context, sourceLocation: sourceLocation)
        return inflated == input
    }

    /// An analytics batch as the encoder writes it: repeated keys and device block, varying ids and values.
    private func batch(logs: Int, random: inout SplitMix64) -> [UInt8] {
        var json = #"{"sentAt":"2026-11-22T07:33:46.123Z","logs":["#
        for index in 0..<logs {
            let id = (0..<4).map { _ in String(random.next() & 0xFFFF_FFFF, radix: 16) }.joined(separator: "-")
            json += index == 0 ? "" : ","
            json += #"{"type":"event","id":"\#(id)","timestamp":"2026-11-22T07:33:\#(10 + index % 50).\#(index % 1000)Z","#
            json += #""device":{"sdkName":"outbox.linux","osName":"Debian GNU/Linux","locale":"en_US"},"name":"song_played","#
            json += #""typedProperties":[{"type":"long","name":"i","value":\#(random.next() % 100_000)}]}"#
        }
        return Array((json + "]}").utf8)
    }

    @Test func everyLengthUpTo600RoundTrips() throws {
        let compressor = try #require(FastGzip())
        var random = SplitMix64(seed: 1)
        let text = Array(String(repeating: #"{"name":"tap","k":"v"},"#, count: 40).utf8)
        for length in 0...600 {
            try roundTrip(compressor, Array(text.prefix(length)))
            try roundTrip(compressor, (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        }
    }

    @Test func incompressibleAndHighBytesStayWithinTheBound() throws {
        let compressor = try #require(FastGzip())
        var random = SplitMix64(seed: 2)
        // Bytes ≥ 144 take 9 bits as literals: the worst case the bound allows for.
        try roundTrip(compressor, (0..<200_000).map { _ in UInt8.random(in: 144...255, using: &random) })
        try roundTrip(compressor, (0..<300_000).map { _ in UInt8(truncatingIfNeeded: random.next()) })
        try roundTrip(compressor, (0..<65_536).map { UInt8(truncatingIfNeeded: $0) })
    }

    @Test func runsAndLongestMatchesRoundTrip() throws {
        let compressor = try #require(FastGzip())
        // Distance 1, lengths of 258 (symbol 285) and every remainder of a run.
        for length in [257, 258, 259, 260, 516, 1000, 100_000] {
            try roundTrip(compressor, [UInt8](repeating: 0x78, count: length))
        }
        let compressed = try #require(compressor.compress([UInt8](repeating: 0, count: 100_000)))
        #expect(compressed.count < 1000)
    }

    @Test func matchesAtTheWindowsEdgeRoundTrip() throws {
        let compressor = try #require(FastGzip())
        var random = SplitMix64(seed: 3)
        let block = (0..<300).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        // The same 300 bytes again at distances 32 767, 32 768 (the farthest deflate allows) and 32 769 (too far).
        for distance in [32_767, 32_768, 32_769, 40_000] {
            var input = block
            input += (0..<(distance - block.count)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            input += block
            try roundTrip(compressor, input)
        }
    }

    @Test func analyticsBatchesShrinkAndSurviveAReusedTable() throws {
        let compressor = try #require(FastGzip())
        var random = SplitMix64(seed: 4)
        // Large, then small, then empty, then large again: slots left by one body are only candidates for the next.
        for logs in [500, 3, 0, 50, 1, 500] {
            let body = batch(logs: logs, random: &random)
            try roundTrip(compressor, body)
            if logs >= 50 {
                let compressed = try #require(compressor.compress(body))
                #expect(compressed.count * 4 < body.count, "\(logs) logs: \(compressed.count) of \(body.count) bytes")
            }
        }
        try roundTrip(compressor, [])
    }

    /// Random inputs built from noise over small and large alphabets and copies of earlier stretches (near, at
    /// the window's edge, short, around 258 bytes), through one compressor. `make fuzz` runs it for longer:
    /// `OUTBOX_FUZZ_ITERATIONS` (default 200) inputs from `OUTBOX_FUZZ_SEED` (default 5); a failure names the
    /// iteration, so `OUTBOX_FUZZ_SEED=<seed + iteration> OUTBOX_FUZZ_ITERATIONS=1` replays it.
    @Test func randomMixesOfRepeatsAndNoiseRoundTrip() throws {
        let compressor = try #require(FastGzip())
        let environment = ProcessInfo.processInfo.environment
        let iterations = environment["OUTBOX_FUZZ_ITERATIONS"].flatMap { Int($0) } ?? 200
        let seed = environment["OUTBOX_FUZZ_SEED"].flatMap { UInt64($0) } ?? 5
        for iteration in 0..<iterations {
            var random = SplitMix64(seed: seed &+ UInt64(iteration))
            let alphabet = UInt64([2, 8, 64, 256][Int(random.next() % 4)])
            var input: [UInt8] = []
            let target = Int(random.next() % 70_000)
            while input.count < target {
                if !input.isEmpty, random.next() % 2 == 0 {
                    // Copy an earlier stretch: anywhere, or from about the window's size back.
                    let far = input.count > 32_800 && random.next() % 4 == 0
                    let start = far ? input.count - 32_760 - Int(random.next() % 16) : Int(random.next() % UInt64(input.count))
                    let wanted = random.next() % 3 == 0 ? 250 + Int(random.next() % 20) : Int(random.next() % 600) + 1
                    let length = min(wanted, input.count - start)
                    input += input[start..<(start + length)]
                } else {
                    input += (0..<Int(random.next() % 40)).map { _ in UInt8(truncatingIfNeeded: random.next() % alphabet) }
                }
            }
            guard try roundTrip(compressor, input, "seed \(seed), iteration \(iteration): \(input.count) bytes") else { return }
        }
    }

    // SPEC W1: the trailer's CRC-32 (folded with carry-less multiplication where the CPU has it) equals zlib's:
    // every length up to 3000 (short inputs, which zlib computes alone, and every remainder after the 16-byte
    // blocks), at unaligned starts, from a fresh and from a running CRC, and over 1 MiB.
    @Test func crc32MatchesZlibs() {
        var random = SplitMix64(seed: 0xC3C3)
        let bytes = (0..<(1 << 20)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        var mismatches: [String] = []
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            for length in 0...3000 {
                for start in 0..<3 {
                    for initial: UInt32 in [0, 0x1234_5678] {
                        let ours = outbox_crc32(initial, base + start, length)
                        let zlibs = UInt32(crc32_z(UInt(initial), base + start, length))
                        if ours != zlibs { mismatches.append("length \(length), start \(start), initial \(initial)") }
                    }
                }
            }
            if outbox_crc32(0, base, buffer.count) != UInt32(crc32_z(0, base, buffer.count)) { mismatches.append("1 MiB") }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }

    // The gzip trailer holds the CRC-32 and the length; the system's gunzip checks both (see TransportTests).
    @Test func trailerHoldsTheLength() throws {
        let compressor = try #require(FastGzip())
        let input = Array(String(repeating: "outbox ", count: 1000).utf8)
        let compressed = try #require(compressor.compress(input))
        let length = compressed.suffix(4).reversed().reduce(0) { $0 << 8 | Int($1) }
        #expect(length == input.count)
    }

    @Test func bodyCompressionChoicesAndTheirBounds() throws {
        let body = Array(String(repeating: #"{"name":"a"},"#, count: 300).utf8)
        for choice in [BodyCompression.fast, .zlib(level: 1), .zlib(level: 9)] {
            let compressor = try #require(BodyCompressor(choice))
            #expect(try Gzip.decompress(try #require(compressor.compress(body))) == body)
        }
        #expect(BodyCompressor(.zlib(level: 10)) == nil)
        // The command line's spelling (`outbox emit --compression`, `outbox-bench delivery`).
        #expect(BodyCompression(argument: "fast") == .fast)
        #expect(BodyCompression(argument: "zlib:1") == .zlib(level: 1))
        #expect(BodyCompression(argument: "zlib:9") == .zlib(level: 9))
        for refused in ["zlib:0", "zlib:10", "zlib:", "zlib", "lz4", "Fast", ""] {
            #expect(BodyCompression(argument: refused) == nil, "\(refused)")
        }
        var configuration = Configuration(storePath: "/tmp/x.outbox")
        configuration.bodyCompression = .zlib(level: 0)
        #expect(throws: OutboxError.self) { try configuration.validate() }
        do {
            try configuration.validate()
        } catch {
            #expect("\(error)".contains("bodyCompression"))
        }
        configuration.bodyCompression = .zlib(level: 9)
        try configuration.validate()
    }
}
