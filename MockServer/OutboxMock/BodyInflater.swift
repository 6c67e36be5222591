import CLibDeflate
import CZlib
import NIOCore
import NIOHTTP1
import NIOHTTPCompression

/// Sits between the wire-size guard and the handler: inflates `gzip` and `deflate` request bodies, bounded by
/// `limit` against bombs (SPEC M1, M10). It replaces swift-nio-extras' streaming decompressor, which set up
/// a zlib stream (and its 32 KiB window) for every request and inflated into 16 KiB pieces.
///
/// A gzip body is held until its end, then inflated in one call by libdeflate into a buffer of the size
/// gzip's trailer states (ISIZE). ISIZE is only a claim — it is the size modulo 2³², and a hostile client
/// can lie — so the one-shot path is taken only when that size is within `limit`, and anything it cannot
/// finish (a lying ISIZE, a zlib stream under a gzip label, bad data) goes to a streaming zlib inflate
/// that stops at `limit`, as the old decompressor did, and that names the error. `deflate` bodies (which
/// carry no size) always take the streaming path.
///
/// Errors are swift-nio-extras' own types, so the handler's answers (413 for a bomb, 400 for a broken
/// stream) are unchanged. While a body is held, each part still goes on as an empty body part, so that a
/// read rate (SPEC M8 `kbps`) keeps pausing the socket as the compressed bytes arrive.
final class BodyInflater: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    private enum Encoding { case gzip, deflate }

    private let limit: Int
    private var encoding: Encoding?
    private var compressed: ByteBuffer?
    /// Set when the guard refused the body: nothing more to inflate for this request.
    private var abandoned = false
    private var decompressor: OpaquePointer?
    /// The one-shot path's output, reused from request to request: a fresh buffer each time came from memory
    /// the allocator had just given back to the kernel, and paid its page faults again (SPEC M10). The handler
    /// lets go of it once the request is answered, so the next request writes in place.
    private var output: ByteBuffer?
    /// While the inflated body is passed on: the gzip body it came from, when that is one whole member whose
    /// stated size is the body's (what `StoredBody` keeps and inflates again).
    private(set) var gzipBody: ByteBuffer?

    init(limit: Int) {
        self.limit = limit
    }

    deinit {
        if let decompressor { libdeflate_free_decompressor(decompressor) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            abandoned = false
            switch head.headers.first(name: "content-encoding")?.lowercased() {
            case "gzip"?: encoding = .gzip
            case "deflate"?: encoding = .deflate
            default: encoding = nil
            }
            if encoding != nil {
                if compressed == nil {
                    let expected = head.headers.first(name: "content-length").flatMap(Int.init) ?? 0
                    compressed = context.channel.allocator.buffer(capacity: min(max(expected, 0), 65536))
                }
                compressed?.clear()
            }
            context.fireChannelRead(data)
        case .body(var part):
            guard encoding != nil else { return context.fireChannelRead(data) }
            guard !abandoned else { return }
            compressed?.writeBuffer(&part)
            context.fireChannelRead(wrapInboundOut(.body(context.channel.allocator.buffer(capacity: 0))))
        case .end:
            if let encoding, !abandoned, var input = compressed {
                compressed = nil  // unique while inflating: no copy on write
                do {
                    let (output, whole) = try inflate(input, encoding, allocator: context.channel.allocator)
                    // The handler keeps what it needs of the gzip body while it reads this part.
                    if whole { gzipBody = input }
                    context.fireChannelRead(wrapInboundOut(.body(output)))
                    gzipBody = nil
                } catch {
                    context.fireErrorCaught(error)
                }
                input.clear()
                // Large bodies are not kept for the next request of the connection.
                if input.capacity <= 1 << 20 { compressed = input }
            }
            encoding = nil
            context.fireChannelRead(data)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        // The guard refused the body (413): inflating what came before the cut would only waste work.
        if error is BodyLimitGuard.BodyTooLarge { abandoned = true }
        context.fireErrorCaught(error)
    }

    // MARK: - Inflating

    /// The inflated body, and whether it came from one whole gzip member of the size it states.
    private func inflate(_ input: ByteBuffer, _ encoding: Encoding, allocator: ByteBufferAllocator) throws
        -> (ByteBuffer, Bool) {
        if encoding == .gzip, let stated = Self.statedSize(input), stated <= limit,
           let output = oneShot(input, size: stated, allocator: allocator) {
            return (output, true)
        }
        return (try Self.streaming(input, limit: limit, allocator: allocator), false)
    }

    /// gzip's ISIZE (the last four bytes, little-endian) when the body starts like a gzip member.
    private static func statedSize(_ input: ByteBuffer) -> Int? {
        let n = input.readableBytes
        guard n >= 18, input.getInteger(at: input.readerIndex, as: UInt16.self) == 0x1F8B else { return nil }
        return input.getInteger(at: input.readerIndex + n - 4, endianness: .little, as: UInt32.self).map(Int.init)
    }

    /// libdeflate into a buffer of exactly `size` bytes; nil when the body is not one complete gzip member of
    /// that size (the streaming path then decides what it is).
    private func oneShot(_ input: ByteBuffer, size: Int, allocator: ByteBufferAllocator) -> ByteBuffer? {
        if decompressor == nil { decompressor = libdeflate_alloc_decompressor() }
        guard let decompressor else { return nil }
        var output = self.output ?? allocator.buffer(capacity: max(size, 1))
        self.output = nil  // unique while writing, unless a pipelined request still holds it (then it is copied)
        output.clear()
        var ok = false
        input.withUnsafeReadableBytes { src in
            _ = output.writeWithUnsafeMutableBytes(minimumWritableBytes: size) { dst in
                var consumed = 0
                var written = 0
                let result = libdeflate_gzip_decompress_ex(decompressor, src.baseAddress, src.count,
                                                           dst.baseAddress, size, &consumed, &written)
                // Trailing bytes after the member are refused by the streaming path, as before.
                ok = result == LIBDEFLATE_SUCCESS && consumed == src.count && written == size
                return ok ? written : 0
            }
        }
        if output.capacity <= Self.maxKept { self.output = output }
        return ok ? output : nil
    }

    /// Larger buffers (a rare big batch) are not kept for the connection's next request.
    private static let maxKept = 1 << 20

    /// zlib with gzip/zlib header detection, as swift-nio-extras' decompressor: stops with `.limit` once the
    /// output passes `limit`, and refuses broken, truncated or trailing data.
    static func streaming(_ input: ByteBuffer, limit: Int, allocator: ByteBufferAllocator) throws -> ByteBuffer {
        var stream = z_stream()
        // 15: the largest window; +32: detect a gzip or zlib header.
        let rc = inflateInit2_(&stream, 15 + 32, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size))
        guard rc == Z_OK else { throw NIOHTTPDecompression.DecompressionError.initializationError(Int(rc)) }
        defer { inflateEnd(&stream) }
        var output = allocator.buffer(capacity: min(max(input.readableBytes * 4, 4096), limit + 1))
        var status = Z_OK
        var leftOver = 0
        try input.withUnsafeReadableBytes { src in
            guard let base = src.baseAddress, src.count > 0 else { return }
            stream.next_in = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: Bytef.self))
            stream.avail_in = UInt32(src.count)
            while status != Z_STREAM_END {
                let before = stream.avail_in
                var progress = 0
                try output.writeWithUnsafeMutableBytes(minimumWritableBytes: 16384) { dst in
                    stream.next_out = dst.baseAddress?.assumingMemoryBound(to: Bytef.self)
                    stream.avail_out = UInt32(dst.count)
                    status = CZlib.inflate(&stream, Z_NO_FLUSH)
                    progress = dst.count - Int(stream.avail_out)
                    guard status == Z_OK || status == Z_STREAM_END || (status == Z_BUF_ERROR && progress == 0) else {
                        throw NIOHTTPDecompression.DecompressionError.inflationError(Int(status))
                    }
                    return progress
                }
                if output.readableBytes > limit { throw NIOHTTPDecompression.DecompressionError.limit }
                // No input left and no output made: the stream stops short of its end.
                if status != Z_STREAM_END, progress == 0, stream.avail_in == before, stream.avail_out > 0 { break }
            }
            leftOver = Int(stream.avail_in)
        }
        guard status == Z_STREAM_END else { throw NIOHTTPDecompression.ExtraDecompressionError.truncatedData }
        if leftOver > 0 { throw NIOHTTPDecompression.ExtraDecompressionError.invalidTrailingData }
        return output
    }
}
