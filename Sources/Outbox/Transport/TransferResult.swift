import CCurlShim

/// How one transfer ended: an HTTP answer of any status, or no answer at all.
enum TransferResult: Sendable {
    case response(HTTPResponse)
    case failure(TransportFailure)
}

/// The class of a transfer that got no usable HTTP answer. SPEC R1 makes refused, reset, DNS, TLS and timeout
/// retryable; `.cancelled` means the engine stopped the transfer itself (an interrupted attempt, SPEC C8).
enum TransportFailure: Error, Equatable, Sendable, CustomStringConvertible {
    /// Nothing listens at the address (a TCP RST answered the SYN).
    case connectionRefused
    /// The connection broke after the request left, or the server closed without answering: the request may
    /// have been processed and its answer lost (a retry may then duplicate it; log ids let the server drop the copy).
    case connectionReset
    /// The host name did not resolve.
    case dns
    /// The TLS handshake or the certificate verification failed.
    case tls
    /// SPEC K2: the server's public key matches no pin, or the host's own certificate or key cannot be used: no retry
    /// can help, only `update` (R1, R8).
    case identity(String)
    /// `requestTimeout` or `connectTimeout` ran out.
    case timeout
    /// The engine cancelled the transfer (`cancel`, `cancelAll`, `close`).
    case cancelled
    /// The server answered something that is not HTTP.
    case malformedResponse
    /// The request was refused before reaching curl (bad URL or header); retrying cannot help.
    case invalidRequest(reason: String)
    /// Any other curl error; `code` is the `CURLcode`, `message` curl's own text.
    case other(code: Int32, message: String)

    var description: String {
        switch self {
        case .connectionRefused: return "connection refused"
        case .connectionReset: return "connection reset or closed before the answer"
        case .dns: return "host name did not resolve"
        case .tls: return "TLS handshake or certificate verification failed"
        case .identity(let reason): return reason
        case .timeout: return "timed out"
        case .cancelled: return "cancelled"
        case .malformedResponse: return "the server's answer is not valid HTTP"
        case .invalidRequest(let reason): return "invalid request: \(reason)"
        case .other(let code, let message): return "curl error \(code): \(message)"
        }
    }

    /// Classifies a failed transfer's `CURLcode`. `message` is kept only for `.other`.
    init(curlCode code: CURLcode, message: String) {
        switch code {
        case CURLE_COULDNT_CONNECT:
            self = .connectionRefused
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE, CURLE_HTTP2_STREAM:
            // A server that closes without answering has lost the answer; it did not refuse the request.
            self = .connectionReset
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            self = .dns
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_SHUTDOWN_FAILED, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ISSUER_ERROR,
             CURLE_SSL_INVALIDCERTSTATUS, CURLE_USE_SSL_FAILED:
            self = .tls
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            self = .identity("the server's public key matches none of the pinned keys (pinnedPublicKey)")
        case CURLE_SSL_CERTPROBLEM, CURLE_SSL_CLIENTCERT:
            self = .identity("the client certificate or key cannot be used: \(message)")
        case CURLE_OPERATION_TIMEDOUT:
            self = .timeout
        case CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING, CURLE_UNSUPPORTED_PROTOCOL:
            // The transport only hands curl http(s) URLs and restricts it to those protocols, so
            // UNSUPPORTED_PROTOCOL here is curl refusing an answer without an HTTP status line (HTTP/0.9).
            self = .malformedResponse
        case CURLE_ABORTED_BY_CALLBACK:
            self = .cancelled
        default:
            self = .other(code: Int32(bitPattern: code.rawValue), message: message)
        }
    }
}
