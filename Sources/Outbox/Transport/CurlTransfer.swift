import CCurlShim

/// A curl easy handle with the options every request of one transport shares, kept between requests.
/// Creating, configuring and freeing a handle for every request is wasted work (curl's own advice is to reuse them); a reused handle keeps its options, and a request sets only what is its own (body, callbacks' data,
/// and the URL or header list when they differ from the last request's). Loop thread only.
final class EasyHandle {
    /// `CURL *`.
    let easy: UnsafeMutableRawPointer
    /// `CURLOPT_ERRORBUFFER`: curl keeps the pointer, so it lives as long as the handle.
    let errorBuffer: UnsafeMutablePointer<CChar>
    /// What the last request set, so that the next one sets it again only when it differs.
    private var url: String?
    private var headers: [(String, String)] = []
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// Whether `CURLOPT_FRESH_CONNECT` is on (only for a request sent again after a kept-alive connection failed).
    private var freshConnect = false
    /// The method the handle is set up for (`configure` sets POST).
    private var method = HTTPRequest.Method.post

    /// A new handle with the transport's options set, or why there is none.
    static func make(options: TransportOptions, share: UnsafeMutableRawPointer?) -> Result<EasyHandle, TransportFailure> {
        guard let easy = curl_easy_init() else {
            return .failure(.other(code: Int32(bitPattern: CURLE_OUT_OF_MEMORY.rawValue), message: "curl_easy_init failed"))
        }
        let handle = EasyHandle(easy: easy)
        let rc = handle.configure(options: options, share: share)
        guard rc == CURLE_OK else { return .failure(TransportFailure(curlCode: rc, message: CurlTransfer.describe(rc))) }
        return .success(handle)
    }

    private init(easy: UnsafeMutableRawPointer) {
        self.easy = easy
        errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
    }

    deinit {
        curl_easy_cleanup(easy)
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    private func configure(options: TransportOptions, share: UnsafeMutableRawPointer?) -> CURLcode {
        let easy = self.easy
        var rc = CURLE_OK
        func set(_ option: CURLoption, _ value: Int) { if rc == CURLE_OK { rc = outbox_easy_setopt_long(easy, option, value) } }
        func set(_ option: CURLoption, pointer: UnsafeRawPointer?) { if rc == CURLE_OK { rc = outbox_easy_setopt_ptr(easy, option, pointer) } }
        // curl copies string options (since 7.17), so a scoped C string is enough for them.
        func set(_ option: CURLoption, string: String) {
            if rc == CURLE_OK { rc = string.withCString { outbox_easy_setopt_ptr(easy, option, $0) } }
        }

        set(CURLOPT_ERRORBUFFER, pointer: errorBuffer)
        // Only ever http(s): a redirect or a crafted URL cannot make curl speak another protocol.
        set(CURLOPT_PROTOCOLS_STR, string: "http,https")
        set(CURLOPT_HTTP09_ALLOWED, 0)
        // No signals: curl must not install SIGALRM handlers or raise SIGPIPE in the host process.
        set(CURLOPT_NOSIGNAL, 1)
        set(CURLOPT_TCP_NODELAY, 1)
        set(CURLOPT_TCP_KEEPALIVE, 1)
        set(CURLOPT_TIMEOUT_MS, options.requestTimeout.roundedUpMilliseconds)
        set(CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeout.roundedUpMilliseconds)
        set(CURLOPT_SSL_VERIFYPEER, 1)
        set(CURLOPT_SSL_VERIFYHOST, 2)
        if let caFile = options.caFile { set(CURLOPT_CAINFO, string: caFile) }
        // SPEC K2: TLS 1.2 at least; the host's identity and the pins the server's key must match.
        set(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        if let certificate = options.clientCertificate {
            set(CURLOPT_SSLCERT, string: certificate)
            set(CURLOPT_SSLCERTTYPE, string: "PEM")
        }
        if let key = options.clientKey {
            set(CURLOPT_SSLKEY, string: key)
            set(CURLOPT_SSLKEYTYPE, string: "PEM")
        }
        if let pins = options.pinnedPublicKey { set(CURLOPT_PINNEDPUBLICKEY, string: pins) }
        if let proxy = options.proxy { set(CURLOPT_PROXY, string: proxy) }
        set(CURLOPT_HTTP_VERSION, options.httpVersion.curlValue)
        set(CURLOPT_USERAGENT, string: options.userAgent)
        if let share { set(CURLOPT_SHARE, pointer: share) }
        set(CURLOPT_POST, 1)
        if rc == CURLE_OK {
            rc = outbox_easy_setopt_write_function(easy, CURLOPT_WRITEFUNCTION) { data, size, count, context in
                guard let context else { return 0 }
                return Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue().received(body: data, count: size * count)
            }
        }
        if rc == CURLE_OK {
            rc = outbox_easy_setopt_write_function(easy, CURLOPT_HEADERFUNCTION) { data, size, count, context in
                guard let context else { return 0 }
                return Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue().received(header: data, count: size * count)
            }
        }
        return rc
    }

    /// Points the handle at `request` and at `transfer` (the callbacks' data); `freshConnection` makes curl open a
    /// new connection instead of taking a kept-alive one. `body` must live until the transfer has left curl
    /// (`CURLOPT_POSTFIELDS` does not copy).
    func load(_ request: HTTPRequest, body: UnsafeMutableRawBufferPointer, transfer: UnsafeMutableRawPointer,
              freshConnection: Bool = false) -> CURLcode {
        errorBuffer[0] = 0
        var rc = CURLE_OK
        if freshConnect != freshConnection {
            rc = outbox_easy_setopt_long(easy, CURLOPT_FRESH_CONNECT, freshConnection ? 1 : 0)
            guard rc == CURLE_OK else { return rc }
            freshConnect = freshConnection
        }
        if url != request.url {
            url = nil
            rc = request.url.withCString { outbox_easy_setopt_ptr(easy, CURLOPT_URL, $0) }
            guard rc == CURLE_OK else { return rc }
            url = request.url
        }
        if headerList == nil || !headers.elementsEqual(request.headers, by: { $0 == $1 }) {
            var list: UnsafeMutablePointer<curl_slist>?
            // curl adds `Expect: 100-continue` to large POSTs and waits a round trip (or 1 s) for a 100 answer.
            for line in request.headers.map({ "\($0.0): \($0.1)" }) + ["Expect:"] {
                guard let appended = curl_slist_append(list, line) else {
                    curl_slist_free_all(list)
                    return CURLE_OUT_OF_MEMORY
                }
                list = appended
            }
            rc = outbox_easy_setopt_ptr(easy, CURLOPT_HTTPHEADER, list)
            guard rc == CURLE_OK else {
                curl_slist_free_all(list)
                return rc
            }
            if let headerList { curl_slist_free_all(headerList) }
            headerList = list
            headers = request.headers
        }
        if method != request.method {
            rc = outbox_easy_setopt_long(easy, request.method == .get ? CURLOPT_HTTPGET : CURLOPT_POST, 1)
            guard rc == CURLE_OK else { return rc }
            method = request.method
        }
        switch request.method {
        case .post:
            rc = outbox_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count))
            if rc == CURLE_OK { rc = outbox_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, body.baseAddress) }
        case .get:
            break
        }
        if rc == CURLE_OK { rc = outbox_easy_setopt_ptr(easy, CURLOPT_WRITEDATA, transfer) }
        if rc == CURLE_OK { rc = outbox_easy_setopt_ptr(easy, CURLOPT_HEADERDATA, transfer) }
        return rc
    }
}

/// One request on an easy handle, and everything curl reads or writes while it runs: the request body (curl
/// keeps a pointer to it) and the answer being collected. Owned by `Transport`, loop thread only. curl's write
/// and header callbacks reach it through an unretained pointer: the transport holds the transfer until the easy
/// handle has left the multi handle.
final class CurlTransfer {
    let id: TransferID
    let request: HTTPRequest
    let completion: (TransferResult) -> Void
    let enqueuedAt: ContinuousClock.Instant
    private(set) var startedAt: ContinuousClock.Instant?

    private(set) var handle: EasyHandle?
    var easy: UnsafeMutableRawPointer? { handle?.easy }
    /// The request body: `CURLOPT_POSTFIELDS` does not copy, so it must live until the handle has left curl.
    private var body: UnsafeMutableRawBufferPointer?

    private let bodyCap: Int
    // private(set), not private: the fuzz harness (Fuzz/, `make fuzz`) feeds the callbacks and reads what they kept.
    private(set) var responseHeaders = HTTPHeaders()
    private(set) var responseBody: [UInt8] = []
    private(set) var responseBytes = 0
    /// Bytes of header lines received, status lines included, over all header blocks.
    private var headerBytes = 0
    /// The status of the header block being received (or last received), from its status line.
    private(set) var blockStatus: Int?
    /// Whether the final (non-1xx) header block has ended: its empty line arrived.
    private var finalHeadersEnded = false
    /// Set once the request is being sent again on a new connection (`Transport`: at most once per request).
    private(set) var resentOnFreshConnection = false
    /// Where the request goes now: its own URL, or the target of a followed same-origin redirect (SPEC R1).
    private(set) var url: String
    /// Same-origin 307/308 redirects followed so far for this request.
    private(set) var redirectsFollowed = 0

    /// Header fields kept per response; the ones the engine acts on (SPEC R1, R4, A9) are kept even beyond it, and so
    /// are the ones that tell whether the body arrived whole.
    private static let maxHeaderFields = 100
    private static let essentialHeaders = ["date", "retry-after", "x-ms-retry-after-ms", "content-type", "content-encoding",
                                           "location", "content-length", "transfer-encoding"]
    /// SPEC R1: at most this many redirects are followed for one request.
    static let maxRedirects = 3

    /// The engine's lane on a shared transport (`SharedTransport`); nil on an engine's own.
    var lane: Int?

    init(id: TransferID, request: HTTPRequest, bodyCap: Int, completion: @escaping (TransferResult) -> Void) {
        self.id = id
        self.request = request
        self.bodyCap = bodyCap
        self.completion = completion
        self.enqueuedAt = .now
        self.url = request.url
    }

    deinit { release() }

    /// Loads the request into `handle` (a reused one, or a new one when nil). Returns why it could not, or nil when
    /// the easy handle is ready to be added.
    func prepare(options: TransportOptions, share: UnsafeMutableRawPointer?, reusing reused: EasyHandle? = nil) -> TransportFailure? {
        let handle: EasyHandle
        if let reused {
            handle = reused
        } else {
            switch EasyHandle.make(options: options, share: share) {
            case .success(let made): handle = made
            case .failure(let failure): return failure
            }
        }
        self.handle = handle
        startedAt = .now

        // Never 0 bytes: a null POSTFIELDS would make curl read the body from stdin-like callbacks.
        let body = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, request.body.count), alignment: 1)
        request.body.withUnsafeBytes { source in
            if let base = source.baseAddress, let target = body.baseAddress { target.copyMemory(from: base, byteCount: source.count) }
        }
        self.body = body

        var hop = request
        hop.url = url
        let rc = handle.load(hop, body: body, transfer: Unmanaged.passUnretained(self).toOpaque(),
                             freshConnection: resentOnFreshConnection)
        guard rc == CURLE_OK else { return TransportFailure(curlCode: rc, message: Self.describe(rc)) }
        return nil
    }

    /// The transfer's outcome once curl finished it with `code`. Call before `release`.
    ///
    /// SPEC R1: a complete answer is the outcome however the exchange ended after it. A server may answer before it
    /// has read the whole body, then end the HTTP/2 stream (RST_STREAM NO_ERROR, RFC 9113 §8.1) or close the
    /// connection; curl then reports the error it met while still sending, although the answer had arrived whole.
    func result(code: CURLcode) -> TransferResult {
        guard let easy, code == CURLE_OK || (Self.canEndAfterAnAnswer(code) && receivedCompleteAnswer) else {
            let detail = handle.map { String(cString: $0.errorBuffer) } ?? ""
            return .failure(TransportFailure(curlCode: code, message: detail.isEmpty ? Self.describe(code) : detail))
        }
        var status = 0
        _ = outbox_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        if status == 0, let blockStatus { status = blockStatus }
        var connects = 0
        _ = outbox_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects)
        let now = ContinuousClock.now
        let timing = TransferTiming(queued: (startedAt ?? now) - enqueuedAt,
                                    connect: microseconds(CURLINFO_CONNECT_TIME_T),
                                    firstByte: microseconds(CURLINFO_STARTTRANSFER_TIME_T),
                                    total: microseconds(CURLINFO_TOTAL_TIME_T))
        return .response(HTTPResponse(status: status, headers: responseHeaders, body: responseBody,
                                      bodyBytesReceived: responseBytes, timing: timing, reusedConnection: connects == 0))
    }

    /// Whether a whole final answer arrived: its header block ended, and its body is complete by its
    /// `Content-Length` (or it has none, by its status). Without a length the end of the body is known only to curl
    /// (the last chunk, the end of the stream), and curl did not report a clean end: the answer may be cut short.
    var receivedCompleteAnswer: Bool {
        guard finalHeadersEnded, let status = blockStatus else { return false }
        if status == 204 || status == 304 { return responseBytes == 0 }
        guard responseHeaders["transfer-encoding"] == nil else { return false }
        let lengths = responseHeaders.values("content-length")
        guard lengths.count == 1, let length = Int(lengths[0]), length >= 0 else { return false }
        return responseBytes == length
    }

    /// The curl errors that may come after a whole answer: the connection or the stream ended (or the time ran out)
    /// while curl was still sending the body or waiting on the connection. Not a malformed answer, a refused
    /// content encoding or a callback's abort.
    private static func canEndAfterAnAnswer(_ code: CURLcode) -> Bool {
        switch code {
        case CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM, CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING,
             CURLE_OPERATION_TIMEDOUT:
            return true
        default:
            return false
        }
    }

    /// SPEC R1: the URL to send the request to again when `response` is a 307 or 308 to the same origin (scheme,
    /// host, port) and fewer than `maxRedirects` were followed; nil otherwise, and the response is the outcome. Any
    /// other redirect is handed back: 301–303 would turn the POST into a GET, and another origin would receive the
    /// app secret. curl's CURLOPT_FOLLOWLOCATION is off for those reasons; curl still resolves `Location` (relative
    /// references included) into CURLINFO_REDIRECT_URL. Call before `release`.
    func sameOriginRedirect(of response: HTTPResponse) -> String? {
        guard response.status == 307 || response.status == 308, redirectsFollowed < Self.maxRedirects, let easy else {
            return nil
        }
        var pointer: UnsafeMutableRawPointer?
        guard outbox_easy_getinfo_ptr(easy, CURLINFO_REDIRECT_URL, &pointer) == CURLE_OK, let pointer else { return nil }
        let target = String(cString: pointer.assumingMemoryBound(to: CChar.self))
        guard let from = Origin(url), let to = Origin(target), from == to else { return nil }
        return target
    }

    /// Readies the request to be sent again to `target`, after `sameOriginRedirect`: same method, headers and body.
    /// The easy handle must have been released.
    func prepareRedirect(to target: String) {
        redirectsFollowed += 1
        url = target
        forgetAnswer()
    }

    /// Whether the request failed with `code` on a connection curl had kept alive from an earlier request, before
    /// a single byte of an answer came: the server closed or reset an idle connection just as it was taken
    /// (its keep-alive timeout, a restart). Such a request is sent again once, at once, on a new connection —
    /// what browsers do; curl 7.88 does it itself only when the connection ends cleanly before the answer, not
    /// when writing the request fails. Call before `release`.
    func failedOnKeptAliveConnection(code: CURLcode) -> Bool {
        guard !resentOnFreshConnection, let easy,
              code == CURLE_SEND_ERROR || code == CURLE_RECV_ERROR || code == CURLE_GOT_NOTHING,
              headerBytes == 0, responseBytes == 0 else { return false }
        var connects = 0
        guard outbox_easy_getinfo_long(easy, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK else { return false }
        return connects == 0
    }

    /// Readies the request to be sent again on a new connection, after `failedOnKeptAliveConnection`. The easy
    /// handle must have been released.
    func prepareResendOnFreshConnection() {
        resentOnFreshConnection = true
        forgetAnswer()
    }

    private func forgetAnswer() {
        responseHeaders.removeAll()
        responseBody.removeAll()
        responseBytes = 0
        headerBytes = 0
        blockStatus = nil
        finalHeadersEnded = false
    }

    /// Frees the body and lets go of the easy handle. The handle must no longer be in a multi handle.
    func release() {
        handle = nil
        body?.deallocate()
        body = nil
    }

    /// Like `release`, but hands the easy handle back for the next request.
    func releaseKeepingHandle() -> EasyHandle? {
        let kept = handle
        release()
        return kept
    }

    private func microseconds(_ info: CURLINFO) -> Duration {
        var value: curl_off_t = 0
        guard let easy, outbox_easy_getinfo_off(easy, info, &value) == CURLE_OK else { return .zero }
        return .microseconds(value)
    }

    /// CURLOPT_WRITEFUNCTION: keeps the body up to the cap and swallows the rest (answering less than `count`
    /// would abort the transfer with a write error, and the status is what matters).
    func received(body data: UnsafeMutablePointer<CChar>?, count: Int) -> Int {
        responseBytes += count
        if let sink = request.bodySink {
            if let data { sink(UnsafeRawBufferPointer(start: data, count: count)) }
            return count
        }
        let room = bodyCap - responseBody.count
        if room > 0, let data {
            UnsafeRawPointer(data).withMemoryRebound(to: UInt8.self, capacity: count) { bytes in
                responseBody.append(contentsOf: UnsafeBufferPointer(start: bytes, count: min(room, count)))
            }
        }
        return count
    }

    /// CURLOPT_HEADERFUNCTION: called once per header line, status lines included. A new status line starts a
    /// new header block (a `100 Continue` or a proxy's `200 Connection established` come before the real one).
    // Parsed as bytes, not Characters: `String.firstIndex(of:)` and friends walk grapheme clusters, and this runs
    // for every header line of every response.
    func received(header data: UnsafeMutablePointer<CChar>?, count: Int) -> Int {
        guard let data else { return count }
        headerBytes += count
        var line = UnsafeRawBufferPointer(start: data, count: count)[...]
        // Trim bytes, not Characters: Swift reads "\r\n" as one Character.
        while let last = line.last, last == 0x0D || last == 0x0A { line = line.dropLast() }
        if line.starts(with: Self.statusLinePrefix) {
            responseHeaders.removeAll()
            responseBody.removeAll()
            responseBytes = 0
            blockStatus = Self.status(ofStatusLine: line)
            finalHeadersEnded = false
            return count
        }
        guard let first = line.first else {
            // The empty line that ends a header block; a 1xx block is followed by another one.
            if let blockStatus, blockStatus >= 200 { finalHeadersEnded = true }
            return count
        }
        if Self.isSpaceOrTab(first) {
            responseHeaders.extendLast(with: String(decoding: Self.trimmed(line), as: UTF8.self))
            return count
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return count }
        let name = String(decoding: Self.trimmed(line[..<colon]), as: UTF8.self)
        let value = String(decoding: Self.trimmed(line[(colon + 1)...]), as: UTF8.self)
        if responseHeaders.count < Self.maxHeaderFields || Self.essentialHeaders.contains(name.lowercased()) {
            responseHeaders.append(name: name, value: value)
        }
        return count
    }

    private static let statusLinePrefix = Array("HTTP/".utf8)

    /// The three-digit code of a status line (`HTTP/1.1 200 OK`, `HTTP/2 413`), or nil.
    private static func status(ofStatusLine line: Slice<UnsafeRawBufferPointer>) -> Int? {
        guard let space = line.firstIndex(of: UInt8(ascii: " ")) else { return nil }
        let digits = line[(space + 1)...].prefix(3)
        guard digits.count == 3, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }

    private static func isSpaceOrTab(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    private static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> Slice<UnsafeRawBufferPointer> {
        var bytes = bytes
        while let first = bytes.first, isSpaceOrTab(first) { bytes = bytes.dropFirst() }
        while let last = bytes.last, isSpaceOrTab(last) { bytes = bytes.dropLast() }
        return bytes
    }

    static func describe(_ code: CURLcode) -> String {
        curl_easy_strerror(code).map { String(cString: $0) } ?? "curl error \(code.rawValue)"
    }
}

/// The origin of an http(s) URL (RFC 6454: scheme, host, port), as curl's URL parser reads it, with the scheme's
/// default port filled in and the scheme and host compared without case.
struct Origin: Equatable {
    let scheme: String
    let host: String
    let port: String

    init?(_ url: String) {
        guard let parsed = curl_url() else { return nil }
        defer { curl_url_cleanup(parsed) }
        guard curl_url_set(parsed, CURLUPART_URL, url, 0) == CURLUE_OK else { return nil }
        func part(_ what: CURLUPart, flags: UInt32 = 0) -> String? {
            var value: UnsafeMutablePointer<CChar>?
            guard curl_url_get(parsed, what, &value, flags) == CURLUE_OK, let value else { return nil }
            defer { curl_free(value) }
            return String(cString: value)
        }
        guard let scheme = part(CURLUPART_SCHEME), let host = part(CURLUPART_HOST),
              let port = part(CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT)) else { return nil }
        self.scheme = scheme.lowercased()
        self.host = host.lowercased()
        self.port = port
    }
}
