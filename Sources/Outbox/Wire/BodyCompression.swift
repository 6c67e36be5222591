import CFastGzip
import CLibDeflate
import Foundation

/// How request bodies of 1400 bytes and more are gzip-compressed (SPEC W1). Both give a standard gzip member
/// (`Content-Encoding: gzip`) that any server inflates.
///
/// ```swift
/// configuration.bodyCompression = .zlib(level: 6)   // smaller bodies, more CPU per batch
/// ```
public enum BodyCompression: Sendable, Equatable {
    /// Outbox's own compressor (the default): greedy LZ77 with deflate's fixed Huffman codes. On batches of
    /// analytics JSON it runs about 3× as fast as zlib's level 1 and writes ~25 % more bytes (BENCHMARKS.md).
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

/// The fast compressor's state (a 128 KB hash table and the code tables), kept for many bodies. Not thread-safe:
/// one owner (the delivery driver on the loop thread).
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

/// libdeflate's gzip compressor at one level, kept for many bodies (its state is allocated once). Not thread-safe:
/// one owner (the delivery driver on the loop thread).
final class LibDeflateGzip {
    private let compressor: OpaquePointer

    /// Nil when the level is outside libdeflate's 0–12 or the state cannot be allocated.
    init?(level: Int) {
        guard (0...12).contains(level), let compressor = libdeflate_alloc_compressor(Int32(level)) else { return nil }
        self.compressor = compressor
    }

    deinit { libdeflate_free_compressor(compressor) }

    /// One gzip member holding `bytes`; nil only if libdeflate wrote nothing (never within its bound).
    func compress(_ bytes: [UInt8]) -> [UInt8]? {
        let bound = libdeflate_gzip_compress_bound(compressor, bytes.count)
        let output = bytes.withUnsafeBufferPointer { input in
            [UInt8](unsafeUninitializedCapacity: bound) { output, count in
                count = libdeflate_gzip_compress(compressor, input.baseAddress, input.count, output.baseAddress, bound)
            }
        }
        return output.isEmpty ? nil : output
    }
}

/// The compressor a `BodyCompression` names, built once.
enum BodyCompressor {
    case fast(FastGzip)
    case zlib(Deflater)
    case libdeflate(LibDeflateGzip)

    /// Nil when the compressor cannot start (out of memory, or a level that `Configuration.validate()` refuses):
    /// bodies then go uncompressed.
    init?(_ choice: BodyCompression) {
        switch choice {
        case .fast:
            // EXPERIMENT (branch deflate): `OUTBOX_BENCH_LIBDEFLATE_LEVEL=N` makes `.fast` libdeflate at level N, for
            // `outbox-bench delivery` to compare the two in one sitting. Not to be merged as is.
            if let level = ProcessInfo.processInfo.environment["OUTBOX_BENCH_LIBDEFLATE_LEVEL"].flatMap({ Int($0) }) {
                guard let libdeflate = LibDeflateGzip(level: level) else { return nil }
                self = .libdeflate(libdeflate)
                return
            }
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
        case .libdeflate(let libdeflate): return libdeflate.compress(bytes)
        }
    }
}
