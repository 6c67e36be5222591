import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix

/// One HTTP/1.1 connection: reads requests (already decompressed by swift-nio-extras), answers the
/// control API, and carries out the scenario's verdict on ingestion requests. Responses are written as
/// raw bytes, head and body in one buffer (no HTTP encoder), so that a fault can also write bytes that
/// are not HTTP at all. Requests on one connection are answered in order.
final class ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = ByteBuffer

    private enum BodyFailure {
        case tooLarge(String)
        case badEncoding(String)
    }

    private struct Incoming {
        var head: HTTPRequestHead
        var startNs: UInt64
        var isIngestion: Bool
        var body: ByteBuffer
        var wireBytes = 0
        var failure: BodyFailure?
        /// Holds an in-flight slot (ingestion requests) until answered, faulted or disconnected.
        var holdsSlot: Bool
        /// Ingestion requests: the number and the verdict settled when the head arrived (SPEC M8).
        var headVerdict: HeadVerdict?
        /// The head's size on the wire (request line and headers), for the read rate of `kbps`.
        var headBytes = 0
        /// The body is a buffer handed over whole (the inflater's reused output): not kept as the spare.
        var bodyBorrowed = false
        /// The gzip body the body was inflated from in one piece (kept instead of the JSON when accepted).
        var gzipBody: ByteBuffer?
    }

    private let core: MockCore
    private let guardHandler: BodyLimitGuard
    private let inflater: BodyInflater
    /// The event loop's batcher: answers are written at once and flushed together at the end of the loop's turn.
    private let flushes: FlushBatcher?
    /// The request being read.
    private var current: Incoming?
    /// Whether requests read are processed now, wait behind an owed answer, or are dropped (ConnectionState.swift).
    private var state = ConnectionState<Incoming>()
    private var heldSlots = 0
    /// What the wires read with, reused from request to request (the JSON tape's storage keeps its capacity).
    private var wireContext: WireContext
    /// The body buffer, reused likewise: steady traffic allocates (and page-faults) almost nothing per request.
    private var spareBody: ByteBuffer?
    private var dateCache: (second: Int64, text: String) = (-1, "")
    /// Reading is paused until the read rate (`kbps`) catches up with the bytes received.
    private var readPaused = false

    init(core: MockCore, guardHandler: BodyLimitGuard, inflater: BodyInflater, flushes: FlushBatcher? = nil) {
        self.core = core
        self.guardHandler = guardHandler
        self.inflater = inflater
        self.flushes = flushes
        self.wireContext = WireContext(cutoff: ReportingCutoff(timeZone: core.configuration.reportTimeZone),
                                       appSecret: core.configuration.appSecret)
    }

    // MARK: - Reading

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !state.isFinished else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            let startNs = core.clock.monotonicNs()
            let path = Self.path(of: head.uri)
            let isIngestion = !path.hasPrefix(ControlAPI.prefix)
            var headVerdict: HeadVerdict?
            if isIngestion {
                headVerdict = core.beginRequest(path: path, install: head.headers.first(name: "install-id"))
                heldSlots += 1
            }
            let expected = head.headers.first(name: "content-length").flatMap(Int.init) ?? 0
            var body = spareBody ?? context.channel.allocator.buffer(capacity: min(max(expected, 0), 65536))
            spareBody = nil
            body.clear()
            current = Incoming(head: head, startNs: startNs, isIngestion: isIngestion,
                               body: body, holdsSlot: isIngestion, headVerdict: headVerdict)
            if let headVerdict {
                if headVerdict.dropsBeforeBody, state.isIdle, let request = current {
                    // SPEC M8: close before reading a byte of the body. A pipelined request behind others is
                    // dropped in its turn instead, so the answers before it still go out.
                    current = nil
                    dropBeforeBody(request, context: context)
                    return
                }
                if headVerdict.readKbps != nil { current?.headBytes = Self.wireSize(of: head) }
            }
            if head.headers.first(name: "expect")?.lowercased() == "100-continue", state.mode == .ready {
                if expected <= core.configuration.bodyLimit {
                    context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(
                        string: "HTTP/1.1 100 Continue\r\n\r\n")), promise: nil)
                } else if var request = current {
                    // Answer now (413, or whatever comes first) rather than after a body the client
                    // is waiting for permission to send; the connection then closes.
                    current = nil
                    request.failure = .tooLarge("body larger than \(core.configuration.bodyLimit) bytes")
                    process(request, context: context)
                }
            }
        case .body(var part):
            guard current != nil, current?.failure == nil else { return }
            if current?.body.readableBytes == 0, part.readableBytes > 0 {
                // The first part is taken as it is: an inflated body arrives whole, and copying it is wasted.
                if spareBody == nil, let unused = current?.body, unused.capacity > 0 { spareBody = unused }
                current?.body = part
                current?.bodyBorrowed = true
                current?.gzipBody = inflater.gzipBody
            } else {
                current?.body.writeBuffer(&part)
            }
            if let request = current, let kbps = request.headVerdict?.readKbps {
                pauseReading(until: Self.due(request, bytes: guardHandler.wireBytes, kbps: kbps), context: context)
            }
        case .end:
            guard var request = current else { return }
            current = nil
            request.wireBytes = guardHandler.wireBytes
            guard let request = state.requestRead(request) else { return }
            if let kbps = request.headVerdict?.readKbps,
               case let due = Self.due(request, bytes: request.wireBytes, kbps: kbps),
               case let now = core.clock.monotonicNs(), due > now {
                // SPEC M8 kbps: the request is read at the rate, so it is complete no sooner than this.
                state.answerDeferred()
                context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Int64(due - now))) {
                    self.state.deferralEnded()
                    self.process(request, context: context)
                }
            } else {
                process(request, context: context)
            }
        }
    }

    /// When the request's first `bytes` of body (after its head) have come in at `kbps`: 1 kbps = 1000 bit/s.
    private static func due(_ request: Incoming, bytes: Int, kbps: Double) -> UInt64 {
        request.startNs + UInt64(Double(request.headBytes + bytes) * 8 / kbps * 1_000_000)
    }

    /// Stops reading from the socket until `due`, so that the client's bytes wait in its send buffer, as they
    /// would behind a slow link.
    private func pauseReading(until due: UInt64, context: ChannelHandlerContext) {
        let now = core.clock.monotonicNs()
        guard !readPaused, due > now + 1_000_000 else { return }
        readPaused = true
        try? context.channel.syncOptions?.setOption(.autoRead, value: false)
        context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Int64(due - now))) {
            self.readPaused = false
            try? context.channel.syncOptions?.setOption(.autoRead, value: true)
            context.read()
        }
    }

    /// The head as it came on the wire: request line, headers, blank line.
    private static func wireSize(of head: HTTPRequestHead) -> Int {
        var n = head.method.rawValue.utf8.count + 1 + head.uri.utf8.count + 11
        for (name, value) in head.headers { n += name.utf8.count + 2 + value.utf8.count + 2 }
        return n + 2
    }

    func errorCaught(context: ChannelHandlerContext, error: Error) {
        switch error {
        case let tooLarge as BodyLimitGuard.BodyTooLarge:
            fail(.tooLarge("body larger than \(tooLarge.limit) bytes"))
        case NIOHTTPDecompression.DecompressionError.limit:
            guardHandler.discardRestOfBody()
            fail(.tooLarge("decompressed body larger than \(core.configuration.decompressedLimit) bytes"))
        case is NIOHTTPDecompression.DecompressionError, is NIOHTTPDecompression.ExtraDecompressionError:
            guardHandler.discardRestOfBody()
            fail(.badEncoding("body: not a valid \(current?.head.headers.first(name: "content-encoding") ?? "gzip") stream"))
        case is HTTPParserError:
            // Not HTTP: answer once and hang up, as the decoder cannot find the next request.
            guard !state.isFinished else { return }
            state.finish()
            releaseSlots()
            var buffer = context.channel.allocator.buffer(capacity: 256)
            HTTPResponse.json(400, "Invalid", reason: "malformed HTTP request")
                .encode(date: date(skewMs: core.skewMs()), close: true, into: &buffer)
            context.writeAndFlush(wrapOutboundOut(buffer)).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        default:
            state.finish()
            context.close(promise: nil)
        }
    }

    private func fail(_ failure: BodyFailure) {
        guard current != nil, current?.failure == nil else { return }
        current?.failure = failure
        current?.body.clear()
    }

    func channelInactive(context: ChannelHandlerContext) {
        state.finish()
        releaseSlots()
        context.fireChannelInactive()
    }

    private func releaseSlots() {
        while heldSlots > 0 {
            heldSlots -= 1
            core.endRequest(entry: nil)
        }
    }

    // MARK: - Processing

    private func process(_ request: Incoming, context: ChannelHandlerContext) {
        defer {
            if !request.bodyBorrowed, request.body.capacity <= WireContext.maxRetainedBytes, spareBody == nil {
                spareBody = request.body
            }
        }
        guard !state.isFinished else { return }
        if !request.isIngestion {
            let response = ControlAPI.handle(core: core, head: request.head, body: request.body)
            write(response, for: request, skewMs: core.skewMs(), context: context)
            return
        }
        let head = request.headVerdict ?? HeadVerdict(number: 0, elapsedSeconds: 0, decided: nil, resumeAt: 0)
        if head.dropsBeforeBody {
            dropBeforeBody(request, context: context)
            return
        }
        let prepared = prepare(request)
        let verdict = core.decide(prepared, head: head)
        if let recorder = core.recorder { recorder.append(exchange(prepared, verdict)) }
        switch verdict.action {
        case .respond(let answer):
            if answer.delayMs > 0 {
                state.answerDeferred()
                context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(Int64(answer.delayMs))) {
                    self.state.deferralEnded()
                    self.answer(answer.response, request, verdict, context: context)
                }
            } else {
                self.answer(answer.response, request, verdict, context: context)
            }
        case .refuse(let outage):
            finishFault(request, verdict)
            // The outage closes this loop's other connections: their answers written this turn go out first.
            flushes?.flushNow()
            // This connection closes last, once the port and the other connections are closed: a
            // client that reacts to this close sees the outage complete (refused, not half-closed).
            let closed = core.listener.beginOutage(untilNs: outage.untilNs, except: context.channel)
            EventLoopFuture.andAllComplete(closed, on: context.eventLoop).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        case .reset:
            finishFault(request, verdict)
            // SO_LINGER 0: close() sends RST instead of FIN.
            if let provider = context.channel as? SocketOptionProvider {
                provider.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
                    context.close(promise: nil)
                }
            } else {
                context.close(promise: nil)
            }
        case .dropAfterBody, .dropBeforeBody:
            finishFault(request, verdict)
            context.close(promise: nil)
        case .hang:
            // The slot stays held: a hanging request is in flight until the client gives up.
            state.finish()
            core.appendRequestEntry(entry(request, verdict, status: nil))
        case .malformed:
            finishFault(request, verdict)
            let garbage = "HTTP/1.1 2OO 0K\r\nContent-Length: banana\r\n\u{0}\u{1}\r\n{\"status\":"
            context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: garbage)))
                .assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    /// SPEC M8 `drop_before_body`: the head was read, the body is not; nothing is recorded and nothing answered.
    private func dropBeforeBody(_ request: Incoming, context: ChannelHandlerContext) {
        let at = Int64((request.headVerdict?.elapsedSeconds ?? 0) * 1000)
        let verdict = Verdict(action: .dropBeforeBody, network: nil, fault: request.headVerdict?.decided?.fault,
                              at: at, logCount: 0, skewMs: 0)
        if let recorder = core.recorder {
            recorder.append(RecordedExchange(
                at: at, method: request.head.method.rawValue, path: request.head.uri,
                install: request.head.headers.first(name: "install-id"), bytes: 0,
                contentEncoding: request.head.headers.first(name: "content-encoding"), logs: 0, logIds: [],
                response: nil, action: verdict.action.actionName, durationSeconds: nil, fault: verdict.fault?.rawValue))
        }
        finishFault(request, verdict)
        context.close(promise: nil)
    }

    private func finishFault(_ request: Incoming, _ verdict: Verdict) {
        state.finish()
        releaseSlot(of: request, entry: entry(request, verdict, status: nil))
    }

    private func releaseSlot(of request: Incoming, entry: MockRequest?) {
        if request.holdsSlot, heldSlots > 0 {
            heldSlots -= 1
            core.endRequest(entry: entry)
        } else if let entry {
            core.appendRequestEntry(entry)
        }
    }

    private func entry(_ request: Incoming, _ verdict: Verdict, status: Int?) -> MockRequest {
        let elapsed = Double(core.clock.monotonicNs() - request.startNs) / 1_000_000
        return MockRequest(at: verdict.at, install: request.head.headers.first(name: "install-id"),
                           logs: verdict.logCount, status: status, action: verdict.action.actionName,
                           durationMs: (elapsed * 1000).rounded() / 1000)
    }

    private func answer(_ response: HTTPResponse, _ request: Incoming, _ verdict: Verdict,
                        context: ChannelHandlerContext) {
        // Stats first: once the client has its answer, /_mock/stats already shows the request.
        releaseSlot(of: request, entry: entry(request, verdict, status: response.status))
        write(response, for: request, skewMs: verdict.skewMs, network: verdict.network, context: context)
    }

    private func write(_ response: HTTPResponse, for request: Incoming, skewMs: Int64,
                       network: Scenario.Network? = nil, context: ChannelHandlerContext) {
        guard !state.isFinished else { return }
        // A byte limit or a slow close ends the connection: the answer says so.
        let shapedClose = network?.limitBytes != nil || network?.slowCloseMs != nil
        let close = !request.head.isKeepAlive || request.failure != nil || shapedClose
        var buffer = context.channel.allocator.buffer(capacity: 160 + response.body.count)
        response.encode(date: date(skewMs: skewMs), close: close, into: &buffer)
        if let network, network.kbps != nil || network.sliceBytes != nil || shapedClose {
            writeShaped(buffer, network, close: close, context: context)
            return
        }
        if close {
            state.finish()
            context.writeAndFlush(wrapOutboundOut(buffer)).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
            return
        }
        if let flushes {
            context.write(wrapOutboundOut(buffer), promise: nil)
            flushes.add(context)
        } else {
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        }
        if let next = state.answered() {
            process(next, context: context)
        }
    }

    /// SPEC M8: the answer written at `kbps`, in `slice_bytes` pieces `slice_delay_ms` apart, cut after
    /// `limit_bytes`, and the connection held open `slow_close_ms` before it closes. Each piece is scheduled
    /// when the one before it is written, so they go out in order.
    private func writeShaped(_ answer: ByteBuffer, _ network: Scenario.Network, close: Bool,
                             context: ChannelHandlerContext) {
        var bytes = answer
        if let limit = network.limitBytes, bytes.readableBytes > limit {
            bytes.moveWriterIndex(to: bytes.readerIndex + limit)
        }
        // Without slices, a rate still writes in small pieces (a hundredth of a second each), not in one go.
        let pieceSize = network.sliceBytes
            ?? network.kbps.map { max(1, Int($0 * 1000 / 8 / 100)) }
            ?? max(1, bytes.readableBytes)
        var pieces: [(piece: ByteBuffer, waitNs: Int64)] = []
        while bytes.readableBytes > 0, let piece = bytes.readSlice(length: min(pieceSize, bytes.readableBytes)) {
            var waitMs = network.kbps.map { Double(piece.readableBytes) * 8 / $0 } ?? 0
            if !pieces.isEmpty { waitMs += Double(network.sliceDelayMs ?? 0) }
            pieces.append((piece, Int64(waitMs * 1_000_000)))
        }
        state.answerDeferred()
        let loop = context.eventLoop.assumeIsolated()
        func finish() {
            if let slowClose = network.slowCloseMs {
                state.finish()
                loop.scheduleTask(in: .milliseconds(Int64(slowClose))) { context.close(promise: nil) }
            } else if close {
                state.finish()
                context.close(promise: nil)
            } else {
                state.deferralEnded()
                if let next = state.answered() { process(next, context: context) }
            }
        }
        func send(_ k: Int) {
            guard !state.isFinished else { return }
            guard k < pieces.count else { return finish() }
            let (piece, waitNs) = pieces[k]
            let step = {
                guard !self.state.isFinished else { return }
                context.writeAndFlush(self.wrapOutboundOut(piece), promise: nil)
                send(k + 1)
            }
            if waitNs > 0 { loop.scheduleTask(in: .nanoseconds(waitNs)) { step() } } else { step() }
        }
        send(0)
    }

    /// The `Date` header on the server's (skewed) clock, formatted once per second.
    private func date(skewMs: Int64) -> String {
        let ms = core.clock.wallMs() + skewMs
        let second = ms >= 0 ? ms / 1000 : (ms - 999) / 1000
        if dateCache.second != second { dateCache = (second, HTTPDate.format(epochSeconds: second)) }
        return dateCache.text
    }

    // MARK: - Normal handling (SPEC W1, M1)

    /// The request as its wire reads it (`Vendors/`: App Center's and every other vendor's alike); a path no wire
    /// owns gets the 404 of the default wire.
    private func prepare(_ request: Incoming) -> PreparedRequest {
        let head = request.head
        let path = Self.path(of: head.uri)
        let install = head.headers.first(name: "install-id")
        let vendor = Vendor.route(path: path)
        let failure: (status: Int, reason: String)? = switch request.failure {
        case .tooLarge(let reason)?: (413, reason)
        case .badEncoding(let reason)?: (400, reason)
        case nil: nil
        }
        let batch = request.body.withUnsafeReadableBytes { raw in
            let read = VendorRequest(method: head.method, uri: head.uri, path: path, headers: head.headers,
                                     body: raw.bindMemory(to: UInt8.self))
            guard let vendor else { return VendorWires.unrouted(read) }
            return vendor.wire.read(WireInput(request: read, head: head, install: install), failure: failure,
                                    context: &wireContext)
        }
        var prepared = PreparedRequest(
            method: head.method, uri: head.uri, path: path, install: install, batch: batch,
            cutoffs: batch.events.map { $0.timestampMs.map { wireContext.cutoff.cutoff(forTimestamp: $0) } ?? .max },
            wireBytes: request.wireBytes, contentEncoding: head.headers.first(name: "content-encoding"),
            startNs: request.startNs, vendor: vendor)
        if batch.readsKeptBody { prepared.storedBody = Self.kept(request) }
        return prepared
    }

    /// What the server keeps of an accepted request's body: the gzip body it was inflated from in one piece, or
    /// the body itself.
    private static func kept(_ request: Incoming) -> StoredBody.Bytes {
        let body = request.body
        if let gzip = request.gzipBody {
            return .gzip(gzip.getBytes(at: gzip.readerIndex, length: gzip.readableBytes) ?? [],
                         inflatedSize: body.readableBytes)
        }
        return .plain(body.getBytes(at: body.readerIndex, length: body.readableBytes) ?? [])
    }

    private func exchange(_ r: PreparedRequest, _ v: Verdict) -> RecordedExchange {
        var e = RecordedExchange(at: v.at, method: r.method.rawValue, path: r.uri, install: r.install,
                                 bytes: r.wireBytes, contentEncoding: r.contentEncoding, logs: r.batch.eventCount,
                                 logIds: r.batch.events.compactMap { $0.id?.uuidString }, response: nil, action: nil,
                                 durationSeconds: nil, fault: v.fault?.rawValue)
        e.action = v.action.actionName
        switch v.action {
        case .respond(let answer):
            let headers = Dictionary(answer.response.headers, uniquingKeysWith: { a, _ in a })
            e.response = Scenario.Response(status: answer.response.status, headers: headers,
                                           body: String(decoding: answer.response.body, as: UTF8.self),
                                           delayMs: answer.delayMs)
            e.network = v.network
        case .refuse(let outage):
            e.durationSeconds = outage.durationSeconds
        case .reset, .dropAfterBody, .dropBeforeBody, .hang, .malformed:
            break
        }
        return e
    }

    static func path(of uri: String) -> String {
        guard let q = uri.firstIndex(of: "?") else { return uri }
        return String(uri[..<q])
    }

    static func query(of uri: String, _ name: String) -> String? {
        guard let q = uri.firstIndex(of: "?") else { return nil }
        for pair in uri[uri.index(after: q)...].split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if kv[0] == name { return kv.count > 1 ? String(kv[1]).removingPercentEncodingIfNeeded : "" }
        }
        return nil
    }
}

extension String {
    /// Query values here are plain tokens; decode `%XX` only when present.
    var removingPercentEncodingIfNeeded: String {
        guard utf8.contains(UInt8(ascii: "%")) else { return self }
        var bytes: [UInt8] = []
        var it = utf8.makeIterator()
        while let b = it.next() {
            if b == UInt8(ascii: "%"), let h = it.next(), let l = it.next(),
               let v = UInt8(String(decoding: [h, l], as: UTF8.self), radix: 16) {
                bytes.append(v)
            } else {
                bytes.append(b)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
