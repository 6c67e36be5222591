import FoundationEssentials
import Glibc
import Outbox
import OutboxMock

/// What the fleet reads from an `outbox-mock`'s control API (SPEC X1): `GET /_mock/stats` during the run (progress,
/// the report's time series) and `GET /_mock/logs` at the end (SPEC F2), through the engine's own transport (curl,
/// `BlockingHTTPClient`): no second HTTP client, and no Foundation networking (megabytes mapped in every process).
/// Plain `http://` only: an `https://` endpoint is not an outbox-mock as far as loss accounting goes.
struct FleetMockClient: Sendable {
    /// `http://HOST[:PORT]`: the control API is at the server's root, whatever path the endpoint has.
    let origin: String
    let http: BlockingHTTPClient

    /// nil when `endpoint` is not an `http://` URL with a host.
    init?(endpoint: String, http: BlockingHTTPClient) {
        guard let url = URLComponents(string: endpoint), url.scheme?.lowercased() == "http",
              let host = url.host, !host.isEmpty else { return nil }
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        origin = "http://\(bracketed)" + (url.port.map { ":\($0)" } ?? "")
        self.http = http
    }

    enum Failure: Error, CustomStringConvertible {
        case connect(String)
        case status(Int)

        var description: String {
            switch self {
            case .connect(let message): return "cannot reach the server: \(message)"
            case .status(let status): return "answered HTTP \(status)"
            }
        }
    }

    /// `GET path`; the whole body (small answers: stats).
    func get(_ path: String) throws -> [UInt8] {
        let answer: (status: Int, body: [UInt8])
        do {
            answer = try http.get(origin + path)
        } catch {
            throw Failure.connect(error.description)
        }
        guard answer.status == 200 else { throw Failure.status(answer.status) }
        return answer.body
    }

    /// `GET path`, the body handed over in chunks as it arrives (`/_mock/logs` can be hundreds of megabytes), on the
    /// transport's thread while this one waits. Throws unless the answer is 200, or what `body` threw.
    func get(_ path: String, body: @escaping (UnsafeRawBufferPointer) throws -> Void) throws {
        final class Reader: @unchecked Sendable {
            let body: (UnsafeRawBufferPointer) throws -> Void
            var failure: (any Error)?
            init(_ body: @escaping (UnsafeRawBufferPointer) throws -> Void) { self.body = body }
        }
        let reader = Reader(body)
        let status: Int
        do {
            status = try http.get(origin + path) { chunk in
                guard reader.failure == nil else { return }
                do { try reader.body(chunk) } catch { reader.failure = error }
            }
        } catch {
            throw Failure.connect(error.description)
        }
        if let failure = reader.failure { throw failure }
        guard status == 200 else { throw Failure.status(status) }
    }
}

/// The part of `GET /_mock/stats` the fleet reads (SPEC X1). Decoding fails for a server that is not an outbox-mock.
struct FleetMockStats: Decodable, Sendable {
    var requests: Int
    var statusCounts: [String: Int]
    var logsUnique: Int
    var logsDuplicate: Int
    var delayMs: Delay
    /// The other vendors' counts (SPEC V3), by the mock's vendor name; `logs_*` above are App Center's alone.
    var vendors: [String: VendorCounts] = [:]

    struct Delay: Decodable, Sendable { var p99: Int64 }

    struct VendorCounts: Decodable, Sendable {
        var eventsUnique: Int
        var eventsDuplicate: Int

        enum CodingKeys: String, CodingKey {
            case eventsUnique = "events_unique", eventsDuplicate = "events_duplicate"
        }
    }

    enum CodingKeys: String, CodingKey {
        case requests, statusCounts = "status_counts", logsUnique = "logs_unique", logsDuplicate = "logs_duplicate",
             delayMs = "delay_ms", vendors
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        requests = try c.decode(Int.self, forKey: .requests)
        statusCounts = try c.decode([String: Int].self, forKey: .statusCounts)
        logsUnique = try c.decode(Int.self, forKey: .logsUnique)
        logsDuplicate = try c.decode(Int.self, forKey: .logsDuplicate)
        delayMs = try c.decode(Delay.self, forKey: .delayMs)
        vendors = try c.decodeIfPresent([String: VendorCounts].self, forKey: .vendors) ?? [:]
    }

    /// Unique logs the mock holds of `destination`'s wire: App Center's are `logs_unique`, every other wire's its
    /// vendor's `events_unique` (the mock names its vendors as the engine names its destinations).
    func unique(on destination: Destination) -> Int {
        destination == .appCenter ? logsUnique : vendors[destination.name]?.eventsUnique ?? 0
    }

    /// Re-sent logs of `destination`'s wire the mock absorbed.
    func duplicates(on destination: Destination) -> Int {
        destination == .appCenter ? logsDuplicate : vendors[destination.name]?.eventsDuplicate ?? 0
    }

    static func read(_ client: FleetMockClient) throws -> FleetMockStats {
        try JSONDecoder().decode(FleetMockStats.self, from: Data(client.get("/_mock/stats")))
    }

    /// The in-process mock's counts, read directly: its port is closed while a scenario refuses connections.
    static func read(_ server: MockServer) throws -> FleetMockStats {
        try JSONDecoder().decode(FleetMockStats.self, from: JSONEncoder().encode(server.stats()))
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
    /// received_at, epoch ms.
    var receivedMs: Int64 = 0
    /// The session the event was tracked in (SPEC A2); nil outside one.
    var sid: String?

    /// A `startSession` or `endSession` log (FleetSessions.swift): no properties, only its session's id.
    struct SessionLog {
        enum Kind { case start, end }
        var kind: Kind
        var sid: String
        var delayMs: Int64
        var receivedMs: Int64 = 0
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
        return SessionLog(kind: kind, sid: String(sid), delayMs: received - sent, receivedMs: received)
    }

    static func parse(_ line: UnsafeRawBufferPointer, fields: FleetLineFields) -> FleetLogLine? {
        let bytes = line.bindMemory(to: UInt8.self)
        guard let run = stringValue(after: fields.run, in: bytes),
              let device = intValue(after: fields.device, in: bytes),
              let ordinal = intValue(after: fields.ordinal, in: bytes),
              let sent = stringValue(after: fields.timestamp, in: bytes).flatMap(fields.eventMs),
              let received = stringValue(after: fields.receivedAt, in: bytes).flatMap(epochMs) else { return nil }
        return FleetLogLine(run: run, device: device, ordinal: ordinal, delayMs: received - sent, receivedMs: received,
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
    /// How a destination writes the event time after `timestamp`.
    enum TimeForm: Sendable {
        /// ISO 8601 text (App Center, PostHog, Segment).
        case iso8601
        /// Nanoseconds since 1970 in a string (OTLP).
        case nanosecondsText
        /// A JSON number of ms since 1970 (Amplitude, Mixpanel, Sensors), read up to its first non-digit.
        case milliseconds
        /// A JSON number of µs since 1970 (GA4's `timestamp_micros`), read up to its first non-digit.
        case microseconds
    }
    var timeForm: TimeForm

    /// The event time after `timestamp` in a line, in ms since 1970.
    func eventMs(_ text: Substring) -> Int64? {
        switch timeForm {
        case .iso8601: FleetLogLine.epochMs(text)
        case .nanosecondsText: Int64(text).map { $0 / 1_000_000 }
        case .milliseconds: Int64(text.prefix { $0.isASCII && $0.isNumber })
        case .microseconds: Int64(text.prefix { $0.isASCII && $0.isNumber }).map { $0 / 1000 }
        }
    }

    init(_ destination: Destination, segmentProfile: SegmentProfile = .segment) {
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
            timeForm = .iso8601
        case .otlp:
            // The mock renders a record as OTLP/JSON: attributes as key and typed value, 64-bit numbers as strings.
            run = #""key":"r","value":{"stringValue":""#
            device = #""key":"d","value":{"intValue":""#
            ordinal = #""key":"i","value":{"intValue":""#
            session = #""key":"session.id","value":{"stringValue":""#
            timestamp = #""timeUnixNano":""#
            sessionStart = #""eventName":"session.start""#
            sessionEnd = #""eventName":"session.end""#
            timeForm = .nanosecondsText
        case .posthog:
            // The mock keeps a PostHog event as sent: properties by name, `$session_id`, `event`, ISO `timestamp`.
            run = #""r":""#
            device = #""d":"#
            ordinal = #""i":"#
            session = #""$session_id":""#
            timestamp = #""timestamp":""#
            sessionStart = #""event":"session_start""#
            sessionEnd = #""event":"session_end""#
            timeForm = .iso8601
        case .segment:
            // The mock keeps a Segment message as sent: properties by name, `context.sessionId`, ISO `timestamp`.
            run = #""r":""#
            device = #""d":"#
            ordinal = #""i":"#
            session = #""sessionId":""#
            timestamp = #""timestamp":""#
            sessionStart = #""event":"Session Started""#
            sessionEnd = #""event":"Session Ended""#
            timeForm = .iso8601
            if segmentProfile == .rudderstack {
                // RudderStack's profile sends the device's time as `originalTimestamp` and the session as a number
                // (its start in ms), which two devices can share: a device's one session is told by its install
                // (`anonymousId`) instead.
                timestamp = #""originalTimestamp":""#
                session = #""anonymousId":""#
            }
        case .amplitude:
            // The mock keeps an Amplitude event as sent: `event_properties` by name, `time` in ms, `event_type`; the
            // session is a number (its start in ms) two devices can share, so a device's one session is its install.
            run = #""r":""#
            device = #""d":"#
            ordinal = #""i":"#
            session = #""device_id":""#
            timestamp = #""time":"#
            sessionStart = #""event_type":"session_start""#
            sessionEnd = #""event_type":"session_end""#
            timeForm = .milliseconds
        case .mixpanel:
            // The mock keeps a Mixpanel event as sent: properties by name, `session_id`, `time` in ms, `event`.
            run = #""r":""#
            device = #""d":"#
            ordinal = #""i":"#
            session = #""session_id":""#
            timestamp = #""time":"#
            sessionStart = #""event":"session_start""#
            sessionEnd = #""event":"session_end""#
            timeForm = .milliseconds
        case .sensors:
            // The mock keeps a Sensors record as sent: properties by name, `$event_session_id`, `time` in ms.
            run = #""r":""#
            device = #""d":"#
            ordinal = #""i":"#
            session = #""$event_session_id":""#
            timestamp = #""time":"#
            sessionStart = #""event":"$AppStart""#
            sessionEnd = #""event":"$AppEnd""#
            timeForm = .milliseconds
        case .ga4:
            // The mock keeps a GA4 event as sent: parameters by name, `session_id`, `timestamp_micros`.
            run = #""r":""#
            device = #""d":"#
            ordinal = #""i":"#
            session = #""session_id":""#
            timestamp = #""timestamp_micros":"#
            sessionStart = #""name":"outbox_session_start""#
            sessionEnd = #""name":"outbox_session_end""#
            timeForm = .microseconds
        }
        receivedAt = #""received_at":""#
    }
}
