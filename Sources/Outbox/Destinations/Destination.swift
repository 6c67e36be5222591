/// Where the engine delivers (SPEC D1): the wire its batches speak. One engine has one destination at a time; the
/// store keeps each log once, whatever the destination (D2), and `update` may change it at run time (R8).
///
/// ```swift
/// configuration.destination = .appCenter   // the default: App Center's wire, `App-Secret` from `appSecret`
/// ```
public enum Destination: String, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    /// Microsoft App Center's ingestion wire (SPEC W): `POST {endpoint}/logs?api-version=1.0.0` with `App-Secret`.
    case appCenter = "appcenter"
    /// OpenTelemetry OTLP/HTTP logs: `POST {endpoint}/v1/logs`, protobuf or OTLP/JSON (`otlpEncoding`); credentials,
    /// if the collector wants any, go in `headers`.
    case otlp
    /// PostHog's capture API: `POST {endpoint}/batch/`, the project API key (`apiKey`) in the body.
    case posthog
    /// Segment's HTTP Tracking API (Segment, RudderStack): `POST {endpoint}/v1/batch`, HTTP Basic with `writeKey`;
    /// `segmentProfile` picks Segment's or RudderStack's forms.
    case segment
    /// Amplitude's HTTP V2 API: `POST {endpoint}/2/httpapi`, the project API key (`apiKey`) in the body.
    case amplitude
    /// Mixpanel's import API: `POST {endpoint}/import?strict=1`, HTTP Basic with `projectToken` or a service account
    /// (`serviceAccountUser`, `serviceAccountSecret`, `projectId`).
    case mixpanel
    /// Sensors Analytics: `POST` the endpoint as given (`https://host:8106/sa?project=P`), a form with the gzipped,
    /// base64 records and their `crc` (SPEC D11).
    case sensors
    /// Google Analytics 4's Measurement Protocol: `POST {endpoint}/mp/collect?measurement_id=…&api_secret=…` (SPEC D12).
    case ga4

    /// The name the command line (`--destination`) and the C configuration (`"destination"`) use: the raw value.
    public var name: String { rawValue }

    public var description: String { name }

    /// The destination named `name`; an unknown name is refused listing the known ones.
    public init(name: String) throws(OutboxError) {
        guard let known = Self(rawValue: name) else {
            throw .invalidConfiguration("unknown destination '\(name)': the destinations are \(Self.allCases.map(\.name).joined(separator: ", "))")
        }
        self = known
    }

    /// What the destination is (SPEC D1): its fields, its credential, its headers and its wire, declared beside the
    /// wire. The one switch over destinations in the library: everything else reads the spec.
    package var spec: DestinationSpec {
        switch self {
        case .appCenter: AppCenterWire.spec
        case .otlp: OTLPWire.spec
        case .posthog: PostHogWire.spec
        case .segment: SegmentWire.spec
        case .amplitude: AmplitudeWire.spec
        case .mixpanel: MixpanelWire.spec
        case .sensors: SensorsWire.spec
        case .ga4: GA4Wire.spec
        }
    }

    /// SPEC D1: the headers this destination's wire sets itself (a user header of one of these names is refused).
    public var wireHeaders: [String] { spec.headers }
}

/// One header the user adds to every request (a proxy's token, a tenant): `Name: value`.
public struct HeaderField: Sendable, Equatable, CustomStringConvertible {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    /// `Name: value`, as `--header` and a header file write it; a line without a colon, or a header that
    /// `Configuration.validate()` would refuse, is refused here already.
    public init(line: String) throws(OutboxError) {
        guard let colon = line.firstIndex(of: ":") else {
            throw .invalidConfiguration("a header has no colon: write it as 'Name: value' (the text is not shown: it may be a secret)")
        }
        let name = String(line[..<colon]).trimmingSpaceAndTab
        let value = String(line[line.index(after: colon)...]).trimmingSpaceAndTab
        guard !name.isEmpty else { throw .invalidConfiguration("a header has no name before its colon: write it as 'Name: value'") }
        self.init(name, value)
        if let problem { throw .invalidConfiguration(problem) }
    }

    /// The name only: a header's value may be a secret, and descriptions reach logs.
    public var description: String { "\(name): …" }

    /// Headers the transport sets or that would change how the body is read, and those every wire sets: the user
    /// may not set them whatever the destination. A header only some wires set (`App-Secret`, `Authorization`) is
    /// refused for those (`refusal(for:)`).
    static let reserved: Set<String> = {
        let perWire = Destination.allCases.map { Set($0.wireHeaders.map { $0.lowercased() }) }
        let everyWire = perWire.dropFirst().reduce(perWire.first ?? []) { $0.intersection($1) }
        return Set(["content-length", "transfer-encoding", "host", "connection", "expect"]).union(everyWire)
    }()

    /// Why the header cannot be sent to `destination` (SPEC D1): its wire sets a header of that name itself, which
    /// would go out twice. The message names the header and the destination, never the value.
    func refusal(for destination: Destination) -> String? {
        if let problem { return problem }
        guard destination.wireHeaders.contains(where: { $0.lowercased() == name.lowercased() }) else { return nil }
        return "header \(name) is set by the \(destination) destination itself and cannot be given for it"
            + " (its credentials go in their own field)"
    }

    /// Why the header cannot be sent, or nil. The message names the header, never its value.
    var problem: String? {
        let tokenCharacters = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".unicodeScalars)
        guard !name.isEmpty, name.unicodeScalars.allSatisfy(tokenCharacters.contains) else {
            return "header name '\(Self.redacted(name))' is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"
        }
        if Self.reserved.contains(name.lowercased()) {
            return "header \(name) is set by the engine and cannot be given (credentials go in their own field)"
        }
        if value.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }) {
            return "header \(name) has a control character in its value"
        }
        return nil
    }

    /// The part of a line shown in an error: at most the text before a colon, so that a value never appears.
    private static func redacted(_ text: String) -> String {
        String((text.split(separator: ":", maxSplits: 1).first ?? "").prefix(40))
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    var trimmingSpaceAndTab: String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
