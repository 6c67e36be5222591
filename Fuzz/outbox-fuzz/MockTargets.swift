// The mock server's side: request bodies (plain or gzip) through the wire validators, and scenario files.
import FoundationEssentials
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPCompression
@testable import OutboxMock

/// The mock's request-body validators, one line per vendor wire: each becomes the target `mock-body-NAME`, with
/// its seeds in Fixtures/fuzz/seeds/mock-body-NAME/ (and, for a vendor, its captured requests in
/// Fixtures/vendors/). `shapes` are the requests a vendor's body arrives in ("METHOD URI CONTENT-TYPE"; a URI
/// ending in `?` takes the body as its query): the input's first byte picks one, the rest is the body. `check`
/// gets a decompressed body, must accept or refuse it cleanly, and asserts what it can about an accepted one.
let mockWires: [(name: String, shapes: [String], check: @Sendable (String, UnsafeBufferPointer<UInt8>) -> Void)] = [
    ("appcenter", [], { _, body in checkAppCenterBody(body) }),
    ("segment", ["POST /v1/batch application/json", "POST /v1/track application/json", "POST /v1/identify application/json"],
     vendorCheck(.segment)),
    ("posthog", ["POST /batch/ application/json", "POST /i/v1/analytics/events application/json", "POST /capture/ application/json"],
     vendorCheck(.posthog)),
    ("snowplow", ["POST /com.snowplowanalytics.snowplow/tp2 application/json", "GET /i? -"], vendorCheck(.snowplow)),
    ("mixpanel", ["POST /track application/x-www-form-urlencoded", "POST /engage application/x-www-form-urlencoded",
                  "POST /groups application/x-www-form-urlencoded", "POST /import application/x-www-form-urlencoded",
                  "POST /track application/json", "POST /import?strict=1 application/json", "GET /track? -"],
     vendorCheck(.mixpanel)),
    ("otlp", ["POST /v1/logs application/x-protobuf", "POST /v1/traces application/x-protobuf",
              "POST /v1/metrics application/x-protobuf", "POST /v1/logs application/json",
              "POST /v1/traces application/json", "POST /v1/metrics application/json"], vendorCheck(.otlp)),
]

func mockBodyTargets() -> [FuzzTarget] {
    mockWires.map { wire in
        FuzzTarget(name: "mock-body-\(wire.name)",
                   summary: "an HTTP request body (gzip when it starts 1f 8b) through the mock's \(wire.name) validator") { input in
            var shape = ""
            var input = input
            if !wire.shapes.isEmpty {
                guard let selector = input.first else { return }
                shape = wire.shapes[Int(selector) % wire.shapes.count]
                input = UnsafeBufferPointer(rebasing: input.dropFirst())
            }
            // The mock inflates a gzip body before validating it (and refuses one that does not inflate).
            if input.count >= 2, input[0] == 0x1F, input[1] == 0x8B {
                guard case .inflated(let body, let wholeGzip) = MockInflate.inflate(input) else { return }
                if wholeGzip {
                    // What the mock keeps of an accepted gzip body reads back as the body it validated.
                    let kept = StoredBody(.gzip(Array(input), inflatedSize: body.count), minify: false, install: "",
                                          receivedAtMs: 0)
                    invariant(kept.json() == body, "a kept gzip body inflates to other bytes when read back")
                }
                body.withUnsafeBufferPointer { wire.check(shape, $0) }
            } else {
                wire.check(shape, input)
            }
        }
    }
}

/// A vendor wire (SPEC V1–V3): the body in the request `shape` through `VendorWires.decode`, as the connection
/// handler calls it after reading the body. Every body gets an answer, and no more events are kept or refused
/// than the batch counted.
func vendorCheck(_ vendor: Vendor) -> @Sendable (String, UnsafeBufferPointer<UInt8>) -> Void {
    { shape, body in
        let parts = shape.split(separator: " ", maxSplits: 2).map(String.init)
        guard parts.count == 3 else { return invariant(false, "a malformed shape: \(shape)") }
        var uri = parts[1]
        var body = body
        if uri.hasSuffix("?") {
            // A GET's payload is its query (Snowplow's /i, Mixpanel's ?data=): a URI has no NUL, CR or LF.
            guard !body.contains(where: { $0 == 0 || $0 == 0x0A || $0 == 0x0D }) else { return }
            uri += String(decoding: body, as: UTF8.self)
            body = UnsafeBufferPointer(start: nil, count: 0)
        }
        var head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: parts[0]), uri: uri)
        if parts[2] != "-" { head.headers.add(name: "Content-Type", value: parts[2]) }
        let batch = VendorWires.decode(vendor, head: head, path: ConnectionHandler.path(of: uri), body: body, failure: nil)
        invariant((200..<600).contains(batch.normal.status), "answered \(batch.normal.status)")
        invariant(batch.events.count + batch.refused <= max(batch.eventCount, 1),
                  "\(batch.events.count) kept + \(batch.refused) refused of \(batch.eventCount) events")
        invariant(batch.events.allSatisfy { !$0.json.isEmpty || $0.recordIndex != nil }, "an event kept without its JSON")
        // OTLP's events are rendered when read, from the body the server keeps: each one renders.
        if let source = batch.renderedWhenRead {
            var reader = StoredLogReader()
            let kept = StoredBody(.plain(Array(body)), minify: false, install: "", receivedAtMs: 0, vendor: vendor,
                                  otlp: source)
            for event in batch.events {
                let index = event.recordIndex ?? -1
                let json = reader.json(of: StoredLog(id: .zero, type: .event, name: event.name, body: kept,
                                                     span: index..<index + 1))
                invariant(json.first == UInt8(ascii: "{") && json.last == UInt8(ascii: "}"),
                          "OTLP record \(index) does not render when read")
            }
        }
    }
}

/// App Center (W1–W2): the validator the mock answers 200 or 400 by, and the JSON tape under it.
func checkAppCenterBody(_ body: UnsafeBufferPointer<UInt8>) {
    // The tape: whatever parses, minified, parses again to the same minified bytes.
    if let tape = try? JSONTape.parse(body) {
        var minified: [UInt8] = []
        JSONView(bytes: body, tape: tape).appendMinified(0, to: &minified)
        minified.withUnsafeBufferPointer { again in
            guard let second = try? JSONTape.parse(again) else {
                return invariant(false, "minified JSON does not parse: \(String(decoding: again, as: UTF8.self))")
            }
            var twice: [UInt8] = []
            JSONView(bytes: again, tape: second).appendMinified(0, to: &twice)
            invariant(twice == minified, "minifying twice changed the bytes")
        }
    }
    let check = LogValidator.check(body: body)
    guard check.failure == nil else { return }
    invariant(check.logs.count == check.logCount, "accepted \(check.logs.count) of \(check.logCount) logs")
    // Accepted ⇒ re-encodes: the logs as the mock reads them back (`StoredLogReader`: each log's span of the body,
    // minified when the body has whitespace between tokens), in a new container, are a body the mock accepts
    // again, with the same ids, times, types and names.
    var again = Array(#"{"logs":["#.utf8)
    for (position, log) in check.logs.enumerated() {
        if position > 0 { again.append(UInt8(ascii: ",")) }
        let span = Array(body[log.span])[...]
        again += check.hasInnerWhitespace ? StoredLogReader.minified(span) : span
    }
    again += Array("]}".utf8)
    let second = again.withUnsafeBufferPointer { LogValidator.check(body: $0) }
    invariant(second.failure == nil, "recorded logs refused: \(second.failure?.reason ?? "")")
    invariant(second.logs.map(\.id) == check.logs.map(\.id) && second.logs.map(\.timestampMs) == check.logs.map(\.timestampMs)
              && second.logs.map(\.type) == check.logs.map(\.type) && second.logs.map(\.name) == check.logs.map(\.name),
              "recorded logs read back differently")
}

/// The mock's inflate: `BodyInflater`, as `MockServer.addConnectionHandlers` puts it in every connection's
/// pipeline, on an `EmbeddedChannel`, with a decompressed limit (a gzip bomb stops there).
enum MockInflate {
    /// Far smaller than the mock's default (20 MiB), so that libFuzzer's inputs (a few KiB, up to about 1000:1 for
    /// deflate) reach it, and a bomb costs little time per input; the code path is the same.
    static let limit = 64 << 10

    enum Outcome {
        /// `wholeGzip`: inflated in one piece from one gzip member, which the mock then keeps instead of the JSON.
        case inflated([UInt8], wholeGzip: Bool)
        case refused
    }

    /// Collects what the inflater passes on, and whether it came from one whole gzip member.
    private final class Collector: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        let inflater: BodyInflater
        var body: [UInt8] = []
        var wholeGzip = false

        init(_ inflater: BodyInflater) { self.inflater = inflater }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .body(var buffer) = unwrapInboundIn(data), buffer.readableBytes > 0 else { return }
            if inflater.gzipBody != nil { wholeGzip = true }
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
        }
    }

    static func inflate(_ bytes: UnsafeBufferPointer<UInt8>, limit: Int = limit) -> Outcome {
        let channel = EmbeddedChannel()
        defer { _ = try? channel.finish() }
        let inflater = BodyInflater(limit: limit)
        let collector = Collector(inflater)
        do {
            try channel.pipeline.syncOperations.addHandlers([inflater, collector])
            var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/logs?api-version=1.0.0")
            head.headers.add(name: "Content-Encoding", value: "gzip")
            head.headers.add(name: "Content-Length", value: "\(bytes.count)")
            try channel.writeInbound(HTTPServerRequestPart.head(head))
            try channel.writeInbound(HTTPServerRequestPart.body(channel.allocator.buffer(bytes: bytes)))
            try channel.writeInbound(HTTPServerRequestPart.end(nil))
            invariant(collector.body.count <= limit, "inflated \(collector.body.count) bytes past the limit \(limit)")
            return .inflated(collector.body, wholeGzip: collector.wholeGzip)
        } catch {
            return .refused
        }
    }
}

/// Scenario files (`outbox-mock --scenario`, `PUT /_mock/scenario`): decoded and checked, or refused with a reason;
/// an accepted one encodes (`GET /_mock/scenario`) to JSON that decodes to the same scenario.
let scenarioTarget = FuzzTarget(name: "scenario", summary: "a scenario file through Scenario.decode and back") { input in
    let data = Data(buffer: input)
    let scenario: Scenario
    do {
        scenario = try Scenario.decode(from: data)
    } catch let error as ScenarioError {
        invariant(!error.description.isEmpty, "a refusal without a reason")
        return
    } catch {
        return invariant(false, "Scenario.decode threw something other than ScenarioError: \(error)")
    }
    do {
        let again = try Scenario.decode(from: scenario.jsonData())
        invariant(again == scenario, "a scenario changed through its JSON")
    } catch {
        invariant(false, "an accepted scenario's own JSON is refused: \(error)")
    }
    // Every rule's request numbers answer for any request number without trapping.
    for rule in scenario.rules {
        for n in [0, 1, 2, 3, 1000, Int.max] { _ = rule.match.requests?.contains(n) }
    }
}
