import Foundation
import Testing
@testable import OutboxMock

/// `GET /_mock/metrics` over real HTTP against a real server (SPEC M9): the exposition text is parsed as a
/// Prometheus scraper would, and every family checked against `/_mock/stats` and `/_mock/histogram`.
@Suite("Prometheus metrics (SPEC M9)")
struct MetricsTests {
    static let families: [String: String] = [
        "outbox_mock_requests_total": "counter", "outbox_mock_logs_total": "counter",
        "outbox_mock_vendor_events_total": "counter", "outbox_mock_faults_total": "counter",
        "outbox_mock_in_flight": "gauge", "outbox_mock_delivery_delay_ms": "histogram",
    ]

    // SPEC M9, V4: after App Center batches (duplicates, one refused) and a vendor's requests under a fault
    // scenario, each family equals the stats, every vendor is listed (zeros included), and the text is valid.
    @Test func familiesMatchTheStats() throws {
        let scenario = #"{"rules":[{"match":{"vendor":"mixpanel"},"respond":{"status":503}}]}"#
        try withServer(scenario: scenario) { (server: MockServer) throws in
            let first = Wire.events(3)
            #expect(try Wire.post(server.port, first).status == 200)
            #expect(try Wire.post(server.port, Array(first.prefix(2)) + Wire.events(2)).status == 200)
            var bad = Wire.event()
            bad["name"] = ""
            #expect(try Wire.post(server.port, [bad, Wire.event()]).status == 400)
            let segment = try #require(try VendorFixture.all(.segment).first { $0.status == 200 })
            #expect(try segment.send(server.port).status == 200)
            #expect(try segment.send(server.port).status == 200)
            let track = try #require(try VendorFixture.all(.mixpanel).first { $0.name == "track" })
            #expect(try track.send(server.port).status == 503)

            let response = try HTTP.get(server.port, "/_mock/metrics")
            #expect(response.status == 200)
            #expect(response.header("Content-Type")?.hasPrefix("text/plain; version=0.0.4") == true)
            let scrape = try Exposition.parse(response.text)
            let stats = server.stats()
            // Exactly the families of SPEC M9, each with its type.
            #expect(scrape.types == Self.families)

            var statuses: [String: Int] = [:]
            for s in scrape.samples("outbox_mock_requests_total") { statuses[s.labels["status"] ?? "?"] = s.value }
            #expect(statuses == stats.statusCounts)
            #expect(statuses["503"] == 1 && statuses["400"] == 1)

            var logs: [String: Int] = [:]
            for s in scrape.samples("outbox_mock_logs_total") { logs[s.labels["state"] ?? "?"] = s.value }
            #expect(logs == ["received": stats.logsReceived, "unique": stats.logsUnique,
                             "duplicate": stats.logsDuplicate, "refused": stats.vendor(.appcenter).eventsRefused])
            #expect(logs == ["received": 7, "unique": 5, "duplicate": 2, "refused": 2])

            var vendors: [String: [String: Int]] = [:]
            for s in scrape.samples("outbox_mock_vendor_events_total") {
                vendors[s.labels["vendor"] ?? "?", default: [:]][s.labels["state"] ?? "?"] = s.value
            }
            #expect(Set(vendors.keys) == Set(Vendor.allCases.map(\.rawValue)))
            for vendor in Vendor.allCases {
                let v = stats.vendor(vendor)
                #expect(vendors[vendor.rawValue] == ["received": v.eventsReceived, "unique": v.eventsUnique,
                                                     "duplicate": v.eventsDuplicate, "refused": v.eventsRefused],
                        "\(vendor)")
            }
            #expect(vendors["segment"]?["duplicate"] == segment.events && segment.events > 0)
            #expect(vendors["otlp"] == ["received": 0, "unique": 0, "duplicate": 0, "refused": 0])

            var faults: [String: Int] = [:]
            for s in scrape.samples("outbox_mock_faults_total") { faults[s.labels["kind"] ?? "?"] = s.value }
            #expect(faults == stats.faults && faults["respond"] == 1)

            // Control requests (this scrape included) are never in flight.
            #expect(scrape.samples("outbox_mock_in_flight").map(\.value) == [0])

            try expectHistogram(scrape, equals: server.delayHistogram())
        }
    }

    // SPEC M9: the histogram is Prometheus' — cumulative `le` buckets ending at `+Inf` = `_count` — with the
    // live page's counts, and `_sum` the sum of the delays (arrival minus timestamp) of the unique logs.
    @Test func delayHistogramIsCumulativeWithTheDelaysSum() throws {
        try withServer { (server: MockServer) throws in
            let now = Date()
            let ages: [Double] = [-30, 0.01, 5, 90, 7_200, 200_000]
            let logs = ages.map { Wire.event(timestamp: Wire.timestamp(now.addingTimeInterval(-$0))) }
            #expect(try Wire.post(server.port, logs).status == 200)
            let scrape = try Exposition.parse(try HTTP.get(server.port, "/_mock/metrics").text)
            try expectHistogram(scrape, equals: server.delayHistogram())
            var expectedSum = 0
            for log in server.uniqueLogs() {
                let object = try #require(try JSONSerialization.jsonObject(with: Data(log.json.utf8)) as? [String: Any])
                guard case .valid(let stamp) = ISOTimestamp.parse(try #require(object["timestamp"] as? String)) else {
                    Issue.record("unparsable timestamp in \(log.json)")
                    continue
                }
                expectedSum += Int(log.receivedAtMs - stamp)
            }
            #expect(scrape.samples("outbox_mock_delivery_delay_ms_sum").map(\.value) == [expectedSum])
            #expect(scrape.samples("outbox_mock_delivery_delay_ms_count").map(\.value) == [ages.count])
            // One log in the future: the first bucket (le -1) counts it.
            #expect(scrape.samples("outbox_mock_delivery_delay_ms_bucket").first?.value == 1)
        }
    }

    // SPEC M9: `outbox_mock_in_flight` is the requests whose head was read and whose answer is not yet written.
    @Test func inFlightGaugeCountsAnOpenRequest() throws {
        try withServer { (server: MockServer) throws in
            let connection = try TestConnection(port: server.port)
            let head = "POST \(Wire.logsPath) HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + "App-Secret: s\r\nInstall-ID: \(Wire.install)\r\nContent-Length: 100\r\n\r\n{"
            try connection.sendRaw(Array(head.utf8))
            func inFlight() -> Int? {
                let text = try? HTTP.get(server.port, "/_mock/metrics").text
                return text.flatMap { try? Exposition.parse($0) }?.samples("outbox_mock_in_flight").first?.value
            }
            #expect(eventually { inFlight() == 1 })
            connection.close()
            #expect(eventually { inFlight() == 0 })
        }
    }

    // SPEC M9 (exposition format): label values escape backslash, double quote and line feed, HELP text
    // backslash and line feed, so that any fault kind (a replayed recording's, say) parses back as it was.
    @Test func labelValuesAndHelpAreEscaped() throws {
        var writer = PrometheusTextWriter()
        let odd = "a\"b\\c\nd é"
        writer.family("x_total", type: "counter", help: "back\\slash\nnew line")
        writer.sample("x_total", [("kind", odd), ("k2", "plain")], 3)
        let text = String(decoding: writer.out, as: UTF8.self)
        #expect(text == "# HELP x_total back\\\\slash\\nnew line\n# TYPE x_total counter\n"
            + "x_total{kind=\"a\\\"b\\\\c\\nd é\",k2=\"plain\"} 3\n")
        let parsed = try Exposition.parse(text)
        #expect(parsed.samples("x_total").first?.labels == ["kind": odd, "k2": "plain"])
        #expect(parsed.help["x_total"] == "back\\slash\nnew line")
    }

    /// The scrape's histogram against the live page's buckets: cumulative, `+Inf` last and equal to `_count`.
    private func expectHistogram(_ scrape: Exposition, equals histogram: DelayHistogram) throws {
        let buckets = scrape.samples("outbox_mock_delivery_delay_ms_bucket")
        let les = buckets.map { $0.labels["le"] ?? "?" }
        #expect(les == histogram.buckets.map { $0.belowMs.map { String($0 - 1) } ?? "+Inf" })
        var cumulative = 0
        for (bucket, sample) in zip(histogram.buckets, buckets) {
            cumulative += bucket.count
            #expect(sample.value == cumulative, "le=\(sample.labels["le"] ?? "?")")
        }
        let bounds = les.dropLast().compactMap { Int($0) }
        #expect(bounds == bounds.sorted() && bounds.count == les.count - 1)
        #expect(zip(buckets, buckets.dropFirst()).allSatisfy { $0.value <= $1.value })
        let count = try #require(scrape.samples("outbox_mock_delivery_delay_ms_count").first?.value)
        #expect(buckets.last?.labels["le"] == "+Inf" && buckets.last?.value == count)
        #expect(scrape.samples("outbox_mock_delivery_delay_ms_sum").count == 1)
    }
}

/// A strict reader of Prometheus' text exposition format (0.0.4), as much of it as the mock emits: it refuses
/// a sample before its family's `# HELP` and `# TYPE`, an unknown type, a malformed or unterminated label,
/// a bad escape, a non-numeric value, a repeated series and a sample whose name is not its family's.
struct Exposition {
    struct Sample {
        var name: String
        var labels: [String: String]
        var value: Int
    }

    struct Invalid: Error, CustomStringConvertible {
        var line: Int
        var reason: String
        var description: String { "line \(line): \(reason)" }
    }

    var types: [String: String] = [:]
    var help: [String: String] = [:]
    var all: [Sample] = []

    func samples(_ name: String) -> [Sample] { all.filter { $0.name == name } }

    static func parse(_ text: String) throws -> Exposition {
        var e = Exposition()
        var seen = Set<String>()
        guard text.hasSuffix("\n") else { throw Invalid(line: 0, reason: "no final line feed") }
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            let n = index + 1
            if line.hasPrefix("# HELP ") {
                let rest = line.dropFirst(7)
                guard let space = rest.firstIndex(of: " ") else { throw Invalid(line: n, reason: "HELP without text") }
                e.help[String(rest[..<space])] = try unescape(rest[rest.index(after: space)...], quote: false, line: n)
            } else if line.hasPrefix("# TYPE ") {
                let parts = line.dropFirst(7).split(separator: " ")
                guard parts.count == 2, ["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[1]),
                      e.help[String(parts[0])] != nil, e.types[String(parts[0])] == nil
                else { throw Invalid(line: n, reason: "bad or repeated TYPE, or TYPE before HELP: \(line)") }
                e.types[String(parts[0])] = String(parts[1])
            } else if line.hasPrefix("#") || line.isEmpty {
                throw Invalid(line: n, reason: "unexpected line \(line)")
            } else {
                let sample = try parseSample(line, line: n)
                let family = e.types[sample.name] != nil ? sample.name
                    : ["_bucket", "_sum", "_count"].compactMap { suffix in
                        sample.name.hasSuffix(suffix) ? String(sample.name.dropLast(suffix.count)) : nil
                    }.first { e.types[$0] == "histogram" }
                guard family != nil else { throw Invalid(line: n, reason: "\(sample.name) has no TYPE before it") }
                let series = sample.name + sample.labels.sorted { $0.key < $1.key }.description
                guard seen.insert(series).inserted else { throw Invalid(line: n, reason: "repeated \(series)") }
                e.all.append(sample)
            }
        }
        return e
    }

    private static func parseSample(_ line: Substring, line n: Int) throws -> Sample {
        var rest = line[...]
        let nameEnd = rest.firstIndex { $0 == "{" || $0 == " " } ?? rest.endIndex
        let name = String(rest[..<nameEnd])
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == ":") })
        else { throw Invalid(line: n, reason: "bad metric name in \(line)") }
        rest = rest[nameEnd...]
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                guard let eq = rest.firstIndex(of: "="), rest[rest.index(after: eq)...].first == "\"" else {
                    throw Invalid(line: n, reason: "bad label in \(line)")
                }
                let key = String(rest[..<eq])
                guard !key.isEmpty, key.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
                    throw Invalid(line: n, reason: "bad label name in \(line)")
                }
                let start = rest.index(eq, offsetBy: 2)
                var i = start
                var closed = false
                while i < rest.endIndex {
                    if rest[i] == "\\" {
                        i = rest.index(after: i)
                        if i < rest.endIndex { i = rest.index(after: i) }
                        continue
                    }
                    if rest[i] == "\"" { closed = true; break }
                    i = rest.index(after: i)
                }
                guard closed, labels[key] == nil else {
                    throw Invalid(line: n, reason: "unterminated or repeated label in \(line)")
                }
                labels[key] = try unescape(rest[start..<i], quote: true, line: n)
                rest = rest[rest.index(after: i)...]
                if rest.first == "," { rest = rest.dropFirst() }
            }
            rest = rest.dropFirst()
        }
        guard rest.first == " ", let value = Int(rest.dropFirst()) else {
            throw Invalid(line: n, reason: "bad value in \(line)")
        }
        return Sample(name: name, labels: labels, value: value)
    }

    private static func unescape(_ s: Substring, quote: Bool, line n: Int) throws -> String {
        var out = ""
        var escaped = false
        for c in s {
            if escaped {
                switch c {
                case "\\": out.append("\\")
                case "n": out.append("\n")
                case "\"" where quote: out.append("\"")
                default: throw Invalid(line: n, reason: "bad escape \\\(c)")
                }
                escaped = false
            } else if c == "\\" {
                escaped = true
            } else {
                out.append(c)
            }
        }
        guard !escaped else { throw Invalid(line: n, reason: "dangling backslash") }
        return out
    }
}
