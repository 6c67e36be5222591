import CCurlShim

/// A curl easy handle with the options every request of one transport shares, kept between requests.
/// Creating, configuring and freeing a handle for every request cost ~20 000 instructions (curl's own advice is to
/// reuse them); a reused handle keeps its options, and a request sets only what is its own (body, callbacks' data,
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
        if let proxy = options.proxy { set(CURLOPT_PROXY, string: proxy) }
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
        switch request.method {
        case .post:
            rc = outbox_easy_setopt_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count))
            if rc == CURLE_OK { rc = outbox_easy_setopt_ptr(easy, CURLOPT_POSTFIELDS, body.baseAddress) }
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
    private var responseHeaders = HTTPHeaders()
    private var responseBody: [UInt8] = []
    private var responseBytes = 0
    /// Bytes of header lines received, status lines included, over all header blocks.
    private var headerBytes = 0
    /// Set once the request is being sent again on a new connection (`Transport`: at most once per request).
    private(set) var resentOnFreshConnection = false

    /// Header fields kept per response; the ones the engine acts on (SPEC R4, A9) are kept even beyond it.
    private static let maxHeaderFields = 100
    private static let essentialHeaders = ["date", "retry-after", "x-ms-retry-after-ms", "content-type", "content-encoding"]

    init(id: TransferID, request: HTTPRequest, bodyCap: Int, completion: @escaping (TransferResult) -> Void) {
        self.id = id
        self.request = request
        self.bodyCap = bodyCap
        self.completion = completion
        self.enqueuedAt = .now
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

        let rc = handle.load(request, body: body, transfer: Unmanaged.passUnretained(self).toOpaque(),
                             freshConnection: resentOnFreshConnection)
        guard rc == CURLE_OK else { return TransportFailure(curlCode: rc, message: Self.describe(rc)) }
        return nil
    }

    /// The transfer's outcome once curl finished it with `code`. Call before `release`.
    func result(code: CURLcode) -> TransferResult {
        guard code == CURLE_OK, let easy else {
            let detail = handle.map { String(cString: $0.errorBuffer) } ?? ""
            return .failure(TransportFailure(curlCode: code, message: detail.isEmpty ? Self.describe(code) : detail))
        }
        var status = 0
        _ = outbox_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
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
        responseHeaders.removeAll()
        responseBody.removeAll()
        responseBytes = 0
        headerBytes = 0
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
    fileprivate func received(body data: UnsafeMutablePointer<CChar>?, count: Int) -> Int {
        responseBytes += count
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
    // for every header line of every response (it was ~30 000 instructions per request).
    fileprivate func received(header data: UnsafeMutablePointer<CChar>?, count: Int) -> Int {
        guard let data else { return count }
        headerBytes += count
        var line = UnsafeRawBufferPointer(start: data, count: count)[...]
        // Trim bytes, not Characters: Swift reads "\r\n" as one Character.
        while let last = line.last, last == 0x0D || last == 0x0A { line = line.dropLast() }
        if line.starts(with: Self.statusLinePrefix) {
            responseHeaders.removeAll()
            responseBody.removeAll()
            responseBytes = 0
            return count
        }
        guard let first = line.first else { return count }
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
