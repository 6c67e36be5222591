import CFastGzip

/// How request bodies of 1400 bytes and more are gzip-compressed (SPEC W1). Both give a standard gzip member
/// (`Content-Encoding: gzip`) that any server inflates.
///
/// ```swift
/// configuration.bodyCompression = .zlib(level: 6)   // smaller bodies, more CPU per batch
/// ```
public enum BodyCompression: Sendable, Equatable {
    /// Outbox's own compressor (the default): greedy LZ77 with deflate's fixed Huffman codes, in one pass with a
    /// small table. It costs the loop thread the least time per batch, and writes more bytes than compressors that
    /// build Huffman codes per block (zlib, libdeflate): the default for that, `zlib` the choice for metered links.
    /// BENCHMARKS.md has the figures, and why libdeflate did not replace it.
    case fast
    /// zlib, level 1 (fastest) to 9 (smallest).
    case zlib(level: Int)

    /// `fast` or `zlib:LEVEL` with LEVEL 1–9 (the command line's and the benchmark's spelling); nil otherwise.
    public init?(argument: String) {
        if argument == "fast" {
            self = .fast
        } else if argument.hasPrefix("zlib:"), let level = Int(argument.dropFirst(5)), (1...9).contains(level) {
            self = .zlib(level: level)
        } else {
            return nil
        }
    }
}

/// The fast compressor's state (a 16 KB hash table and the code tables, ~19 KB in all), kept for many bodies. Not
/// thread-safe: one owner (the delivery driver on the loop thread).
final class FastGzip {
    private let state: OpaquePointer

    /// Nil when the tables cannot be allocated.
    init?() {
        guard let state = outbox_fast_gzip_new() else { return nil }
        self.state = state
    }

    deinit { outbox_fast_gzip_free(state) }

    /// One gzip member holding `bytes`; nil only for inputs of 4 GiB or more.
    func compress(_ bytes: [UInt8]) -> [UInt8]? {
        let bound = outbox_fast_gzip_bound(bytes.count)
        guard bound > 0 else { return nil }
        let output = bytes.withUnsafeBufferPointer { input in
            [UInt8](unsafeUninitializedCapacity: bound) { output, count in
                // An empty array may have no base address: compress from a dummy byte (length 0 reads nothing).
                var empty: UInt8 = 0
                count = withUnsafePointer(to: &empty) { dummy in
                    output.baseAddress.map { outbox_fast_gzip_compress(state, input.baseAddress ?? dummy, input.count, $0) } ?? 0
                }
            }
        }
        // A member is at least 20 bytes (header, end of block, trailer): 0 means nothing was written.
        return output.isEmpty ? nil : output
    }
}

/// The compressor a `BodyCompression` names, built once.
enum BodyCompressor {
    case fast(FastGzip)
    case zlib(Deflater)

    /// Nil when the compressor cannot start (out of memory, or a level that `Configuration.validate()` refuses):
    /// bodies then go uncompressed.
    init?(_ choice: BodyCompression) {
        switch choice {
        case .fast:
            guard let fast = FastGzip() else { return nil }
            self = .fast(fast)
        case .zlib(let level):
            guard let level = Int32(exactly: level), let deflater = try? Deflater(level: level) else { return nil }
            self = .zlib(deflater)
        }
    }

    func compress(_ bytes: [UInt8]) -> [UInt8]? {
        switch self {
        case .fast(let fast): return fast.compress(bytes)
        case .zlib(let deflater): return try? deflater.compress(bytes)
        }
    }
}
