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
    /// The methods the transport supports: the wire protocol needs POST (SPEC W1); the fleet reads a mock's control
    /// API with GET.
    enum Method: String, Sendable {
        case post = "POST"
        case get = "GET"
    }

    var method: Method
    /// An absolute `http://` or `https://` URL.
    var url: String
    /// Sent in this order; names may repeat. Set `Content-Encoding: gzip` here when the body is compressed.
    var headers: [(String, String)]
    var body: [UInt8]
    /// Gets the answer's body as it arrives, in pieces, instead of the response keeping it (an answer too large to
    /// hold: a mock's `/_mock/logs`). Runs on the loop thread.
    var bodySink: (@Sendable (UnsafeRawBufferPointer) -> Void)?

    init(method: Method = .post, url: String, headers: [(String, String)] = [], body: [UInt8] = [],
         bodySink: (@Sendable (UnsafeRawBufferPointer) -> Void)? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.bodySink = bodySink
    }

    /// Why curl must not be given this request, or nil. A CR or LF in a header would let a value inject
    /// headers of its own; curl passes header lines through as they are.
    // Runs for every request, so it reads each string's UTF-8 buffer through a pointer: iterating `String.utf8`
    // costs tens of instructions a byte, `lowercased()` a copy.
    var validationProblem: String? {
        guard Self.hasHTTPScheme(url) else {
            return "URL must start with http:// or https://"
        }
        guard !Self.contains(url, where: { $0 <= 0x20 || $0 == 0x7F }) else {
            return "URL contains a space or a control character"
        }
        for (name, value) in headers {
            guard !name.isEmpty, !Self.contains(name, where: { !Self.isTokenByte($0) }) else {
                return "header name '\(name)' is not an HTTP token"
            }
            guard !Self.contains(value, where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
                return "header '\(name)' has a CR, LF or NUL in its value"
            }
        }
        return nil
    }

    private static func contains(_ string: String, where predicate: (UInt8) -> Bool) -> Bool {
        var string = string
        return string.withUTF8 { $0.contains(where: predicate) }
    }

    /// Whether `url` starts with `http://` or `https://`, in any letter case.
    private static func hasHTTPScheme(_ url: String) -> Bool {
        var bytes = url.utf8.makeIterator()
        func next(is expected: UInt8) -> Bool {
            guard let byte = bytes.next() else { return false }
            // ASCII letters compare without case; ':' and '/' have the 0x20 bit set already.
            return byte | 0x20 == expected
        }
        guard next(is: UInt8(ascii: "h")), next(is: UInt8(ascii: "t")), next(is: UInt8(ascii: "t")),
              next(is: UInt8(ascii: "p")), let fifth = bytes.next() else { return false }
        if fifth | 0x20 == UInt8(ascii: "s") {
            return next(is: UInt8(ascii: ":")) && next(is: UInt8(ascii: "/")) && next(is: UInt8(ascii: "/"))
        }
        return fifth == UInt8(ascii: ":") && next(is: UInt8(ascii: "/")) && next(is: UInt8(ascii: "/"))
    }

    /// RFC 9110 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
             UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }
}
