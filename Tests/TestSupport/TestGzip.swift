import CZlib

/// gzip (RFC 1952) for test data, through zlib: independent of the code under test (Outbox's `Gzip` and
/// `FastGzip`, the mock's decompressor), so that each can be checked against it.
///
/// ```swift
/// let body = TestGzip.compress(json)
/// #expect(try TestGzip.decompress(body) == json)
/// ```
public enum TestGzip {
    public struct Failure: Error, Equatable {
        public var code: Int32
    }

    /// The gzip stream of `data` at zlib's `level` (0–9).
    public static func compress(_ data: [UInt8], level: Int32 = 6) -> [UInt8] {
        var stream = z_stream()
        guard deflateInit2_(&stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                            Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return [] }
        defer { deflateEnd(&stream) }
        var input = data
        var out = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(data.count))) + 32)
        let produced: Int = input.withUnsafeMutableBufferPointer { inBuf in
            out.withUnsafeMutableBufferPointer { outBuf in
                stream.next_in = inBuf.baseAddress
                stream.avail_in = UInt32(inBuf.count)
                stream.next_out = outBuf.baseAddress
                stream.avail_out = UInt32(outBuf.count)
                _ = deflate(&stream, Z_FINISH)
                return outBuf.count - Int(stream.avail_out)
            }
        }
        return Array(out[0..<produced])
    }

    /// The bytes of one gzip stream; throws on a damaged or truncated one.
    public static func decompress(_ data: [UInt8]) throws -> [UInt8] {
        var stream = z_stream()
        guard inflateInit2_(&stream, 15 + 16, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw Failure(code: Z_MEM_ERROR)
        }
        defer { inflateEnd(&stream) }
        var input = data
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var status = Z_OK
        try input.withUnsafeMutableBufferPointer { inBuf in
            stream.next_in = inBuf.baseAddress
            stream.avail_in = UInt32(inBuf.count)
            while status != Z_STREAM_END {
                let produced: Int = chunk.withUnsafeMutableBufferPointer { outBuf in
                    stream.next_out = outBuf.baseAddress
                    stream.avail_out = UInt32(outBuf.count)
                    status = inflate(&stream, Z_NO_FLUSH)
                    return outBuf.count - Int(stream.avail_out)
                }
                result.append(contentsOf: chunk[0..<produced])
                guard status == Z_OK || status == Z_STREAM_END else { throw Failure(code: status) }
                // No progress and not finished: the input ended early.
                if produced == 0, stream.avail_in == 0, status != Z_STREAM_END { throw Failure(code: Z_BUF_ERROR) }
            }
        }
        return result
    }
}
