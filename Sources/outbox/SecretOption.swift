import ArgumentParser
import FoundationEssentials
import Glibc
import Outbox

/// A secret given on the command line, in a file, or in the environment (SPEC F5): a value in argv is seen by
/// every local user through `ps`, so each secret flag has a file form and an environment form too.
///
/// Every secret flag is a case here, and only here: `redacting(_:)` hides the values of all of them (SPEC K3), so a
/// secret flag added later is hidden in the fleet's report without a second list to keep.
enum SecretOption: CaseIterable, Sendable {
    case appSecret
    /// PostHog's project API key.
    case apiKey
    /// The Segment-compatible source's write key.
    case writeKey
    /// Mixpanel's project token (file or environment only: no plain flag).
    case projectToken
    /// A Mixpanel service account's secret (file or environment only: no plain flag).
    case serviceAccountSecret
    /// GA4's Measurement Protocol API secret: a file or the environment only, no plain flag.
    case apiSecret

    /// The `Configuration.schema` field it sets, as a destination's spec names its credential.
    var field: String {
        switch self {
        case .appSecret: "appSecret"
        case .apiKey: "apiKey"
        case .writeKey: "writeKey"
        case .projectToken: "projectToken"
        case .serviceAccountSecret: "serviceAccountSecret"
        case .apiSecret: "apiSecret"
        }
    }

    /// `--app-secret`.
    var flag: String {
        switch self {
        case .appSecret: "--app-secret"
        case .apiKey: "--api-key"
        case .writeKey: "--write-key"
        case .projectToken: "--project-token"
        case .serviceAccountSecret: "--service-account-secret"
        case .apiSecret: "--api-secret"
        }
    }

    /// `APP_SECRET`: the credential's part of its environment variable's name.
    var credential: String {
        switch self {
        case .appSecret: "APP_SECRET"
        case .apiKey: "API_KEY"
        case .writeKey: "WRITE_KEY"
        case .projectToken: "PROJECT_TOKEN"
        case .serviceAccountSecret: "SERVICE_ACCOUNT_SECRET"
        case .apiSecret: "API_SECRET"
        }
    }

    /// `OUTBOX_APP_SECRET`.
    var environment: String { environment(destination: nil) }

    /// The single destination's `OUTBOX_APP_SECRET`; for the destination `ops-eu` of `--to` (docs/BEHAVIOUR.md D15),
    /// `OUTBOX_OPS_EU_APP_SECRET`: its name upper-cased, `-` read as `_`.
    func environment(destination name: String?) -> String {
        guard let name else { return "OUTBOX_\(credential)" }
        return "OUTBOX_\(String(name.uppercased().map { $0 == "-" ? "_" : $0 }))_\(credential)"
    }

    /// Whether `flag` itself takes the secret; a secret of a newer wire has only its file and environment forms.
    var hasPlainFlag: Bool { self != .apiSecret }

    /// How the secret may be given, for a usage error: `--api-key, --api-key-file or OUTBOX_API_KEY`.
    var forms: String { (hasPlainFlag ? "\(flag), " : "") + "\(flag)-file or \(environment)" }

    /// Flags whose value holds a secret in part: a header's value (`Authorization: Bearer …`), not its name.
    static let headerFlags = ["--header"]

    /// `arguments` as they may be shown (SPEC K3): the value of every secret flag as `***` (`--app-secret ***`,
    /// `--app-secret=***`), a header's value as `***` after its name, and in every other argument a URL's userinfo and
    /// query values masked (`maskingCredentials`).
    static func redacting(_ arguments: [String]) -> [String] {
        let secretFlags = Set(allCases.map(\.flag))
        var out: [String] = []
        var hideNext: ((String) -> String)? = nil
        for argument in arguments {
            if let hide = hideNext {
                out.append(hide(argument))
                hideNext = nil
                continue
            }
            let (name, value) = argument.hasPrefix("--") ? split(argument) : (argument, nil)
            if secretFlags.contains(name) {
                if value != nil { out.append(name + "=***") } else { out.append(argument); hideNext = { _ in "***" } }
            } else if name == "--to" {
                // SPEC D15: a destination's headers and endpoint inside its `--to`.
                if let value { out.append(name + "=" + ToOptions.redacted(value)) } else { out.append(argument); hideNext = ToOptions.redacted }
            } else if headerFlags.contains(name) {
                if let value { out.append(name + "=" + headerHidden(value)) } else { out.append(argument); hideNext = headerHidden }
            } else {
                out.append(argument.contains("://") ? maskingCredentials(in: argument) : argument)
            }
        }
        return out
    }

    /// `--name=value` as its two parts; `--name` alone as the name and nil.
    private static func split(_ argument: String) -> (String, String?) {
        guard let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }

    /// `Name: value` as `Name: ***`; a line without a colon as `***` (it may be all value).
    private static func headerHidden(_ line: String) -> String {
        guard let colon = line.firstIndex(of: ":") else { return "***" }
        return line[..<colon] + ": ***"
    }

    /// The secret: the flag's value, else the file's content (one final newline dropped), else the environment
    /// variable's; nil when none is given. Two forms at once, an empty secret or an unreadable file are usage errors
    /// that name the flag, never the secret.
    /// `destination` is the name of a `--to` destination, whose variable is its own (`environment(destination:)`).
    func resolve(value: String?, file: String?, destination: String? = nil) throws -> String? {
        if value != nil && file != nil {
            throw ValidationError("give \(flag) or \(flag)-file, not both")
        }
        if let value {
            guard !value.isEmpty else { throw ValidationError("\(flag) is empty") }
            return value
        }
        if let file {
            var text = try Self.read(file, flag: "\(flag)-file")
            if text.hasSuffix("\n") { text.removeLast() }
            if text.hasSuffix("\r") { text.removeLast() }
            guard !text.isEmpty else { throw ValidationError("\(flag)-file \(file) is empty") }
            return text
        }
        if let raw = getenv(environment(destination: destination)), raw[0] != 0 { return String(cString: raw) }
        return nil
    }

    /// The file's text, or a usage error that names `flag`, the file and errno's text.
    static func read(_ path: String, flag: String) throws -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ValidationError("\(flag): cannot read \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw ValidationError("\(flag): cannot read \(path): \(String(cString: strerror(errno)))") }
            if n == 0 { break }
            bytes.append(contentsOf: buffer[0..<n])
            if bytes.count > 64 * 1024 { throw ValidationError("\(flag): \(path) is larger than 64 KiB; it must hold the secret alone") }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
