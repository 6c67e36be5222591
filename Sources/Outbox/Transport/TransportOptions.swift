/// How the transport talks to the network. Defaults follow SPEC C3; tests use short timeouts.
struct TransportOptions: Sendable {
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
    var userAgent: String = "Outbox/1.0 (Linux)"
    /// nil: curl's usual proxy environment variables apply; "": no proxy at all; otherwise the proxy URL.
    var proxy: String? = nil
    /// Response bodies are kept up to this many bytes (ingestion answers are small).
    var maxResponseBodyBytes: Int = 64 * 1024

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
