import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1 (port 0) over POSIX sockets, one thread per connection, keep-alive
/// capable, for fault injection the transport must classify. The path chooses the behaviour:
///
/// | path | behaviour |
/// |---|---|
/// | `/ok`      | 200 with body `ok` and a `Date` header |
/// | `/echo`    | 200 whose body is the request body |
/// | `/big?size=N` | 200 with an N-byte body |
/// | `/close`   | reads the request, closes without answering (FIN) |
/// | `/reset`   | reads the request, resets the connection (RST via `SO_LINGER` 0) |
/// | `/hang`    | reads the request, never answers (until the client goes away or the server stops) |
/// | `/garbage` | answers bytes that are not HTTP, then closes |
///
/// | `/early?status=S` | answers S (`Content-Length` body `early`) after the request's head and never reads the body: a client still sending waits until its timeout |
/// | `/truncated` | 200 announcing a 100-byte body, sends 50 bytes, then closes (FIN) |
/// | `/redirect?status=S&to=PATH` | S with `Location: http://HOST:PORT/PATH`: this server's port unless `port=P`, host 127.0.0.1 unless `host=H` |
/// | `/hops?left=N&status=S` | S redirecting to `/hops?left=N-1&status=S` on this server while N > 0; then 200 with the request body |
///
/// Query parameters for every path: `delay=MS` waits before answering, `status=N` sets the status (429 and
/// 503 add `Retry-After: 120` and `x-ms-retry-after-ms: 1500`), `drop=1` closes the connection after the
/// answer without announcing it, `reset-reused=1` resets the connection without answering when the request is not
/// the first on its connection (a kept-alive connection that the server dropped just as the client reused it).
final class TestHTTPServer: @unchecked Sendable {
    struct Request: Sendable {
        var method: String
        var target: String
        var headers: [(String, String)]
        var body: [UInt8]
        /// The n-th connection accepted (1-based) that carried this request.
        var connection: Int

        func header(_ name: String) -> String? {
            headers.first(where: { $0.0.lowercased() == name.lowercased() })?.1
        }
    }

    let port: UInt16
    var baseURL: String { "http://127.0.0.1:\(port)" }

    private let listenFD: Int32
    private let lock = NSLock()
    private let threads = DispatchGroup()
    private var openConnections: Set<Int32> = []
    private var accepted = 0
    private var inProgress = 0
    private var maxInProgress = 0
    private var received: [Request] = []
    private var waiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var stopped = false

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestServerError.posix("socket", errno) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else {
            let error = errno
            close(fd)
            throw TestServerError.posix("bind/listen", error)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listenFD = fd
        port = UInt16(bigEndian: address.sin_port)
        threads.enter()
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "test-http-accept"
        thread.start()
    }

    /// Connections accepted so far.
    var connectionsAccepted: Int { lock.withLock { accepted } }
    /// The most requests the server held at once between reading them and starting to answer.
    var maxConcurrentRequests: Int { lock.withLock { maxInProgress } }
    var requests: [Request] { lock.withLock { received } }

    /// Returns once `count` requests have been read in full.
    func waitForRequests(_ count: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = lock.withLock { () -> Bool in
                if received.count >= count || stopped { return true }
                waiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Closes the listening socket and every connection, and waits for the server's threads to end.
    func stop() {
        let connections = lock.withLock { () -> Set<Int32> in
            stopped = true
            return openConnections
        }
        // shutdown (not close) wakes the threads blocked in accept/recv; each thread closes its own socket.
        shutdown(listenFD, Int32(SHUT_RDWR))
        for fd in connections { shutdown(fd, Int32(SHUT_RDWR)) }
        threads.wait()
        close(listenFD)
        let pending = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            defer { waiters.removeAll() }
            return waiters.map(\.continuation)
        }
        for continuation in pending { continuation.resume() }
    }

    private func acceptLoop() {
        defer { threads.leave() }
        while true {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return
            }
            let number = lock.withLock { () -> Int? in
                guard !stopped else { return nil }
                accepted += 1
                openConnections.insert(fd)
                return accepted
            }
            guard let number else { close(fd); return }
            threads.enter()
            let thread = Thread { [self] in
                serve(fd, connection: number)
                threads.leave()
            }
            thread.name = "test-http-conn-\(number)"
            thread.start()
        }
    }

    /// Serves requests on one connection until the client closes it or a behaviour ends it.
    private func serve(_ fd: Int32, connection: Int) {
        var buffer: [UInt8] = []
        var served = 0
        while let request = readRequest(fd, buffer: &buffer, connection: connection) {
            record(request)
            served += 1
            let (path, query) = Self.split(request.target)
            if query["reset-reused"] == "1", served > 1 {
                lock.withLock { inProgress -= 1 }
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                finish(fd)
                return
            }
            if let delay = query["delay"].flatMap(Int.init) { usleep(useconds_t(delay * 1000)) }
            lock.withLock { inProgress -= 1 }   // before answering: the client may send its next request at once
            switch path {
            case "/close":
                finish(fd)
                return
            case "/reset":
                var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                finish(fd)
                return
            case "/hang":
                var scratch = [UInt8](repeating: 0, count: 1024)
                while recv(fd, &scratch, scratch.count, 0) > 0 {}
                finish(fd)
                return
            case "/early":
                let status = query["status"].flatMap(Int.init) ?? 200
                let head = "HTTP/1.1 \(status) Early\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n"
                writeAll(fd, Array((head + "early").utf8))
                // Neither read nor close until the client goes or the server stops (`stop` shuts the socket
                // down, which poll reports as POLLHUP even with no event asked for).
                var descriptor = pollfd(fd: fd, events: 0, revents: 0)
                while poll(&descriptor, 1, -1) < 0 && errno == EINTR {}
                finish(fd)
                return
            case "/truncated":
                let head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 100\r\n\r\n"
                writeAll(fd, Array(head.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 50))
                finish(fd)
                return
            case "/garbage":
                writeAll(fd, Array("this is not HTTP at all\r\n\r\n".utf8))
                finish(fd)
                return
            default:
                var status = query["status"].flatMap(Int.init) ?? 200
                var body: [UInt8]
                switch path {
                case "/echo": body = request.body
                case "/big": body = [UInt8](repeating: UInt8(ascii: "x"), count: query["size"].flatMap(Int.init) ?? 0)
                case "/hops" where (query["left"].flatMap(Int.init) ?? 0) <= 0: body = request.body
                default: body = Array("ok".utf8)
                }
                var location: String?
                if path == "/redirect" {
                    location = "http://\(query["host"] ?? "127.0.0.1"):\(query["port"] ?? "\(port)")\(query["to"] ?? "/ok")"
                }
                if path == "/hops", let left = query["left"].flatMap(Int.init), left > 0 {
                    location = "http://127.0.0.1:\(port)/hops?left=\(left - 1)&status=\(status)"
                }
                if path == "/hops", location == nil { status = 200 }
                var head = "HTTP/1.1 \(status) \(status == 200 ? "OK" : "Status")\r\n"
                head += "Date: \(Self.httpDate())\r\n"
                head += "Content-Type: application/octet-stream\r\n"
                head += "Content-Length: \(body.count)\r\n"
                head += "X-Request-Connection: \(connection)\r\n"
                if let location { head += "Location: \(location)\r\n" }
                if path == "/tricky" {
                    // Whitespace around a value, an obsolete folded line, then more fields than the client keeps
                    // followed by one it must keep.
                    head += "X-Padded: \t  spaced value \t\r\n"
                    head += "X-Folded: first\r\n \t second\r\n"
                    for index in 0..<150 { head += "X-Filler-\(index): \(index)\r\n" }
                    head += "Retry-After: 7\r\n"
                }
                if status == 429 || status == 503 {
                    head += "Retry-After: 120\r\n"
                    head += "x-ms-retry-after-ms: 1500\r\n"
                }
                let closing = request.header("Connection")?.lowercased() == "close"
                if closing { head += "Connection: close\r\n" }
                head += "\r\n"
                body.insert(contentsOf: Array(head.utf8), at: 0)
                // `drop=1`: answer as if keeping the connection, then close it (a server's idle timeout).
                let drop = query["drop"] == "1"
                guard writeAll(fd, body), !closing, !drop else {
                    finish(fd)
                    return
                }
            }
        }
        finish(fd)
    }

    /// Forgets the connection before closing it: once closed, accept may hand out the same descriptor again.
    private func finish(_ fd: Int32) {
        lock.withLock { _ = openConnections.remove(fd) }
        close(fd)
    }

    private func record(_ request: Request) {
        let ready = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            received.append(request)
            inProgress += 1
            maxInProgress = max(maxInProgress, inProgress)
            let count = received.count
            let ready = waiters.filter { $0.count <= count }.map(\.continuation)
            waiters.removeAll { $0.count <= count }
            return ready
        }
        for continuation in ready { continuation.resume() }
    }

    /// Reads one request (headers, then a Content-Length body). Nil when the connection ended first.
    private func readRequest(_ fd: Int32, buffer: inout [UInt8], connection: Int) -> Request? {
        let separator = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while true {
            if let end = Self.find(separator, in: buffer) { headEnd = end; break }
            guard receive(fd, into: &buffer) else { return nil }
        }
        guard let headEnd else { return nil }
        let head = String(decoding: buffer[..<headEnd], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ")
        guard requestLine.count >= 2 else { return nil }
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = headers.first(where: { $0.0.lowercased() == "content-length" }).flatMap { Int($0.1) } ?? 0
        let bodyStart = headEnd + separator.count
        if requestLine[1].hasPrefix("/early") {
            return Request(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers, body: [],
                           connection: connection)
        }
        while buffer.count < bodyStart + length {
            guard receive(fd, into: &buffer) else { return nil }
        }
        let body = Array(buffer[bodyStart..<(bodyStart + length)])
        buffer.removeFirst(bodyStart + length)
        return Request(method: String(requestLine[0]), target: String(requestLine[1]), headers: headers, body: body,
                       connection: connection)
    }

    private func receive(_ fd: Int32, into buffer: inout [UInt8]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        let count = recv(fd, &chunk, chunk.count, 0)
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[..<count])
        return true
    }

    @discardableResult
    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }

    private static func split(_ target: String) -> (path: String, query: [String: String]) {
        let parts = target.split(separator: "?", maxSplits: 1)
        var query: [String: String] = [:]
        if parts.count == 2 {
            for pair in parts[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1)
                query[String(kv[0])] = kv.count == 2 ? String(kv[1]) : ""
            }
        }
        return (parts.first.map(String.init) ?? "/", query)
    }

    /// RFC 9110 IMF-fixdate, as ingestion servers send it (SPEC A9 reads it).
    static func httpDate(_ time: time_t = time(nil)) -> String {
        var seconds = time
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

enum TestServerError: Error {
    case posix(String, Int32)
}

/// A TCP port on 127.0.0.1 that is bound but not listening: a SYN to it is answered with RST (connection
/// refused), and no other process can take the port while the test holds it.
final class ClosedPort {
    let port: UInt16
    private let fd: Int32

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestServerError.posix("socket", errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { close(fd); throw TestServerError.posix("bind", errno) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        self.fd = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit { close(fd) }
}
