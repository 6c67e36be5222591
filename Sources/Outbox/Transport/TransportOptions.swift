import CCurlShim

/// How the transport talks to the network. Defaults follow SPEC C3; tests use short timeouts.
struct TransportOptions: Sendable, Equatable {
    /// The engine's own cap on transfers in flight (SPEC C3: 3). Transfers beyond it wait in the transport's
    /// FIFO queue, not in curl's: curl counts time queued behind its connection cap against the timeout.
    var maxActiveTransfers: Int = 3
    /// The whole transfer, from connecting to the last byte of the answer (not the time queued).
    var requestTimeout: Duration = .seconds(30)
    /// The TCP and TLS handshakes.
    var connectTimeout: Duration = .seconds(10)
    /// A PEM bundle of trust anchors used instead of the system store (curl's `CURLOPT_CAINFO` replaces, it
    /// does not add) — for tests against a server with a self-signed certificate. Verification stays on.
    var caFile: String? = nil
    /// SPEC K2: mutual TLS (PEM paths) and public-key pins (`sha256//…`, `;`-separated); TLS 1.2 at least, always.
    var clientCertificate: String? = nil
    var clientKey: String? = nil
    var pinnedPublicKey: String? = nil
    var userAgent: String = "Outbox/1.0 (Linux)"
    /// nil: curl's usual proxy environment variables apply; "": no proxy at all; otherwise the proxy URL.
    var proxy: String? = nil
    /// Response bodies are kept up to this many bytes (ingestion answers are small).
    var maxResponseBodyBytes: Int = 64 * 1024
    /// HTTP/1.1 unless told otherwise: see `HTTPVersion`.
    var httpVersion: HTTPVersion = .http1_1

    /// Which HTTP version curl speaks.
    ///
    /// SPEC R1 makes a complete answer the outcome however the exchange ended after it. A server may answer before
    /// it has read the whole body and end the HTTP/2 stream with RST_STREAM NO_ERROR (RFC 9113 §8.1; nginx does,
    /// for every location that does not read the body). libcurl 7.88 (Debian 12) then drops the answer it has
    /// already parsed when the answer and the reset are read together: the transfer fails with
    /// CURLE_HTTP2_STREAM and no header reaches the application (only `:status` reaches curl's header store, without
    /// the headers or the body that would prove the answer whole). Over HTTP/1.1 curl hands an answer over as it
    /// reads it, and `CurlTransfer.receivedCompleteAnswer` keeps it when the exchange fails afterwards. At most three requests are in
    /// flight (SPEC C3): HTTP/2's multiplexing saves two connections at most. The release CLI's libcurl is built
    /// without nghttp2 and speaks HTTP/1.1 only.
    enum HTTPVersion: Sendable, Equatable {
        /// HTTP/1.1 on every connection; ALPN offers only http/1.1.
        case http1_1
        /// curl's default: HTTP/2 when the server accepts it through ALPN, HTTP/1.1 otherwise. Only with a libcurl
        /// that delivers an answer followed by RST_STREAM NO_ERROR.
        case negotiated

        var curlValue: Int {
            switch self {
            case .http1_1: return Int(CURL_HTTP_VERSION_1_1)
            case .negotiated: return Int(CURL_HTTP_VERSION_2TLS)
            }
        }
    }

    init() {}

    /// Throws `OutboxError.invalidConfiguration` naming the first field out of range.
    func validate() throws {
        guard maxActiveTransfers >= 1 else {
            throw OutboxError.invalidConfiguration("maxActiveTransfers must be at least 1, got \(maxActiveTransfers)")
        }
        guard requestTimeout > .zero else {
            throw OutboxError.invalidConfiguration("requestTimeout must be positive, got \(requestTimeout)")
        }
        guard connectTimeout > .zero else {
            throw OutboxError.invalidConfiguration("connectTimeout must be positive, got \(connectTimeout)")
        }
        guard maxResponseBodyBytes >= 0 else {
            throw OutboxError.invalidConfiguration("maxResponseBodyBytes must not be negative, got \(maxResponseBodyBytes)")
        }
    }
}

extension Duration {
    /// Whole milliseconds, rounded up so that a positive duration never becomes 0 ("no timeout" to curl).
    var roundedUpMilliseconds: Int {
        let (seconds, attoseconds) = components
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int(clamping: ms)
    }
}
