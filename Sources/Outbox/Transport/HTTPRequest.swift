/// One HTTP request as the transport sends it. The caller builds the whole request: the transport adds only
/// `User-Agent` and removes curl's `Expect: 100-continue` (one round trip fewer per batch).
///
/// ```swift
/// let body = try Gzip.compress(json)
/// let request = HTTPRequest(url: "https://in.example.com/logs?api-version=1.0.0",
///                           headers: [("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
///                           body: body)
/// ```
struct HTTPRequest: Sendable {
    /// The methods the transport supports; the wire protocol only needs POST (SPEC W1).
    enum Method: String, Sendable {
        case post = "POST"
    }

    var method: Method
    /// An absolute `http://` or `https://` URL.
    var url: String
    /// Sent in this order; names may repeat. Set `Content-Encoding: gzip` here when the body is compressed.
    var headers: [(String, String)]
    var body: [UInt8]

    init(method: Method = .post, url: String, headers: [(String, String)] = [], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// Why curl must not be given this request, or nil. A CR or LF in a header would let a value inject
    /// headers of its own; curl passes header lines through as they are.
    var validationProblem: String? {
        let lower = url.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://") else {
            return "URL must start with http:// or https://"
        }
        guard !url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else {
            return "URL contains a space or a control character"
        }
        for (name, value) in headers {
            guard !name.isEmpty, name.utf8.allSatisfy(Self.isTokenByte) else {
                return "header name '\(name)' is not an HTTP token"
            }
            guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                return "header '\(name)' has a CR, LF or NUL in its value"
            }
        }
        return nil
    }

    /// RFC 9110 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
