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

/// gzip framing (RFC 1952) through zlib: request bodies when `Configuration.bodyCompression` is `.zlib(level:)`
/// (SPEC W1; the default `.fast` is `FastGzip`), and inflating in tests and tools.
///
/// ```swift
/// let body = try Gzip.compress(json)          // then set `Content-Encoding: gzip`
/// ```
enum Gzip {
    /// windowBits 15 (32 KiB window) + 16 asks zlib for a gzip header and trailer instead of zlib's own.
    fileprivate static let gzipWindowBits: Int32 = 15 + 16
    /// zlib's default memLevel (`MAX_MEM_LEVEL` is 9; `deflateInit` uses 8).
    fileprivate static let memLevel: Int32 = 8
    /// zlib hands its buffers' lengths around as `uInt`: feed larger inputs in slices.
    fileprivate static let maxChunk = Int(UInt32.max)

    /// Compresses `bytes` into one gzip member. `level` 1 is fastest, 9 smallest, 6 zlib's usual balance.
    static func compress(_ bytes: [UInt8], level: Int32 = 6) throws -> [UInt8] {
        try Deflater(level: level).compress(bytes)
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

    fileprivate static func error(_ code: Int32, _ stream: z_stream) -> GzipError {
        let message = stream.msg.map { String(cString: $0) } ?? String(cString: zError(code))
        return .zlib(code: code, message: message)
    }
}

/// A gzip compressor kept for many bodies: `deflateInit` allocates and clears about 270 KB of tables, which for a
/// batch of 50 logs cost as much as compressing it; `deflateReset` keeps them. Not thread-safe: one owner (the
/// delivery driver on the loop thread).
final class Deflater {
    private var stream = z_stream()
    private var ready = false
    private let level: Int32

    init(level: Int32) throws {
        guard level == Z_DEFAULT_COMPRESSION || (0...9).contains(level) else { throw GzipError.invalidLevel(level) }
        self.level = level
        // deflateInit2 is a C macro: call the function it expands to, with the version and size checks it adds.
        let rc = deflateInit2_(&stream, level, Z_DEFLATED, Gzip.gzipWindowBits, Gzip.memLevel, Z_DEFAULT_STRATEGY,
                               ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        guard rc == Z_OK else { throw Gzip.error(rc, stream) }
        ready = true
    }

    deinit {
        if ready { deflateEnd(&stream) }
    }

    /// One gzip member holding `bytes`. The input is read in place and the output written once, without clearing.
    func compress(_ bytes: [UInt8]) throws -> [UInt8] {
        // deflateBound makes one Z_FINISH pass fit; if it ever does not, start over with twice the room.
        var capacity = Int(deflateBound(&stream, uLong(bytes.count))) + 64
        for _ in 0..<4 {
            let reset = deflateReset(&stream)
            guard reset == Z_OK else { throw Gzip.error(reset, stream) }
            var status = Z_OK
            let output = bytes.withUnsafeBufferPointer { input in
                [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
                    count = 0
                    status = deflateAll(input, into: buffer, produced: &count)
                }
            }
            if status == Z_STREAM_END { return output }
            guard status == Z_BUF_ERROR else { throw Gzip.error(status, stream) }
            capacity *= 2
        }
        throw GzipError.zlib(code: Z_BUF_ERROR, message: "deflate needed more room than deflateBound promised")
    }

    /// Z_STREAM_END once the whole input is in `buffer`; Z_BUF_ERROR when `buffer` is too small; else zlib's error.
    private func deflateAll(_ input: UnsafeBufferPointer<UInt8>, into buffer: UnsafeMutableBufferPointer<UInt8>,
                            produced: inout Int) -> Int32 {
        var consumed = 0
        while true {
            let inChunk = min(input.count - consumed, Gzip.maxChunk)
            let isLast = consumed + inChunk == input.count
            // zlib's next_in is not const-qualified here (no ZLIB_CONST); deflate only reads through it.
            stream.next_in = input.baseAddress.map { UnsafeMutablePointer(mutating: $0) + consumed }
            stream.avail_in = uInt(inChunk)
            let room = min(buffer.count - produced, Gzip.maxChunk)
            stream.next_out = buffer.baseAddress.map { $0 + produced }
            stream.avail_out = uInt(room)
            let status = deflate(&stream, isLast ? Z_FINISH : Z_NO_FLUSH)
            produced += room - Int(stream.avail_out)
            consumed += inChunk - Int(stream.avail_in)
            if status == Z_STREAM_END { return Z_STREAM_END }
            guard status == Z_OK || status == Z_BUF_ERROR else { return status }
            // Out of room, or (never expected) Z_FINISH left room without ending the stream: grow and retry.
            if stream.avail_out == 0 || isLast { return Z_BUF_ERROR }
        }
    }
}
