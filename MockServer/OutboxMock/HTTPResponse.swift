import NIOCore

/// A response the server writes itself, head and body in one buffer: one write, one segment, so a
/// keep-alive client never waits for a delayed ACK (with Nagle's algorithm, a second small write on a reused
/// connection waits for the client's delayed ACK: about 40 ms a request).
struct HTTPResponse: Sendable {
    var status: Int
    /// Extra headers (a scenario's `Retry-After`, …). `Date`, `Content-Length` and `Connection` are added.
    var headers: [(String, String)]
    var body: [UInt8]

    init(status: Int, headers: [(String, String)] = [], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    init(status: Int, contentType: String = "application/json", body: String) {
        self.init(status: status, headers: [("Content-Type", contentType)], body: Array(body.utf8))
    }

    static let success = HTTPResponse(status: 200, body: #"{"status":"Success"}"#)

    /// `{"status": <status>, "reason": <reason>}` plus extra members.
    static func json(_ status: Int, _ word: String, reason: String, extra: String = "") -> HTTPResponse {
        HTTPResponse(status: status, body: #"{"status":"\#(word)","reason":\#(jsonString(reason))\#(extra)}"#)
    }

    static func invalid(_ failure: ValidationFailure) -> HTTPResponse {
        var extra = ""
        if let index = failure.index { extra += #","index":\#(index)"# }
        extra += #","field":\#(jsonString(failure.field))"#
        return json(400, "Invalid", reason: failure.reason, extra: extra)
    }

    func encode(date: String, close: Bool, into buffer: inout ByteBuffer) {
        buffer.writeString("HTTP/1.1 \(status) \(Self.reasonPhrase(status))\r\nDate: \(date)\r\n")
        var hasContentType = false
        for (name, value) in headers {
            let lower = name.lowercased()
            if lower == "content-length" || lower == "date" || lower == "connection" { continue }
            if lower == "content-type" { hasContentType = true }
            buffer.writeString("\(name): \(value)\r\n")
        }
        if !hasContentType && !body.isEmpty { buffer.writeString("Content-Type: text/plain; charset=utf-8\r\n") }
        buffer.writeString("Content-Length: \(body.count)\r\n")
        if close { buffer.writeString("Connection: close\r\n") }
        buffer.writeString("\r\n")
        buffer.writeBytes(body)
    }

    /// Header names are tokens; values have no control characters (no response splitting from a scenario).
    static func isValidHeader(name: String, value: String) -> Bool {
        let tokenChars = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        return !name.isEmpty && name.utf8.allSatisfy { tokenChars.contains($0) }
            && value.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F || $0 == 0x09 }
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 413: "Content Too Large"
        case 415: "Unsupported Media Type"
        case 422: "Unprocessable Content"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: "Status \(status)"
        }
    }
}

/// A JSON string literal for `s` (quotes included).
func jsonString(_ s: String) -> String {
    var out = "\""
    out.reserveCapacity(s.utf8.count + 2)
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.value < 0x20:
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}
