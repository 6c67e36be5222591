import ArgumentParser
import FoundationEssentials
import Glibc
import Outbox

/// SPEC D1: where `emit`, `demo` and `fleet` deliver — the destination, and headers for every request, given as
/// flags or (kept out of `ps`) in a file.
struct DestinationOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Where to deliver: \(Destination.all.map(\.name).joined(separator: ", ")) (default appcenter).",
                               valueName: "name"))
    var destination: String = Destination.appCenter.name
    @Option(name: .customLong("header"), help: ArgumentHelp("A header for every request, 'Name: value' (repeatable).",
                                                             valueName: "header"))
    var headers: [String] = []
    @Option(help: ArgumentHelp("A file of headers, one 'Name: value' a line (blank lines and lines starting with # skipped).",
                               valueName: "path"))
    var headerFile: String?
    @Option(help: ArgumentHelp("How OTLP requests are written: protobuf (default) or json.", valueName: "encoding"))
    var otlpEncoding: String?
    @Option(help: ArgumentHelp("PostHog's project API key (shown by ps: prefer --api-key-file or OUTBOX_API_KEY).",
                               valueName: "key"))
    var apiKey: String?
    @Option(help: ArgumentHelp("A file holding PostHog's project API key.", valueName: "path"))
    var apiKeyFile: String?

    @Option(help: ArgumentHelp("The Segment-compatible source's write key (shown by ps: prefer --write-key-file or OUTBOX_WRITE_KEY).",
                               valueName: "key"))
    var writeKey: String?
    @Option(help: ArgumentHelp("A file holding the Segment-compatible source's write key.", valueName: "path"))
    var writeKeyFile: String?
    @Option(help: ArgumentHelp("The Segment-compatible server: segment (default) or rudderstack.", valueName: "profile"))
    var segmentProfile: String?

    static let apiKeySecret = SecretOption.apiKey
    static let writeKeySecret = SecretOption.writeKey

    func validate() throws {
        let destination = try parsedDestination()
        _ = try parsedHeaders()
        _ = try parsedOTLPEncoding()
        if otlpEncoding != nil && destination != .otlp {
            throw ValidationError("--otlp-encoding belongs to --destination otlp, not to \(destination)")
        }
        if (apiKey != nil || apiKeyFile != nil) && destination != .posthog {
            throw ValidationError("--api-key belongs to --destination posthog, not to \(destination)")
        }
        _ = try Self.apiKeySecret.resolve(value: apiKey, file: apiKeyFile)
        if (writeKey != nil || writeKeyFile != nil || segmentProfile != nil) && destination != .segment {
            throw ValidationError("--write-key and --segment-profile belong to --destination segment, not to \(destination)")
        }
        _ = try Self.writeKeySecret.resolve(value: writeKey, file: writeKeyFile)
        _ = try parsedSegmentProfile()
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
        guard (try? parsedDestination()) == .otlp else { return nil }
        return Self.environment("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT") ?? Self.environment("OTEL_EXPORTER_OTLP_ENDPOINT")
    }

    /// SPEC D1: for OTLP without `--header` or `--header-file`, `OTEL_EXPORTER_OTLP_LOGS_HEADERS` or
    /// `OTEL_EXPORTER_OTLP_HEADERS`: `name=value` pairs separated by commas, values percent-encoded (W3C Baggage).
    func environmentHeaders() throws -> [HeaderField] {
        guard (try? parsedDestination()) == .otlp, headers.isEmpty, headerFile == nil else { return [] }
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

    func parsedDestination() throws -> Destination {
        do {
            return try Destination(name: destination)
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
        guard try parsedDestination() == .segment else { return nil }
        return try Self.writeKeySecret.resolve(value: writeKey, file: writeKeyFile)
    }

    /// The PostHog key given by flag, file or environment (`OUTBOX_API_KEY`), else nil.
    func resolvedAPIKey() throws -> String? {
        guard try parsedDestination() == .posthog else { return nil }
        return try Self.apiKeySecret.resolve(value: apiKey, file: apiKeyFile)
    }

    /// The destination's fields into `configuration`; `testKeys` stands in for a key not given (the demo's and the
    /// fleet's own mock takes any).
    func apply(to configuration: inout Configuration, testKeys: Bool = false) throws {
        configuration.destination = try parsedDestination()
        configuration.apiKey = try resolvedAPIKey() ?? (testKeys ? "phc_outbox_test" : "")
        configuration.writeKey = try resolvedWriteKey() ?? (testKeys ? "outbox-test-write-key" : "")
        configuration.segmentProfile = try parsedSegmentProfile()
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
    private static func message(_ error: any Error) -> String {
        if case OutboxError.invalidConfiguration(let text) = error { return text }
        return "\(error)"
    }
}
