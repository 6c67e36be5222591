import CZlib

/// Why zlib refused to compress or decompress. `code` is zlib's return code (`Z_DATA_ERROR` = -3, …).
enum GzipError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The compression level is outside zlib's -1…9.
    case invalidLevel(Int32)
    /// zlib failed; `message` is zlib's own text when it gave one.
    case zlib(code: Int32, message: String)
    /// The input ended before the gzip trailer (a cut-off body).
    case truncated
    /// The decompressed data is larger than the caller's limit (a compression bomb or a wrong limit).
    case tooLarge(limit: Int)

    var description: String {
        switch self {
        case .invalidLevel(let level):
            return "gzip level \(level) is invalid: use -1 (zlib's default) or 0–9"
        case .zlib(let code, let message):
            return "zlib error \(code): \(message)"
        case .truncated:
            return "gzip data is truncated: the stream ended before its trailer"
        case .tooLarge(let limit):
            return "gzip data inflates to more than \(limit) bytes; raise the limit if this is expected"
        }
    }
}

/// gzip framing (RFC 1952) through zlib, for request bodies (SPEC W1: bodies of 1400 bytes or more are sent
/// with `Content-Encoding: gzip`).
///
/// ```swift
/// let body = try Gzip.compress(json)          // then set `Content-Encoding: gzip`
/// ```
enum Gzip {
    /// windowBits 15 (32 KiB window) + 16 asks zlib for a gzip header and trailer instead of zlib's own.
    private static let gzipWindowBits: Int32 = 15 + 16
    /// zlib's default memLevel (`MAX_MEM_LEVEL` is 9; `deflateInit` uses 8).
    private static let memLevel: Int32 = 8
    /// zlib hands its buffers' lengths around as `uInt`: feed larger inputs in slices.
    private static let maxChunk = Int(UInt32.max)

    /// Compresses `bytes` into one gzip member. `level` 1 is fastest, 9 smallest, 6 zlib's usual balance.
    static func compress(_ bytes: [UInt8], level: Int32 = 6) throws -> [UInt8] {
        guard level == Z_DEFAULT_COMPRESSION || (0...9).contains(level) else { throw GzipError.invalidLevel(level) }
        var stream = z_stream()
        // deflateInit2 is a C macro: call the function it expands to, with the version and size checks it adds.
        var rc = deflateInit2_(&stream, level, Z_DEFLATED, gzipWindowBits, memLevel, Z_DEFAULT_STRATEGY,
                               ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        guard rc == Z_OK else { throw error(rc, stream) }
        defer { deflateEnd(&stream) }

        // deflateBound is exact enough that one Z_FINISH pass fits; the loop below still grows if it does not.
        // deflateBound makes one Z_FINISH pass fit; the loop still grows the buffer if it ever does not.
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(bytes.count))) + 64)
        var produced = 0
        var input = bytes
        rc = input.withUnsafeMutableBufferPointer { inBuffer -> Int32 in
            var consumed = 0
            while true {
                let inChunk = min(inBuffer.count - consumed, maxChunk)
                let isLast = consumed + inChunk == inBuffer.count
                stream.next_in = inBuffer.baseAddress.map { $0 + consumed }
                stream.avail_in = uInt(inChunk)
                repeat {
                    if produced == output.count { output.append(contentsOf: repeatElement(0, count: max(4096, output.count / 2))) }
                    let room = min(output.count - produced, maxChunk)
                    let status = output.withUnsafeMutableBufferPointer { outBuffer -> Int32 in
                        stream.next_out = outBuffer.baseAddress.map { $0 + produced }
                        stream.avail_out = uInt(room)
                        return deflate(&stream, isLast ? Z_FINISH : Z_NO_FLUSH)
                    }
                    produced += room - Int(stream.avail_out)
                    if status == Z_STREAM_END { return Z_STREAM_END }
                    // Z_BUF_ERROR only means "no progress possible without more room or input".
                    guard status == Z_OK || status == Z_BUF_ERROR else { return status }
                } while stream.avail_out == 0
                // Output room was left, so deflate took all of this slice.
                consumed += inChunk - Int(stream.avail_in)
                // With Z_FINISH and room left deflate must have ended the stream; never spin if it did not.
                if isLast { return Z_STREAM_ERROR }
            }
        }
        guard rc == Z_STREAM_END else { throw error(rc, stream) }
        output.removeSubrange(produced...)
        return output
    }

    /// Decompresses gzip data (every concatenated member). For tests and tools; `limit` bounds the output.
    static func decompress(_ bytes: [UInt8], limit: Int = 64 << 20) throws -> [UInt8] {
        var stream = z_stream()
        var rc = inflateInit2_(&stream, gzipWindowBits, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        guard rc == Z_OK else { throw error(rc, stream) }
        defer { inflateEnd(&stream) }

        var output = [UInt8](repeating: 0, count: max(1024, min(limit + 1, bytes.count * 4)))
        var produced = 0
        var overLimit = false
        var input = bytes
        rc = input.withUnsafeMutableBufferPointer { inBuffer -> Int32 in
            var consumed = 0
            while consumed < inBuffer.count {
                let inChunk = min(inBuffer.count - consumed, maxChunk)
                stream.next_in = inBuffer.baseAddress.map { $0 + consumed }
                stream.avail_in = uInt(inChunk)
                var status = Z_OK
                repeat {
                    if produced == output.count {
                        // One byte beyond the limit is enough to know the limit is exceeded.
                        let grow = min(max(4096, output.count), limit + 1 - output.count)
                        guard grow > 0 else { overLimit = true; return Z_OK }
                        output.append(contentsOf: repeatElement(0, count: grow))
                    }
                    let room = min(output.count - produced, maxChunk)
                    status = output.withUnsafeMutableBufferPointer { outBuffer -> Int32 in
                        stream.next_out = outBuffer.baseAddress.map { $0 + produced }
                        stream.avail_out = uInt(room)
                        return inflate(&stream, Z_NO_FLUSH)
                    }
                    produced += room - Int(stream.avail_out)
                    guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else { return status }
                } while stream.avail_out == 0 && status != Z_STREAM_END
                consumed += inChunk - Int(stream.avail_in)
                if status == Z_STREAM_END {
                    // Another gzip member may follow (RFC 1952 allows concatenation).
                    guard consumed < inBuffer.count else { return Z_STREAM_END }
                    let reset = inflateReset(&stream)
                    guard reset == Z_OK else { return reset }
                }
            }
            // The input ran out before the end of a member.
            return Z_BUF_ERROR
        }
        if overLimit || produced > limit { throw GzipError.tooLarge(limit: limit) }
        if rc == Z_BUF_ERROR { throw GzipError.truncated }
        guard rc == Z_STREAM_END else { throw error(rc, stream) }
        output.removeSubrange(produced...)
        return output
    }

    private static func error(_ code: Int32, _ stream: z_stream) -> GzipError {
        let message = stream.msg.map { String(cString: $0) } ?? String(cString: zError(code))
        return .zlib(code: code, message: message)
    }
}
