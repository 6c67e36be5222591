import ArgumentParser
import FoundationEssentials
import Outbox

/// SPEC D15: several destinations on `emit` and `fleet`, one `--to NAME=WIRE[,key=value…]` each (repeatable); the
/// result is `Configuration.destinations`.
///
/// Each item is read by the single destination's own flag (`--to ops=otlp,encoding=json` as `--destination otlp
/// --otlp-encoding json`, through `DestinationOptions` and `TLSOptions`), so that one place decides each field; their
/// refusals are worded back in the item's words. A destination's credentials come from its `<credential>-file=` item
/// or from `OUTBOX_<NAME>_<CREDENTIAL>`, never from the single destination's variables (`OUTBOX_API_KEY`,
/// `OTEL_EXPORTER_OTLP_*`). A value holds no comma (percent-encode one in a URL).
struct ToOptions: ParsableArguments {
    @Option(name: .customLong("to"), help: ArgumentHelp(
        "A destination of several (repeatable): NAME=WIRE[,endpoint=URL][,encoding=E][,profile=P][,measurement-id=ID][,project-id=N][,header=Name: value][,header-file=PATH][,<credential>-file=PATH][,service-account-user=U][,ca-file=…][,client-certificate=…][,client-key=…][,pinned-public-key=…][,include=A|B*][,exclude=…][,redact=…][,sample=debug*:0.1|*:0.5]; credentials otherwise from OUTBOX_<NAME>_<CREDENTIAL>. Not with --destination, --endpoint or their flags.",
        valueName: "name=wire,…"))
    var items: [String] = []

    var isEmpty: Bool { items.isEmpty }

    /// Where an item goes: one of the single destination's flags (`DestinationOptions`, `TLSOptions`), or a field
    /// the command holds itself (`--endpoint`, `--app-secret-file`).
    enum Reader { case destination, tls, endpoint, appSecret, policy }

    /// Every item key, the single destination's flag that reads it, and whether it may repeat.
    static let keys: [(key: String, flag: String, reader: Reader, repeats: Bool)] = [
        ("endpoint", "--endpoint", .endpoint, false),
        ("encoding", "--otlp-encoding", .destination, false),
        ("profile", "--segment-profile", .destination, false),
        ("measurement-id", "--measurement-id", .destination, false),
        ("project-id", "--project-id", .destination, false),
        ("header", "--header", .destination, true),
        ("header-file", "--header-file", .destination, false),
        ("app-secret-file", "--app-secret-file", .appSecret, false),
        ("api-key-file", "--api-key-file", .destination, false),
        ("write-key-file", "--write-key-file", .destination, false),
        ("api-secret-file", "--api-secret-file", .destination, false),
        ("project-token-file", "--project-token-file", .destination, false),
        ("service-account-user", "--service-account-user", .destination, false),
        ("service-account-secret-file", "--service-account-secret-file", .destination, false),
        ("ca-file", "--ca-file", .tls, false),
        ("client-certificate", "--client-certificate", .tls, false),
        ("client-key", "--client-key", .tls, false),
        ("pinned-public-key", "--pinned-public-key", .tls, false),
        // BEHAVIOUR H2–H4: only inside --to; `|` between names, `name:rate` for sample.
        ("include", "", .policy, false),
        ("exclude", "", .policy, false),
        ("redact", "", .policy, false),
        ("sample", "", .policy, false),
    ]

    /// SPEC D15: `--to` beside the single destination's flags (`emit`'s and `fleet`'s alike) is refused, naming the
    /// first of them and where its value goes instead.
    func refuseBeside(_ destination: DestinationOptions, _ tls: TLSOptions, endpoint: String?, appSecret: String?,
                      appSecretFile: String?) throws {
        let flags = destination.givenFlags + (endpoint != nil ? ["--endpoint"] : []) + (appSecret != nil ? ["--app-secret"] : [])
            + (appSecretFile != nil ? ["--app-secret-file"] : []) + tls.givenFlags
        guard !items.isEmpty, let flag = flags.first else { return }
        let inside = Self.key(forFlag: flag).map { "give \($0)= inside each --to" }
            ?? (flag == "--destination" ? "give each destination's wire as --to NAME=WIRE" : "give it inside each --to")
        throw ValidationError("--to and \(flag) do not go together: \(flag) is the single destination's; \(inside)")
    }

    /// The destinations, in order. `endpointRequired`: `emit`'s, which sends each where it says; the fleet's go to its
    /// own server when they name none, and a credential not given stands in as the single destination's do there
    /// (`testKeys`, `testAppSecret`). The list is checked as the engine will check it.
    func destinations(endpointRequired: Bool = true, testKeys: Bool = false, testAppSecret: String? = nil) throws -> [NamedDestination] {
        let list = try items.map { try Self.destination($0, endpointRequired: endpointRequired, testKeys: testKeys,
                                                           testAppSecret: testAppSecret) }
        // The list's own rules (names once, also after `-` → `_`) and each destination's, as the engine checks them;
        // a fleet destination without an endpoint is checked at its server's place.
        var check = Configuration(storePath: "-")
        check.destinations = list.map { named in
            var named = named
            if named.endpoint == nil {
                let base = "http://127.0.0.1:1"
                named.endpoint = named.destination.spec.endpointAtBase.map { $0(base) } ?? base
            }
            return named
        }
        do {
            try check.validate()
        } catch {
            throw ValidationError("--to: \(DestinationOptions.message(error))")
        }
        return list
    }

    /// One `--to` item as a destination, or a usage error naming it.
    static func destination(_ item: String, endpointRequired: Bool, testKeys: Bool, testAppSecret: String?) throws -> NamedDestination {
        guard let equals = item.firstIndex(of: "=") else {
            throw ValidationError("--to takes NAME=WIRE[,key=value…], got '\(redacted(item))'")
        }
        let name = String(item[..<equals])
        if let problem = NamedDestination.nameProblem(name) { throw ValidationError("--to: \(problem)") }
        let parts = item[item.index(after: equals)...].split(separator: ",", omittingEmptySubsequences: false)
        let wireName = String(parts.first ?? "")
        let wire: Destination
        do {
            wire = try Destination(name: wireName)
        } catch {
            throw ValidationError("--to \(name): \(DestinationOptions.message(error))")
        }
        var destinationFlags = ["--destination=" + wireName]
        var tlsFlags: [String] = []
        var endpoint: String?
        var appSecretFile: String?
        var given: Set<String> = []
        var policy: [String: String] = [:]
        for (index, part) in parts.enumerated().dropFirst() {
            guard let equals = part.firstIndex(of: "="), let entry = keys.first(where: { part[..<equals] == $0.key }) else {
                throw ValidationError("--to \(name): \(unknownItem(part, index: index, name: name))")
            }
            guard entry.repeats || given.insert(entry.key).inserted else {
                throw ValidationError("--to \(name): \(entry.key)= is given twice")
            }
            let value = String(part[part.index(after: equals)...])
            switch entry.reader {
            // `--flag=value`: a value that starts with `-` stays the flag's.
            case .destination: destinationFlags.append(entry.flag + "=" + value)
            case .tls: tlsFlags.append(entry.flag + "=" + value)
            case .endpoint: endpoint = value
            case .appSecret: appSecretFile = value
            case .policy: policy[entry.key] = value
            }
        }
        do {
            var destination = try reading(name: name, wire: wire, destinationFlags: destinationFlags, tlsFlags: tlsFlags,
                               endpoint: endpoint, appSecretFile: appSecretFile, endpointRequired: endpointRequired,
                               testKeys: testKeys, testAppSecret: testAppSecret)
            try applyPolicy(policy, to: &destination)
            return destination
        } catch let error as ValidationError {
            throw ValidationError("--to \(name): \(inItemWords(error.message))")
        }
    }

    /// BEHAVIOUR H2–H4: `include=`, `exclude=`, `redact=` as names between `|`, `sample=` as `name:rate` items
    /// between `|`; the names and rates are checked with the list, as the engine checks them.
    static func applyPolicy(_ items: [String: String], to destination: inout NamedDestination) throws {
        func names(_ value: String) -> [String] { value.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
        if let value = items["include"] { destination.include = names(value) }
        if let value = items["exclude"] { destination.exclude = names(value) }
        if let value = items["redact"] { destination.redact = names(value) }
        if let value = items["sample"] {
            for item in names(value) {
                guard let colon = item.lastIndex(of: ":"), let rate = Double(item[item.index(after: colon)...]) else {
                    throw ValidationError("sample= takes name:rate items between '|' (debug*:0.1|*:0.5), got '\(item)'")
                }
                let name = String(item[..<colon])
                guard destination.sample.updateValue(rate, forKey: name) == nil else {
                    throw ValidationError("sample= gives '\(name)' twice")
                }
            }
        }
    }

    /// The destination the single destination's flags make of the item's values.
    private static func reading(name: String, wire: Destination, destinationFlags: [String], tlsFlags: [String],
                                endpoint: String?, appSecretFile: String?, endpointRequired: Bool, testKeys: Bool,
                                testAppSecret: String?) throws -> NamedDestination {
        var options: DestinationOptions
        let tls: TLSOptions
        do {
            options = try DestinationOptions.parse(destinationFlags)
            tls = try TLSOptions.parse(tlsFlags)
        } catch {
            throw ValidationError(DestinationOptions.message(for: error))
        }
        options.named = name
        // App Center's secret is `emit`'s and `fleet`'s flag, not `DestinationOptions`': its owner said here.
        if appSecretFile != nil, !wire.spec.fields.contains("appSecret") {
            let owners = Destination.allCases.filter { $0.spec.fields.contains("appSecret") }.map(\.name)
            throw ValidationError("--app-secret-file belongs to --destination \(owners.joined(separator: " or ")), not to \(wire)")
        }
        let appSecret = { try SecretOption.appSecret.resolve(value: nil, file: appSecretFile, destination: name) }
        if endpointRequired && endpoint == nil { throw ValidationError("endpoint=URL is missing: each destination says where it sends") }
        try DestinationOptions.checkEndpoint(endpoint)
        if !testKeys {
            try options.checkCredential(endpoint: endpoint) { try options.resolvedCredential($0, appSecret: appSecret) }
        }
        try options.checkFields(endpoint: endpoint)
        var configuration = Configuration(storePath: "")
        configuration.endpoint = endpoint
        tls.apply(to: &configuration)
        try options.apply(to: &configuration, testKeys: testKeys)
        if wire.spec.fields.contains("appSecret") {
            configuration.appSecret = try appSecret() ?? (testKeys ? testAppSecret ?? "" : "")
        }
        return NamedDestination(name: name, from: configuration)
    }

    /// Why an item is not one `--to` takes: an unknown key, with the file form when it names a credential
    /// (`api-key=`: a secret in argv shows in `ps`).
    /// Only a key is shown, never a value: a value may be a secret, and a header's value with a comma in it reads
    /// as an item.
    private static func unknownItem(_ part: Substring, index: Int, name: String) -> String {
        let known = "the items are " + keys.map { $0.key + "=" }.joined(separator: ", ")
        guard let equals = part.firstIndex(of: "=") else {
            return "item \(index + 1) is not key=value (a value holds no comma: percent-encode one in a URL); \(known)"
        }
        let key = part[..<equals]
        guard (1...40).contains(key.count), key.allSatisfy({ ("a"..."z").contains($0) || $0 == "-" }) else {
            return "item \(index + 1) has an unknown key; \(known)"
        }
        if let secret = SecretOption.allCases.first(where: { $0.flag == "--" + key }) {
            return "\(key)= is not taken (a secret in the command line shows in ps): give \(key)-file=PATH or \(secret.environment(destination: name))"
        }
        return "unknown item '\(key)='; \(known)"
    }

    /// The item's key for a single destination's flag, or for its secret's plain flag (`--api-key`: `api-key-file`).
    static func key(forFlag flag: String) -> String? {
        keys.first { $0.flag == flag }?.key ?? keys.first { $0.flag == flag + "-file" }?.key
    }

    /// A single destination's refusal in the item's words: each flag as its key (`--otlp-encoding` as `encoding`),
    /// `--destination W` as `W`; a flag no item reads stays as it is.
    static func inItemWords(_ message: String) -> String {
        var out = ""
        var rest = Substring(message)
        while let start = rest.range(of: "--") {
            out += rest[..<start.lowerBound]
            var end = start.upperBound
            while end < rest.endIndex, rest[end].isLetter || rest[end] == "-" { end = rest.index(after: end) }
            let flag = String(rest[start.lowerBound..<end])
            rest = rest[end...]
            if flag == "--destination", rest.first == " " {
                rest = rest.dropFirst()
                continue
            }
            out += key(forFlag: flag) ?? flag
        }
        return out + rest
    }

    /// An item as it may be shown (SPEC K3): headers' values hidden, URLs' credentials masked.
    static func redacted(_ value: String) -> String {
        value.split(separator: ",", omittingEmptySubsequences: false).map { part in
            if part.hasPrefix("header="), let colon = part.firstIndex(of: ":") { return part[..<colon] + ": ***" }
            if part.hasPrefix("header=") { return "header=***" }
            return part.contains("://") ? maskingCredentials(in: String(part)) : String(part)
        }.joined(separator: ",")
    }
}
