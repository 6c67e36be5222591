import NIOCore
import NIOHTTP1

/// Sits between the HTTP decoder and the decompressor: counts the body bytes on the wire, and once a
/// request is over the body limit (by `Content-Length` or by counting) reports `BodyTooLarge` and drops
/// the rest of that body, so neither memory nor the decompressor sees it.
final class BodyLimitGuard: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    struct BodyTooLarge: Error {
        var limit: Int
    }

    private let limit: Int
    private(set) var wireBytes = 0
    private var discarding = false

    init(limit: Int) {
        self.limit = limit
    }

    /// Drops the rest of the current body (the handler already knows the answer: 413 or 400).
    func discardRestOfBody() {
        discarding = true
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            wireBytes = 0
            discarding = false
            context.fireChannelRead(data)
            if let length = head.headers.first(name: "content-length").flatMap(Int.init), length > limit {
                discarding = true
                context.fireErrorCaught(BodyTooLarge(limit: limit))
            }
        case .body(let part):
            wireBytes += part.readableBytes
            guard !discarding else { return }
            if wireBytes > limit {
                discarding = true
                context.fireErrorCaught(BodyTooLarge(limit: limit))
                return
            }
            context.fireChannelRead(data)
        case .end:
            context.fireChannelRead(data)
        }
    }
}
