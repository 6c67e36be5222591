import ArgumentParser
import FoundationEssentials
import Glibc
import Outbox

/// SPEC D1: where `emit`, `demo` and `fleet` deliver — the destination, and headers for every request, given as
/// flags or (kept out of `ps`) in a file.
struct DestinationOptions: ParsableArguments {
    /// Read by `Destination(name:)` rather than argument-parser's own `ExpressibleByArgument` parse: its refusal lists
    /// the destinations in the engine's words, as the C configuration's does.
    @Option(name: .customLong("destination"),
            help: ArgumentHelp("Where to deliver: \(Destination.allCases.map(\.name).joined(separator: ", ")) (default appcenter).",
                               valueName: "name"),
            completion: .list(Destination.allCases.map(\.name)),
            transform: { name in try DestinationOptions.destination(named: name) })
    var chosen: Destination?
    @Option(name: .customLong("header"), help: ArgumentHelp("A header for every request, 'Name: value' (repeatable).",
                                                             valueName: "header"))
    var headers: [String] = []
    @Option(help: ArgumentHelp("A file of headers, one 'Name: value' a line (blank lines and lines starting with # skipped).",
                               valueName: "path"))
    var headerFile: String?
    @Option(help: ArgumentHelp("How OTLP requests are written: protobuf (default) or json.", valueName: "encoding"))
    var otlpEncoding: String?
    @Option(help: ArgumentHelp("PostHog's project API key (shown by ps: prefer --api-key-file or OUTBOX_API_KEY; not taken for amplitude).",
                               valueName: "key"))
    var apiKey: String?
    @Option(help: ArgumentHelp("A file holding PostHog's or Amplitude's project API key.", valueName: "path"))
    var apiKeyFile: String?

    @Option(help: ArgumentHelp("The Segment-compatible source's write key (shown by ps: prefer --write-key-file or OUTBOX_WRITE_KEY).",
                               valueName: "key"))
    var writeKey: String?
    @Option(help: ArgumentHelp("A file holding the Segment-compatible source's write key.", valueName: "path"))
    var writeKeyFile: String?
    @Option(help: ArgumentHelp("The Segment-compatible server: segment (default) or rudderstack.", valueName: "profile"))
    var segmentProfile: String?

    @Option(help: ArgumentHelp("A file holding Mixpanel's project token (or OUTBOX_PROJECT_TOKEN).", valueName: "path"))
    var projectTokenFile: String?
    @Option(help: ArgumentHelp("A Mixpanel service account's user name (with --service-account-secret-file and --project-id).",
                               valueName: "user"))
    var serviceAccountUser: String?
    @Option(help: ArgumentHelp("A file holding the Mixpanel service account's secret (or OUTBOX_SERVICE_ACCOUNT_SECRET).",
                               valueName: "path"))
    var serviceAccountSecretFile: String?
    @Option(help: ArgumentHelp("The Mixpanel project's id (required with a service account).", valueName: "id"))
    var projectId: Int?
    @Option(help: ArgumentHelp("GA4's measurement id (G-XXXXXXXXXX).", valueName: "id"))
    var measurementId: String?
    @Option(help: ArgumentHelp("A file holding GA4's Measurement Protocol API secret (or OUTBOX_API_SECRET).", valueName: "path"))
    var apiSecretFile: String?

    /// The name of the `--to` destination these options read (docs/BEHAVIOUR.md D15), or nil for the single
    /// destination's flags: it names the environment variables of its credentials (`OUTBOX_<NAME>_API_KEY`), and the
    /// single destination's variables (`OUTBOX_API_KEY`, `OTEL_EXPORTER_OTLP_*`) are not read for it.
    var named: String? = nil

    /// `--destination`, else App Center's wire.
    var destination: Destination { chosen ?? .appCenter }

    static let apiKeySecret = SecretOption.apiKey
    static let writeKeySecret = SecretOption.writeKey

    /// The flag of each destination field this group holds, by its `Configuration.schema` name, and whether it was
    /// given. App Center's `appSecret` is not here: `--app-secret` belongs to `emit` and `fleet` (the fleet always
    /// gives its mock a secret), and is accepted with any destination.
    var fieldFlags: [(field: String, flag: String, given: Bool)] {
        [("otlpEncoding", "--otlp-encoding", otlpEncoding != nil),
         ("apiKey", "--api-key", apiKey != nil || apiKeyFile != nil),
         ("writeKey", "--write-key", writeKey != nil || writeKeyFile != nil),
         ("segmentProfile", "--segment-profile", segmentProfile != nil),
         ("projectToken", "--project-token-file", projectTokenFile != nil),
         ("serviceAccountUser", "--service-account-user", serviceAccountUser != nil),
         ("serviceAccountSecret", "--service-account-secret-file", serviceAccountSecretFile != nil),
         ("projectId", "--project-id", projectId != nil),
         ("measurementId", "--measurement-id", measurementId != nil),
         ("apiSecret", "--api-secret-file", apiSecretFile != nil)]
    }

    /// The flags given, `--destination` first: `--to` refuses them, each destination's fields going inside it.
    var givenFlags: [String] {
        (chosen != nil ? ["--destination"] : []) + (headers.isEmpty ? [] : ["--header"]) + (headerFile != nil ? ["--header-file"] : [])
            + fieldFlags.filter(\.given).map(\.flag)
    }

    func validate() throws {
        _ = try parsedHeaders()
        _ = try parsedOTLPEncoding()
        // SPEC D1: the fields another destination's spec owns are refused by their flags.
        for other in Destination.allCases where other != destination {
            let flags = fieldFlags.filter { other.spec.fields.contains($0.field) && !destination.spec.fields.contains($0.field) }
            guard flags.contains(where: \.given) else { continue }
            // A field several destinations own (`apiKey`: PostHog's and Amplitude's) names them all.
            let owners = Destination.allCases.filter { owner in owner != destination && flags.allSatisfy { owner.spec.fields.contains($0.field) } }
            throw ValidationError("\(flags.map(\.flag).joined(separator: " and ")) \(flags.count == 1 ? "belongs" : "belong") to \(owners.map { "--destination \($0)" }.joined(separator: " or ")), not to \(destination)")
        }
        if destination == .amplitude && apiKey != nil {
            // A new wire's secret goes in a file or the environment only: a flag's value shows in ps.
            throw ValidationError("--api-key is not taken for --destination amplitude: give --api-key-file or OUTBOX_API_KEY")
        }
        _ = try Self.apiKeySecret.resolve(value: apiKey, file: apiKeyFile, destination: named)
        _ = try Self.writeKeySecret.resolve(value: writeKey, file: writeKeyFile, destination: named)
        _ = try SecretOption.apiSecret.resolve(value: nil, file: apiSecretFile, destination: named)
        _ = try parsedSegmentProfile()
        if destination == .mixpanel {
            if let projectId, projectId <= 0 { throw ValidationError("--project-id must be a positive number, got \(projectId)") }
            if serviceAccountUser != nil && projectId == nil {
                throw ValidationError("--service-account-user needs --project-id")
            }
            _ = try resolved(.projectToken)
            _ = try resolved(.serviceAccountSecret)
            if let serviceAccountUser, serviceAccountUser.isEmpty { throw ValidationError("--service-account-user is empty") }
        }
    }

    /// SPEC D1: the secret flag of the credential the destination's spec requires, if any.
    var requiredSecret: SecretOption? {
        // Mixpanel: the service account's secret when one is named, else the project token.
        if destination == .mixpanel && serviceAccountUser != nil { return .serviceAccountSecret }
        return destination.spec.credential.flatMap { credential in SecretOption.allCases.first { $0.field == credential.field } }
    }

    /// SPEC D1: the usage error for a destination sent to without its credential, given `resolved` — the secret from
    /// its flag, file or environment. The default destination is chosen by `--endpoint` alone, so that names it.
    func checkCredential(endpoint: String?, resolved: (SecretOption) throws -> String?) throws {
        guard endpoint != nil, let secret = requiredSecret, try resolved(secret) == nil else { return }
        if let named {
            // D15: a destination of `--to` takes its credentials from a file or its own variable only.
            throw ValidationError("\(destination) needs \(secret.flag.dropFirst(2))-file=PATH or \(secret.environment(destination: named))")
        }
        let chooser = destination == Configuration(storePath: "").destination ? "--endpoint" : "--destination \(destination)"
        let plain = Self.filesOnly.contains(destination) ? "" : "\(secret.flag), "
        throw ValidationError("\(chooser) needs \(plain)\(secret.flag)-file or \(secret.environment)")
    }

    /// SPEC D11, D12: the destination's own fields as its spec checks them (Sensors' project in `--endpoint`, GA4's
    /// `--measurement-id`), refused naming the flag.
    func checkFields(endpoint: String?) throws {
        var configuration = Configuration(storePath: "")
        configuration.endpoint = endpoint
        try apply(to: &configuration)
        guard let problem = destination.spec.fieldProblem?(configuration) else { return }
        let flag = problem.field == "endpoint" ? "--endpoint" : fieldFlags.first { $0.field == problem.field }?.flag ?? problem.field
        throw ValidationError("\(flag) \(problem.message)")
    }

    /// SPEC X3a: `--endpoint` as the engine will take it, or a usage error naming the flag and what is wrong.
    static func checkEndpoint(_ endpoint: String?) throws {
        if let endpoint, let problem = Configuration.endpointProblem(endpoint) {
            throw ValidationError("--endpoint must be an absolute http:// or https:// URL with a host; \(problem), got '\(endpoint)'")
        }
    }

    func parsedOTLPEncoding() throws -> OTLPEncoding {
        guard let otlpEncoding else { return .protobuf }
        do {
            return try OTLPEncoding(name: otlpEncoding)
        } catch {
            throw ValidationError("--otlp-encoding must be protobuf or json, got '\(otlpEncoding)'")
        }
    }

    /// SPEC D1: for OTLP without `--endpoint`, the OpenTelemetry SDKs' variables: `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`
    /// (the whole URL, `/v1/logs` included: the engine uses an endpoint ending in its wire's path as it is) or
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (the base, which gets `/v1/logs`).
    func environmentEndpoint() -> String? {
        guard destination == .otlp, named == nil else { return nil }
        return Self.environment("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") ?? Self.environment("OTEL_EXPORTER_OTLP_ENDPOINT")
    }

    /// SPEC D1: for OTLP without `--header` or `--header-file`, `OTEL_EXPORTER_OTLP_LOGS_HEADERS` or
    /// `OTEL_EXPORTER_OTLP_HEADERS`: `name=value` pairs separated by commas, values percent-encoded (W3C Baggage).
    func environmentHeaders() throws -> [HeaderField] {
        guard destination == .otlp, named == nil, headers.isEmpty, headerFile == nil else { return [] }
        let variable = Self.environment("OTEL_EXPORTER_OTLP_LOGS_HEADERS") != nil ? "OTEL_EXPORTER_OTLP_LOGS_HEADERS" : "OTEL_EXPORTER_OTLP_HEADERS"
        guard let text = Self.environment(variable) else { return [] }
        var fields: [HeaderField] = []
        for pair in text.split(separator: ",") {
            guard let equals = pair.firstIndex(of: "=") else {
                throw ValidationError("\(variable): a pair without '=' (write name=value,name=value)")
            }
            let name = String(pair[..<equals]).trimmingCharacters(in: .whitespaces)
            let value = String(pair[pair.index(after: equals)...]).trimmingCharacters(in: .whitespaces)
            fields.append(try Self.field("\(name): \(value.removingPercentEncoding ?? value)", flag: variable))
        }
        return fields
    }

    private static func environment(_ name: String) -> String? {
        guard let value = getenv(name), value[0] != 0 else { return nil }
        return String(cString: value)
    }

    static func destination(named name: String) throws -> Destination {
        do {
            return try Destination(name: name)
        } catch {
            throw ValidationError("--destination: \(Self.message(error))")
        }
    }

    /// The `--header` flags, then the file's lines, each checked as the engine will.
    func parsedHeaders() throws -> [HeaderField] {
        var fields: [HeaderField] = []
        for line in headers {
            fields.append(try Self.field(line, flag: "--header"))
        }
        if let headerFile {
            let text = try SecretOption.read(headerFile, flag: "--header-file")
            for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = raw.hasSuffix("\r") ? String(raw.dropLast()) : String(raw)
                if line.allSatisfy({ $0 == " " || $0 == "\t" }) || line.hasPrefix("#") { continue }
                fields.append(try Self.field(line, flag: "--header-file \(headerFile), line \(number + 1)"))
            }
        }
        return fields
    }

    func parsedSegmentProfile() throws -> SegmentProfile {
        guard let segmentProfile else { return .segment }
        do {
            return try SegmentProfile(name: segmentProfile)
        } catch {
            throw ValidationError("--segment-profile must be segment or rudderstack, got '\(segmentProfile)'")
        }
    }

    /// The Segment write key given by flag, file or environment (`OUTBOX_WRITE_KEY`), else nil.
    func resolvedWriteKey() throws -> String? {
        guard destination == .segment else { return nil }
        return try Self.writeKeySecret.resolve(value: writeKey, file: writeKeyFile, destination: named)
    }

    /// The PostHog key given by flag, file or environment (`OUTBOX_API_KEY`), else nil; Amplitude's by file or
    /// environment.
    func resolvedAPIKey() throws -> String? {
        guard destination == .posthog || destination == .amplitude else { return nil }
        return try Self.apiKeySecret.resolve(value: destination == .amplitude ? nil : apiKey, file: apiKeyFile, destination: named)
    }

    /// The destinations whose secrets are given by file or environment only (a flag's value shows in ps).
    static let filesOnly: Set<Destination> = [.amplitude, .mixpanel, .ga4]

    /// SPEC D14: Mixpanel's secrets, by file or environment, else nil (nil for another destination).
    func resolved(_ secret: SecretOption) throws -> String? {
        guard destination == .mixpanel else { return nil }
        switch secret {
        case .projectToken: return try secret.resolve(value: nil, file: projectTokenFile, destination: named)
        case .serviceAccountSecret: return try secret.resolve(value: nil, file: serviceAccountSecretFile, destination: named)
        default: return nil
        }
    }

    /// GA4's API secret given by file or environment (`OUTBOX_API_SECRET`), else nil.
    func resolvedAPISecret() throws -> String? {
        guard destination == .ga4 else { return nil }
        return try SecretOption.apiSecret.resolve(value: nil, file: apiSecretFile, destination: named)
    }

    /// The destination's credential `secret`, however given, else nil; App Center's app secret is `appSecret`'s (it is
    /// `emit`'s and `fleet`'s flag, or a `--to` item).
    func resolvedCredential(_ secret: SecretOption, appSecret: () throws -> String?) throws -> String? {
        switch secret {
        case .appSecret: try appSecret()
        case .apiKey: try resolvedAPIKey()
        case .writeKey: try resolvedWriteKey()
        case .projectToken, .serviceAccountSecret: try resolved(secret)
        case .apiSecret: try resolvedAPISecret()
        }
    }

    /// The destination's fields into `configuration`; `testKeys` stands in for a key not given (the demo's and the
    /// fleet's own mock takes any).
    func apply(to configuration: inout Configuration, testKeys: Bool = false) throws {
        configuration.destination = destination
        configuration.apiKey = try resolvedAPIKey() ?? (testKeys ? "phc_outbox_test" : "")
        configuration.writeKey = try resolvedWriteKey() ?? (testKeys ? "outbox-test-write-key" : "")
        configuration.segmentProfile = try parsedSegmentProfile()
        if destination == .mixpanel {
            configuration.serviceAccountUser = serviceAccountUser ?? ""
            configuration.serviceAccountSecret = try resolved(.serviceAccountSecret) ?? ""
            configuration.projectId = projectId
            // The token stands in only when no service account is named (both are refused).
            let token = serviceAccountUser == nil ? try resolved(.projectToken) : nil
            configuration.projectToken = token ?? (testKeys && serviceAccountUser == nil ? "outbox-test-token" : "")
        }
        configuration.measurementId = measurementId ?? (testKeys && destination == .ga4 ? "G-OUTBOX0TEST" : "")
        configuration.apiSecret = try resolvedAPISecret() ?? (testKeys && destination == .ga4 ? "outbox-test-api-secret" : "")
        configuration.headers = try parsedHeaders() + environmentHeaders()
        configuration.otlpEncoding = try parsedOTLPEncoding()
    }

    private static func field(_ line: String, flag: String) throws -> HeaderField {
        do {
            return try HeaderField(line: line)
        } catch {
            throw ValidationError("\(flag): \(message(error))")
        }
    }

    /// An engine's error without its "invalid configuration: " prefix.
    static func message(_ error: any Error) -> String {
        if case OutboxError.invalidConfiguration(let text) = error { return text }
        return "\(error)"
    }
}
