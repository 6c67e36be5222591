import FoundationEssentials
import Glibc
import Outbox
import OutboxMock

/// What the fleet reads from an `outbox-mock`'s control API (SPEC X1): `GET /_mock/stats` during the run (progress,
/// the report's time series) and `GET /_mock/logs` at the end (SPEC F2). A tiny HTTP/1.1 client over a socket:
/// the CLI must not link Foundation's networking (megabytes mapped in every process), and libcurl is the engine's.
/// Plain `http://` only: an `https://` endpoint is not an outbox-mock as far as loss accounting goes.
struct FleetMockClient: Sendable {
    let host: String
    let port: UInt16

    /// nil when `endpoint` is not `http://HOST[:PORT][/…]`.
    init?(endpoint: String) {
        guard endpoint.hasPrefix("http://") else { return nil }
        var rest = Substring(endpoint.dropFirst("http://".count))
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        var host: Substring
        var portText: Substring? = nil
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty else { return nil }
        if let portText {
            guard let port = UInt16(portText) else { return nil }
            self.port = port
        } else {
            self.port = 80
        }
        self.host = String(host)
    }

    enum Failure: Error, CustomStringConvertible {
        case connect(String)
        case protocolError(String)
        case status(Int)

        var description: String {
            switch self {
            case .connect(let message): return "cannot reach the server: \(message)"
            case .protocolError(let message): return "not an HTTP answer: \(message)"
            case .status(let status): return "answered HTTP \(status)"
            }
        }
    }

    /// `GET path`; the whole body (small answers: stats).
    func get(_ path: String) throws -> [UInt8] {
        var body: [UInt8] = []
        try get(path) { body.append(contentsOf: $0) }
        return body
    }

    /// `GET path`, the body handed over in chunks as it arrives (`/_mock/logs` can be hundreds of megabytes).
    /// Throws unless the answer is 200.
    func get(_ path: String, body: (UnsafeRawBufferPointer) throws -> Void) throws {
        let fd = try connectSocket()
        defer { close(fd) }
        let request = "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        try writeAll(fd, Array(request.utf8))

        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var head: [UInt8] = []
        var bodyRemaining: Int? = nil
        var inBody = false
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw Failure.connect(String(cString: strerror(errno))) }
            if n == 0 {
                if !inBody { throw Failure.protocolError("the connection closed before the answer's head ended") }
                if let remaining = bodyRemaining, remaining > 0 {
                    throw Failure.protocolError("the connection closed \(remaining) bytes before the body's end")
                }
                return
            }
            var chunk = buffer[0..<n]
            if !inBody {
                head.append(contentsOf: chunk)
                guard let end = Self.headEnd(head) else {
                    if head.count > 64 * 1024 { throw Failure.protocolError("an answer head of more than 64 KiB") }
                    continue
                }
                let (status, length, chunked) = try Self.parseHead(head[0..<end])
                guard status == 200 else { throw Failure.status(status) }
                // The mock always sends Content-Length; a chunked answer is from some other server.
                if chunked { throw Failure.protocolError("a chunked answer (outbox-mock sends Content-Length)") }
                bodyRemaining = length
                inBody = true
                let rest = Array(head[(end + 4)...])
                head = []
                chunk = rest[...]
            }
            if let remaining = bodyRemaining {
                let take = min(remaining, chunk.count)
                if take > 0 { try chunk.prefix(take).withUnsafeBytes { try body($0) } }
                bodyRemaining = remaining - take
                if remaining - take == 0 { return }
            } else if !chunk.isEmpty {
                try chunk.withUnsafeBytes { try body($0) }
            }
        }
    }

    private func connectSocket() throws -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            throw Failure.connect("\(host): \(String(cString: gai_strerror(rc)))")
        }
        defer { freeaddrinfo(list) }
        var lastError = "no address"
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            cursor = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), info.pointee.ai_protocol)
            guard fd >= 0 else { lastError = String(cString: strerror(errno)); continue }
            // A server that accepts and never answers must not hang the fleet's end.
            var timeout = timeval(tv_sec: 60, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            if connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { return fd }
            lastError = String(cString: strerror(errno))
            close(fd)
        }
        throw Failure.connect("\(host):\(port): \(lastError)")
    }

    private func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw Failure.connect(String(cString: strerror(errno))) }
            offset += n
        }
    }

    /// Index of the `\r\n\r\n` that ends the head.
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 {
            return i
        }
        return nil
    }

    static func parseHead(_ head: ArraySlice<UInt8>) throws -> (status: Int, length: Int?, chunked: Bool) {
        let text = String(decoding: head, as: UTF8.self)
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        guard let statusLine = lines.first, statusLine.hasPrefix("HTTP/1."), statusLine.count >= 12,
              let status = Int(statusLine.dropFirst(9).prefix(3)) else {
            throw Failure.protocolError("status line '\(lines.first.map(String.init)?.prefix(40) ?? "")'")
        }
        var length: Int? = nil
        var chunked = false
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingSpaceAndTab
            if name == "content-length" { length = Int(value) }
            if name == "transfer-encoding", value.lowercased().contains("chunked") { chunked = true }
        }
        return (status, length, chunked)
    }
}

/// The part of `GET /_mock/stats` the fleet reads (SPEC X1). Decoding fails for a server that is not an outbox-mock.
struct FleetMockStats: Decodable, Sendable {
    var requests: Int
    var statusCounts: [String: Int]
    var logsUnique: Int
    var logsDuplicate: Int
    var delayMs: Delay

    struct Delay: Decodable, Sendable { var p99: Int64 }

    enum CodingKeys: String, CodingKey {
        case requests, statusCounts = "status_counts", logsUnique = "logs_unique", logsDuplicate = "logs_duplicate",
             delayMs = "delay_ms"
    }

    static func read(_ client: FleetMockClient) throws -> FleetMockStats {
        try JSONDecoder().decode(FleetMockStats.self, from: Data(client.get("/_mock/stats")))
    }
}

/// One line of `GET /_mock/logs`, read by position rather than decoded: a million lines through `JSONDecoder` would
/// take longer than the run. Only the fleet's own events are of interest; their properties are `d` (the device),
/// `i` (the ordinal) and `r` (the run), written by `FleetDevice.track`.
struct FleetLogLine {
    var run: Substring
    var device: Int
    var ordinal: Int
    /// received_at − timestamp, ms.
    var delayMs: Int64
    /// The session the event was tracked in (SPEC A2); nil outside one.
    var sid: String?

    /// A `startSession` or `endSession` log (FleetSessions.swift): no properties, only its session's id.
    struct SessionLog {
        enum Kind { case start, end }
        var kind: Kind
        var sid: String
        var delayMs: Int64
    }

    static func parseSessionLog(_ line: UnsafeRawBufferPointer, fields: FleetLineFields) -> SessionLog? {
        let bytes = line.bindMemory(to: UInt8.self)
        let kind: SessionLog.Kind
        if find(fields.sessionStart, in: bytes) != nil {
            kind = .start
        } else if find(fields.sessionEnd, in: bytes) != nil {
            kind = .end
        } else {
            return nil
        }
        guard let sid = stringValue(after: fields.session, in: bytes),
              let sent = stringValue(after: fields.timestamp, in: bytes).flatMap(fields.eventMs),
              let received = stringValue(after: fields.receivedAt, in: bytes).flatMap(epochMs) else { return nil }
        return SessionLog(kind: kind, sid: String(sid), delayMs: received - sent)
    }

    static func parse(_ line: UnsafeRawBufferPointer, fields: FleetLineFields) -> FleetLogLine? {
        let bytes = line.bindMemory(to: UInt8.self)
        guard let run = stringValue(after: fields.run, in: bytes),
              let device = intValue(after: fields.device, in: bytes),
              let ordinal = intValue(after: fields.ordinal, in: bytes),
              let sent = stringValue(after: fields.timestamp, in: bytes).flatMap(fields.eventMs),
              let received = stringValue(after: fields.receivedAt, in: bytes).flatMap(epochMs) else { return nil }
        return FleetLogLine(run: run, device: device, ordinal: ordinal, delayMs: received - sent,
                            sid: stringValue(after: fields.session, in: bytes).map(String.init))
    }

    static func find(_ pattern: String, in bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        let needle = Array(pattern.utf8)
        guard bytes.count >= needle.count, let first = needle.first else { return nil }
        var i = 0
        let last = bytes.count - needle.count
        while i <= last {
            if bytes[i] == first {
                var j = 1
                while j < needle.count && bytes[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i + needle.count }
            }
            i += 1
        }
        return nil
    }

    private static func stringValue(after pattern: String, in bytes: UnsafeBufferPointer<UInt8>) -> Substring? {
        guard let start = find(pattern, in: bytes) else { return nil }
        var end = start
        while end < bytes.count && bytes[end] != UInt8(ascii: "\"") { end += 1 }
        guard end < bytes.count else { return nil }
        return Substring(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self))
    }

    static func intValue(after pattern: String, in bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard var i = find(pattern, in: bytes) else { return nil }
        var value = 0
        var digits = 0
        while i < bytes.count, bytes[i] >= 48, bytes[i] <= 57, digits < 18 {
            value = value * 10 + Int(bytes[i] - 48)
            i += 1
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    /// `YYYY-MM-DDTHH:MM:SS[.mmm]Z` as epoch ms (the wire's timestamps, SPEC W2), read as the mock reads vendors' ones.
    static func epochMs(_ text: Substring) -> Int64? { VendorTime.iso8601Ms(String(text)) }
}

/// Splits a byte stream into lines (without the `\n`), keeping only a partial last line between chunks.
struct LineSplitter {
    private var carry: [UInt8] = []

    mutating func feed(_ chunk: UnsafeRawBufferPointer, line: (UnsafeRawBufferPointer) -> Void) {
        let bytes = chunk.bindMemory(to: UInt8.self)
        var start = 0
        for i in 0..<bytes.count where bytes[i] == 10 {
            if carry.isEmpty {
                line(UnsafeRawBufferPointer(rebasing: chunk[start..<i]))
            } else {
                carry.append(contentsOf: bytes[start..<i])
                carry.withUnsafeBytes { line($0) }
                carry.removeAll(keepingCapacity: true)
            }
            start = i + 1
        }
        if start < bytes.count { carry.append(contentsOf: bytes[start...]) }
    }

    mutating func finish(line: (UnsafeRawBufferPointer) -> Void) {
        if !carry.isEmpty { carry.withUnsafeBytes { line($0) } }
        carry.removeAll()
    }
}

/// Where the fleet finds what it counts in a line of `/_mock/logs`, for the destination the devices deliver to
/// (SPEC F2a): the fleet's properties (`r` run, `d` device, `i` ordinal), the session, the event time, the session
/// logs. Each destination's records keep these under its own names; a new wire adds its line here.
struct FleetLineFields: Sendable {
    var run: String
    var device: String
    var ordinal: String
    var session: String
    var timestamp: String
    var receivedAt: String
    var sessionStart: String
    var sessionEnd: String
    /// The event time as nanoseconds since 1970 in a string (OTLP) rather than ISO 8601 text.
    var timestampIsNanoseconds: Bool

    /// The event time after `timestamp` in a line, in ms since 1970.
    func eventMs(_ text: Substring) -> Int64? {
        timestampIsNanoseconds ? Int64(text).map { $0 / 1_000_000 } : FleetLogLine.epochMs(text)
    }

    init(_ destination: Destination) {
        switch destination {
        case .appCenter:
            // App Center's logs as the mock records them: typed properties, `sid`, `timestamp`, `type`.
            run = #""name":"r","value":""#
            device = #""name":"d","value":"#
            ordinal = #""name":"i","value":"#
            session = #""sid":""#
            timestamp = #""timestamp":""#
            sessionStart = #""type":"startSession""#
            sessionEnd = #""type":"endSession""#
            timestampIsNanoseconds = false
        case .otlp:
            // The mock renders a record as OTLP/JSON: attributes as key and typed value, 64-bit numbers as strings.
            run = #""key":"r","value":{"stringValue":""#
            device = #""key":"d","value":{"intValue":""#
            ordinal = #""key":"i","value":{"intValue":""#
            session = #""key":"session.id","value":{"stringValue":""#
            timestamp = #""timeUnixNano":""#
            sessionStart = #""eventName":"session.start""#
            sessionEnd = #""eventName":"session.end""#
            timestampIsNanoseconds = true
        case .posthog:
            // The mock keeps a PostHog event as sent: properties by name, `$session_id`, `event`, ISO `timestamp`.
            run = #""r":""#
            device = #""d":"#
            ordinal = #""i":"#
            session = #""$session_id":""#
            timestamp = #""timestamp":""#
            sessionStart = #""event":"session_start""#
            sessionEnd = #""event":"session_end""#
            timestampIsNanoseconds = false
        case .segment:
            // The mock keeps a Segment message as sent: properties by name, `context.sessionId`, ISO `timestamp`.
            run = #""r":""#
            device = #""d":"#
            ordinal = #""i":"#
            session = #""sessionId":""#
            timestamp = #""timestamp":""#
            sessionStart = #""event":"Session Started""#
            sessionEnd = #""event":"Session Ended""#
            timestampIsNanoseconds = false
        }
        receivedAt = #""received_at":""#
    }
}
