import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What a raw HTTP/1.1 exchange ended with, as a client sees it.
enum ClientError: Error, Equatable {
    /// connect() got ECONNREFUSED: nothing listens on the port.
    case refused
    /// The connection was reset (RST) before an answer.
    case reset
    /// The server closed the connection without answering anything.
    case closedWithoutAnswer
    /// No complete answer within the timeout.
    case timeout
    /// Bytes arrived, but not an HTTP response.
    case malformed(String)
    case io(Int32)
}

struct TestResponse {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    var text: String { String(decoding: body, as: UTF8.self) }

    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }

    /// JSON lines bodies (`/_mock/logs`, `/_mock/requests`).
    var jsonLines: [[String: Any]] {
        text.split(separator: "\n").compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any]
        }
    }
}

/// A tiny blocking HTTP/1.1 client over a POSIX socket, so tests control and observe every byte:
/// refused connections, resets, closes without an answer, hangs and malformed answers.
final class TestConnection {
    private var fd: Int32
    var fdForTests: Int32 { fd }
    private var buffer: [UInt8] = []

    init(port: Int, timeout: Double = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClientError.io(errno) }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - Double(Int(timeout))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if rc != 0 {
            let e = errno
            // deinit runs even when init throws: mark the descriptor closed, or deinit would close a
            // number that the server in this same process may already have reused.
            Glibc.close(fd)
            fd = -1
            throw e == ECONNREFUSED ? ClientError.refused : ClientError.io(e)
        }
    }

    deinit { close() }

    func close() {
        if fd >= 0 {
            Glibc.close(fd)
            fd = -1
        }
    }

    func sendRaw(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == ECONNRESET || errno == EPIPE { throw ClientError.reset }
                throw ClientError.io(errno)
            }
            sent += n
        }
    }

    /// Sends one request and reads its answer.
    func request(_ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8] = [])
        throws -> TestResponse {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if !body.isEmpty || method == "POST" || method == "PUT" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try sendRaw(Array(head.utf8) + body)
        return try readResponse()
    }

    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 {
            buffer.append(contentsOf: chunk[0..<n])
            return true
        }
        if n == 0 { return false }
        switch errno {
        case ECONNRESET: throw ClientError.reset
        case EAGAIN, EWOULDBLOCK: throw ClientError.timeout
        default: throw ClientError.io(errno)
        }
    }

    func readResponse() throws -> TestResponse {
        let separator: [UInt8] = [13, 10, 13, 10]
        var headEnd: Int?
        while headEnd == nil {
            if let r = find(separator) { headEnd = r; break }
            if try !fill() {
                if buffer.isEmpty { throw ClientError.closedWithoutAnswer }
                throw ClientError.malformed(String(decoding: buffer, as: UTF8.self))
            }
        }
        guard let end = headEnd else { throw ClientError.closedWithoutAnswer }
        let headText = String(decoding: buffer[0..<end], as: UTF8.self)
        var lines = headText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ", maxSplits: 2)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else {
            throw ClientError.malformed(headText)
        }
        var headers: [(String, String)] = []
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw ClientError.malformed(headText) }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        buffer.removeFirst(end + 4)
        if status == 100 { return try readResponse() }
        let lengthText = headers.first { $0.0.lowercased() == "content-length" }?.1 ?? "0"
        guard let length = Int(lengthText) else { throw ClientError.malformed(headText) }
        while buffer.count < length {
            if try !fill() { throw ClientError.malformed("body cut short") }
        }
        let body = Array(buffer[0..<length])
        buffer.removeFirst(length)
        return TestResponse(status: status, headers: headers, body: body)
    }

    private func find(_ needle: [UInt8]) -> Int? {
        guard buffer.count >= needle.count else { return nil }
        for i in 0...(buffer.count - needle.count) where buffer[i] == needle[0] {
            if Array(buffer[i..<(i + needle.count)]) == needle { return i }
        }
        return nil
    }
}

/// One-shot helpers against a server on 127.0.0.1.
enum HTTP {
    static func get(_ port: Int, _ path: String) throws -> TestResponse {
        try TestConnection(port: port).request("GET", path)
    }

    static func send(_ port: Int, _ method: String, _ path: String, body: String = "") throws -> TestResponse {
        try TestConnection(port: port).request(method, path, headers: [("Content-Type", "application/json")],
                                              body: Array(body.utf8))
    }
}

extension TestConnection {
    /// Reads exactly `into.count` bytes or what arrives before EOF (for interim answers).
    func readInterim(into out: inout [UInt8]) throws -> Int {
        var got = 0
        while got < out.count {
            let n = out.withUnsafeMutableBytes { recv(fdForTests, $0.baseAddress! + got, $0.count - got, 0) }
            if n <= 0 { break }
            got += n
        }
        return got
    }
}
