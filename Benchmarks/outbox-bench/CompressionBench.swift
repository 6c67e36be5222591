import CFastGzip
import CLibDeflate
import Foundation
import Outbox
import OutboxMock

/// `compression [EVENTS] [ROUNDS]`: the request bodies' compressors alone, on the engine's own batch bodies. An engine
/// delivers EVENTS (default 5 000) of `delivery`'s events to the in-process mock; the logs the mock received are put
/// back into bodies of 50 and 500 logs, and each compressor (the hand-written `outbox_fast_gzip`, libdeflate levels
/// 1–6) compresses all of them, in ROUNDS (default 7) rounds that take the compressors in turn. Prints each
/// compressor's output bytes and ns per input byte (median and spread of the rounds).
func benchCompression() throws {
    let events = argumentsList.count > 1 ? Int(argumentsList[1]) ?? 5000 : 5000
    let rounds = argumentsList.count > 2 ? Int(argumentsList[2]) ?? 7 : 7
    let server = try MockServer(configuration: .init(threads: 1))
    try server.start()
    defer { try? server.stop() }
    var configuration = Configuration(storePath: tempStore("compression.outbox"))
    configuration.maxStorageSize = 1 << 30
    configuration.endpoint = server.baseURL
    configuration.appSecret = "bench"
    configuration.batchSize = 500
    let engine = try OutboxEngine(configuration: configuration)
    for index in 0..<events { try engine.trackEvent("bench", properties: properties(index)) }
    _ = waitDelivered(engine, timeout: .seconds(120))
    engine.shutdown()
    let logs = server.uniqueLogs().map(\.json)

    for batchSize in [50, 500] {
        // The engine's body: `sentAt`, then the logs as it wrote them.
        var bodies: [[UInt8]] = []
        var start = 0
        while start + batchSize <= logs.count {
            let joined = logs[start..<(start + batchSize)].joined(separator: ",")
            bodies.append(Array(#"{"sentAt":"2026-11-24T03:00:00.000Z","logs":[\#(joined)]}"#.utf8))
            start += batchSize
        }
        let inputBytes = bodies.reduce(0) { $0 + $1.count }
        var compressors: [(name: String, compress: ([UInt8]) -> Int)] = []
        let fast = outbox_fast_gzip_new()!
        var fastOutput = [UInt8](repeating: 0, count: outbox_fast_gzip_bound(bodies.map(\.count).max() ?? 0))
        compressors.append(("fast", { body in
            body.withUnsafeBufferPointer { input in
                fastOutput.withUnsafeMutableBufferPointer { outbox_fast_gzip_compress(fast, input.baseAddress!, input.count, $0.baseAddress!) }
            }
        }))
        var libdeflates: [OpaquePointer] = []
        for level in 1...6 {
            let compressor = libdeflate_alloc_compressor(Int32(level))!
            libdeflates.append(compressor)
            var output = [UInt8](repeating: 0, count: libdeflate_gzip_compress_bound(compressor, bodies.map(\.count).max() ?? 0))
            compressors.append(("libdeflate:\(level)", { body in
                body.withUnsafeBufferPointer { input in
                    output.withUnsafeMutableBufferPointer {
                        libdeflate_gzip_compress(compressor, input.baseAddress, input.count, $0.baseAddress, $0.count)
                    }
                }
            }))
        }
        var outputBytes = [Int](repeating: 0, count: compressors.count)
        var nsPerByte = [[Double]](repeating: [], count: compressors.count)
        for round in 0...rounds {
            for (index, compressor) in compressors.enumerated() {
                // Each round compresses every body enough times to take about 50 ms at 1 ns/byte.
                let repeats = max(1, 50_000_000 / inputBytes)
                var total = 0
                let before = monoNs()
                for _ in 0..<repeats {
                    for body in bodies { total += compressor.compress(body) }
                }
                let elapsed = monoNs() - before
                outputBytes[index] = total / repeats
                // Round 0 warms the caches and the code up: not counted.
                if round > 0 { nsPerByte[index].append(Double(elapsed) / Double(repeats * inputBytes)) }
            }
        }
        for (index, compressor) in compressors.enumerated() {
            let sorted = nsPerByte[index].sorted()
            print(#"{"bench":"compression","batch_size":\#(batchSize),"bodies":\#(bodies.count),"compressor":"\#(compressor.name)","input_bytes":\#(inputBytes),"output_bytes":\#(outputBytes[index]),"output_vs_fast":\#(String(format: "%.3f", Double(outputBytes[index]) / Double(outputBytes[0]))),"ns_per_byte_median":\#(String(format: "%.3f", sorted[sorted.count / 2])),"ns_per_byte_min":\#(String(format: "%.3f", sorted.first!)),"ns_per_byte_max":\#(String(format: "%.3f", sorted.last!))}"#)
        }
        outbox_fast_gzip_free(fast)
        libdeflates.forEach { libdeflate_free_compressor($0) }
    }
}
