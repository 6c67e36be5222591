/// A complete HTTP answer, whatever its status: a 503 is a response, not a transport failure (SPEC R1 decides
/// what it means). The body is capped (`TransportOptions.maxResponseBodyBytes`): ingestion answers are small,
/// and a misbehaving server must not make the engine hold megabytes.
struct HTTPResponse: Sendable {
    var status: Int
    /// Case-insensitive lookup: `response.headers["retry-after"]`.
    var headers: HTTPHeaders
    /// At most `TransportOptions.maxResponseBodyBytes` bytes of the body.
    var body: [UInt8]
    /// The body's full length on the wire (after any content decoding curl did); larger than `body.count`
    /// when the body was cut at the cap.
    var bodyBytesReceived: Int
    var timing: TransferTiming
    /// True when curl sent this request on a connection left open by an earlier one (keep-alive).
    var reusedConnection: Bool

    var isSuccess: Bool { (200..<300).contains(status) }
    var bodyTruncated: Bool { bodyBytesReceived > body.count }
}

/// Where the time of one transfer went.
struct TransferTiming: Sendable, Equatable {
    /// Waiting in the transport's own queue behind `maxActiveTransfers` (not counted against the timeout).
    var queued: Duration
    /// From the start of the transfer until the TCP (and TLS) connection was ready; zero on a reused connection.
    var connect: Duration
    /// From the start of the transfer until the first byte of the answer.
    var firstByte: Duration
    /// From the start of the transfer until its end (excludes `queued`).
    var total: Duration
}

/// Response header fields in arrival order, looked up case-insensitively (RFC 9110 field names are).
struct HTTPHeaders: Sendable, Sequence {
    private(set) var fields: [(name: String, value: String)] = []

    init() {}
    init(_ fields: [(String, String)]) { self.fields = fields.map { (name: $0.0, value: $0.1) } }

    /// The first value of the field `name`, or nil.
    subscript(name: String) -> String? {
        fields.first(where: { Self.equalsIgnoringCase($0.name, name) })?.value
    }

    /// Every value of the field `name`, in arrival order.
    func values(_ name: String) -> [String] {
        fields.filter { Self.equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    var count: Int { fields.count }

    mutating func append(name: String, value: String) { fields.append((name: name, value: value)) }
    mutating func removeAll() { fields.removeAll() }
    /// Appends `continuation` to the last field's value (an obsolete folded header line).
    mutating func extendLast(with continuation: String) {
        guard let last = fields.indices.last else { return }
        fields[last].value += " " + continuation
    }

    func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    /// ASCII case folding is enough: field names are tokens.
    static func equalsIgnoringCase(_ a: String, _ b: String) -> Bool {
        a.utf8.elementsEqual(b.utf8) { x, y in
            x == y || (x | 0x20 == y | 0x20 && (x | 0x20) >= UInt8(ascii: "a") && (x | 0x20) <= UInt8(ascii: "z"))
        }
    }
}
