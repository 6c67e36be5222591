import FoundationEssentials

/// SPEC D15: one of an engine's destinations — a name and a wire with everything that wire takes. The engine-wide
/// fields (batching, intervals, retries, the store) stay `Configuration`'s own.
///
/// ```swift
/// var configuration = Configuration(storePath: "/var/lib/app/outbox.sqlite")
/// var ops = NamedDestination(name: "ops", destination: .otlp, endpoint: "http://collector:4318")
/// var product = NamedDestination(name: "product", destination: .posthog, endpoint: "https://eu.i.posthog.com")
/// product.apiKey = "phc_…"
/// configuration.destinations = [ops, product]
/// ```
///
/// With `destinations` empty, the single-destination fields of `Configuration` are a list of one named `default`.
public struct NamedDestination: Sendable, Equatable, CustomStringConvertible {
    /// `[a-z0-9_-]{1,32}`, unique in the list, also after `-` → `_` (the environment's credential names). nil on the
    /// first element only: it keeps the name `default`, so that a list grown from one destination loses nothing.
    public var name: String?
    public var destination: Destination = .appCenter
    public var endpoint: String? = nil
    public var appSecret = ""
    public var apiKey = ""
    public var writeKey = ""
    public var segmentProfile: SegmentProfile = .segment
    public var otlpEncoding: OTLPEncoding = .protobuf
    public var projectToken = ""
    public var serviceAccountUser = ""
    public var serviceAccountSecret = ""
    public var projectId: Int? = nil
    public var measurementId = ""
    public var apiSecret = ""
    public var headers: [HeaderField] = []
    public var caFile: String? = nil
    public var clientCertificate: String? = nil
    public var clientKey: String? = nil
    public var pinnedPublicKey: String? = nil
    /// SPEC H2–H4: this destination's policy, as `Configuration`'s fields of the same names say.
    public var include: [String]? = nil
    public var exclude: [String] = []
    public var redact: [String] = []
    public var sample: [String: Double] = [:]

    public init(name: String?, destination: Destination = .appCenter, endpoint: String? = nil) {
        self.name = name
        self.destination = destination
        self.endpoint = endpoint
    }

    /// The destination `configuration`'s single-destination fields describe, under `name`.
    public init(name: String?, from configuration: Configuration) {
        self.name = name
        destination = configuration.destination
        endpoint = configuration.endpoint
        appSecret = configuration.appSecret
        apiKey = configuration.apiKey
        writeKey = configuration.writeKey
        segmentProfile = configuration.segmentProfile
        otlpEncoding = configuration.otlpEncoding
        projectToken = configuration.projectToken
        serviceAccountUser = configuration.serviceAccountUser
        serviceAccountSecret = configuration.serviceAccountSecret
        projectId = configuration.projectId
        measurementId = configuration.measurementId
        apiSecret = configuration.apiSecret
        headers = configuration.headers
        caFile = configuration.caFile
        clientCertificate = configuration.clientCertificate
        clientKey = configuration.clientKey
        pinnedPublicKey = configuration.pinnedPublicKey
        include = configuration.include
        exclude = configuration.exclude
        redact = configuration.redact
        sample = configuration.sample
    }

    /// Writes this destination's fields into `configuration`'s single-destination ones: a destination's driver, wire
    /// and transport are made from the configuration that results, exactly as a single destination's are.
    func apply(to configuration: inout Configuration) {
        configuration.destination = destination
        configuration.endpoint = endpoint
        configuration.appSecret = appSecret
        configuration.apiKey = apiKey
        configuration.writeKey = writeKey
        configuration.segmentProfile = segmentProfile
        configuration.otlpEncoding = otlpEncoding
        configuration.projectToken = projectToken
        configuration.serviceAccountUser = serviceAccountUser
        configuration.serviceAccountSecret = serviceAccountSecret
        configuration.projectId = projectId
        configuration.measurementId = measurementId
        configuration.apiSecret = apiSecret
        configuration.headers = headers
        configuration.caFile = caFile
        configuration.clientCertificate = clientCertificate
        configuration.clientKey = clientKey
        configuration.pinnedPublicKey = pinnedPublicKey
        configuration.include = include
        configuration.exclude = exclude
        configuration.redact = redact
        configuration.sample = sample
    }

    /// Its name, wire and endpoint: never a credential or a header's value (they may be secrets).
    public var description: String {
        "\(name ?? NamedDestination.defaultName)=\(destination.name) \(endpoint.map { maskingCredentials(in: $0) } ?? "(no endpoint)")"
    }

    /// The name of the destination a configuration without a list has, and of a list's unnamed first element.
    public static let defaultName = "default"

    /// Why `name` cannot name a destination, or nil (SPEC D15).
    public static func nameProblem(_ name: String) -> String? {
        guard (1...32).contains(name.utf8.count) else {
            return "a destination's name is 1 to 32 characters, got '\(name)' (\(name.utf8.count))"
        }
        guard name.utf8.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F || $0 == 0x2D }) else {
            return "a destination's name holds only a-z, 0-9, '_' and '-', got '\(name)'"
        }
        return nil
    }
}

extension Configuration {
    /// SPEC D15: the destinations this configuration delivers to, each named, in order: `destinations`, or the
    /// single-destination fields as one named `default`. Empty when nothing has an endpoint (store only).
    public var namedDestinations: [NamedDestination] {
        guard !destinations.isEmpty else {
            return endpoint == nil ? [] : [NamedDestination(name: NamedDestination.defaultName, from: self)]
        }
        return destinations.enumerated().map { index, element in
            var named = element
            if index == 0 && named.name == nil { named.name = NamedDestination.defaultName }
            return named
        }
    }

    /// SPEC H2–H4: the single destination's policy, compiled; nil when it asks for nothing.
    var policy: DestinationPolicy? {
        DestinationPolicy.make(include: include, exclude: exclude, redact: redact, sample: sample)
    }

    /// The configuration one destination's delivery is made from: this one with that destination's fields.
    func delivering(to destination: NamedDestination) -> Configuration {
        var configuration = self
        configuration.destinations = []
        destination.apply(to: &configuration)
        return configuration
    }

    /// SPEC D15: the list's own problems — names, duplicates, the single-destination fields set beside a list — and
    /// each destination's, as a single destination's are checked; nil when there are none.
    func destinationsProblem() throws(OutboxError) {
        guard !destinations.isEmpty else { return }
        let lone = NamedDestination(name: nil, from: Configuration(storePath: storePath))
        let given = NamedDestination(name: nil, from: self)
        if given.destination != lone.destination || given.endpoint != nil || !given.headers.isEmpty
            || given.include != nil || !given.exclude.isEmpty || !given.redact.isEmpty || !given.sample.isEmpty
            || [given.appSecret, given.apiKey, given.writeKey, given.projectToken, given.apiSecret, given.measurementId,
                given.serviceAccountUser, given.serviceAccountSecret].contains(where: { !$0.isEmpty }) {
            throw .invalidConfiguration("destinations is given together with the single destination's fields (destination, endpoint, credentials, headers, policy): give every destination in the list")
        }
        var seen: [String: String] = [:]
        for (index, element) in destinations.enumerated() {
            guard let name = element.name ?? (index == 0 ? NamedDestination.defaultName : nil) else {
                throw .invalidConfiguration("destinations[\(index)] has no name: only the first destination may go without one (it is '\(NamedDestination.defaultName)')")
            }
            if let problem = NamedDestination.nameProblem(name) {
                throw .invalidConfiguration("destinations[\(index)]: \(problem)")
            }
            let folded = String(name.map { $0 == "-" ? "_" : $0 })
            if let earlier = seen[folded] {
                throw .invalidConfiguration(earlier == name
                    ? "destinations holds '\(name)' twice: each name once"
                    : "destinations holds '\(earlier)' and '\(name)', the same name once '-' is read as '_' (as in OUTBOX_<NAME>_<CREDENTIAL>)")
            }
            seen[folded] = name
            guard element.endpoint != nil else {
                throw .invalidConfiguration("destination '\(name)' has no endpoint")
            }
            do {
                try delivering(to: element).validate()
            } catch {
                if case .invalidConfiguration(let message) = error {
                    throw .invalidConfiguration("destination '\(name)': \(message)")
                }
                throw error
            }
        }
    }
}
