import Foundation
import Logging
import OutboxTestSupport
import Testing
@testable import Outbox
@testable import outbox

/// SPEC D15: `--to NAME=WIRE[,key=value…]` on `emit` and `fleet` — each item read by the single destination's own
/// flag, credentials from `<credential>-file=` or `OUTBOX_<NAME>_<CREDENTIAL>`, and every refusal naming its problem.
@Suite("Several destinations on the command line: --to (SPEC D15)")
struct CommandLineDestinationsTests {
    static let store = "/tmp/outbox-cli-to.sqlite"

    /// `emit`'s configuration from `arguments`.
    static func emitConfiguration(_ arguments: [String]) throws -> Configuration {
        try Emit.parse(["--store", store, "--count", "1"] + arguments).engineConfiguration()
    }

    /// `emit`'s usage error for `arguments`, or nil when they are taken.
    static func emitRefusal(_ arguments: [String]) -> String? {
        do {
            _ = try Emit.parse(["--store", store, "--count", "1"] + arguments)
            return nil
        } catch {
            return Emit.message(for: error)
        }
    }

    /// Files the items name: secrets (one final newline, as an editor leaves it), a header file, a CA bundle, and a
    /// client certificate with its key (made by openssl, as the TLS tests' are).
    struct Files {
        let dir = TempDirectory("cli-to")
        var secret: String { dir.file("secret") }
        var headers: String { dir.file("headers") }
        var empty: String { dir.file("empty") }
        var certificate: String { dir.file("cert.pem") }
        var key: String { dir.file("key.pem") }

        init() throws {
            try "s3cret-file-value\n".write(toFile: secret, atomically: true, encoding: .utf8)
            try "# a comment\nAuthorization: Bearer h3ader-secret\n\nX-Region: eu\n".write(toFile: headers, atomically: true, encoding: .utf8)
            try "".write(toFile: empty, atomically: true, encoding: .utf8)
            let openssl = ChildProcess()
            openssl.executableURL = URL(fileURLWithPath: NginxServer.openssl)
            openssl.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                 "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=outbox-test"]
            openssl.standardOutput = FileHandle.nullDevice
            openssl.standardError = FileHandle.nullDevice
            try openssl.run()
            openssl.waitUntilExit()
            guard openssl.terminationStatus == 0 else { throw CocoaError(.fileWriteUnknown) }
        }
    }

    static let pin = "sha256//" + Data(repeating: 7, count: 32).base64EncodedString()
    static let endpoint = "http://127.0.0.1:9"

    /// Each item key beside the single destination's flag that reads it, for a wire that takes it (with the
    /// credential that wire cannot do without); `\(f.…)` stands for a file.
    static func rows(_ f: Files) -> [(wire: String, items: String, flags: [String])] {
        [
            ("otlp", "encoding=json", ["--otlp-encoding", "json"]),
            ("segment", "write-key-file=\(f.secret),profile=rudderstack",
             ["--write-key-file", f.secret, "--segment-profile", "rudderstack"]),
            ("posthog", "api-key-file=\(f.secret)", ["--api-key-file", f.secret]),
            ("amplitude", "api-key-file=\(f.secret)", ["--api-key-file", f.secret]),
            ("mixpanel", "project-token-file=\(f.secret)", ["--project-token-file", f.secret]),
            ("mixpanel", "service-account-user=svc,service-account-secret-file=\(f.secret),project-id=7",
             ["--service-account-user", "svc", "--service-account-secret-file", f.secret, "--project-id", "7"]),
            ("ga4", "measurement-id=G-ABC123,api-secret-file=\(f.secret)",
             ["--measurement-id", "G-ABC123", "--api-secret-file", f.secret]),
            ("appcenter", "app-secret-file=\(f.secret)", ["--app-secret-file", f.secret]),
            ("otlp", "header=X-Tenant: t1,header=X-Other: o", ["--header", "X-Tenant: t1", "--header", "X-Other: o"]),
            ("otlp", "header-file=\(f.headers)", ["--header-file", f.headers]),
            ("otlp", "ca-file=\(f.secret)", ["--ca-file", f.secret]),
            ("otlp", "client-certificate=\(f.certificate),client-key=\(f.key)",
             ["--client-certificate", f.certificate, "--client-key", f.key]),
            ("otlp", "pinned-public-key=\(pin)", ["--pinned-public-key", pin]),
            ("sensors", "", []),
        ]
    }

    // SPEC D15: every item key ends as the field its single-destination flag sets, on a destination of that name;
    // the single destination's fields stay unset.
    @Test func everyItemIsReadAsItsSingleDestinationFlag() throws {
        let files = try Files(); defer { files.dir.remove() }
        let covered = Set(Self.rows(files).flatMap { row in
            row.items.split(separator: ",").compactMap { $0.split(separator: "=").first.map(String.init) }
        } + ["endpoint"])
        let flagged = Set(ToOptions.keys.filter { $0.reader != .policy }.map(\.key))
        #expect(covered == flagged, "item keys without a row: \(flagged.subtracting(covered))")
        for row in Self.rows(files) {
            let endpoint = row.wire == "sensors" ? "http://127.0.0.1:9/sa?project=p" : Self.endpoint
            let to = "x=\(row.wire),endpoint=\(endpoint)" + (row.items.isEmpty ? "" : "," + row.items)
            let viaTo = try Self.emitConfiguration(["--to", to])
            let single = try Self.emitConfiguration(["--destination", row.wire, "--endpoint", endpoint] + row.flags)
            let expected = NamedDestination(name: "x", from: single)
            #expect(viaTo.destinations == [expected], "\(to)")
            #expect(viaTo.destinations != [NamedDestination(name: "x", destination: expected.destination, endpoint: endpoint)]
                    || row.items.isEmpty, "\(to) changed nothing")
            #expect(viaTo.endpoint == nil && viaTo.headers.isEmpty && viaTo.appSecret.isEmpty && viaTo.caFile == nil)
            #expect(throws: Never.self, "\(to)") { try viaTo.validate() }
        }
    }

    // SPEC D15: several `--to`, in order, each with its own fields; a secret read from a file, its final newline
    // dropped; `header=` repeatable, then `header-file=`'s lines.
    @Test func severalDestinationsInOrder() throws {
        let files = try Files(); defer { files.dir.remove() }
        let configuration = try Self.emitConfiguration([
            "--to", "ops=otlp,endpoint=http://127.0.0.1:4318,encoding=json,header=X-Tenant: t1,header-file=\(files.headers)",
            "--to", "product-eu=posthog,endpoint=https://eu.i.posthog.com,api-key-file=\(files.secret)",
            "--app-version", "2.0",
        ])
        var ops = NamedDestination(name: "ops", destination: .otlp, endpoint: "http://127.0.0.1:4318")
        ops.otlpEncoding = .json
        ops.headers = try ["X-Tenant: t1", "Authorization: Bearer h3ader-secret", "X-Region: eu"].map { try HeaderField(line: $0) }
        var product = NamedDestination(name: "product-eu", destination: .posthog, endpoint: "https://eu.i.posthog.com")
        product.apiKey = "s3cret-file-value"
        #expect(configuration.destinations == [ops, product])
        #expect(configuration.namedDestinations.map(\.name) == ["ops", "product-eu"])
        #expect(configuration.appVersion == "2.0", "the engine's own fields stay beside --to")
        try configuration.validate()
    }

    // SPEC D15: what `--to` refuses, each naming its problem; never a secret in the message.
    @Test(arguments: [
        // Beside the single destination's flags.
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9", "--destination", "otlp"], "--to and --destination do not go together"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9", "--endpoint", "http://127.0.0.1:9"],
         "--to and --endpoint do not go together: --endpoint is the single destination's; give endpoint= inside each --to"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9", "--app-secret", "k"], "--to and --app-secret do not go together"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9", "--header", "X-A: b"], "give header= inside each --to"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9", "--ca-file", "/etc/hostname"], "give ca-file= inside each --to"),
        // The item's own form.
        (["--to", "ops"], "--to takes NAME=WIRE[,key=value…], got 'ops'"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,colour=red"], "--to ops: unknown item 'colour='; the items are endpoint="),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,encoding=json,encoding=json"], "--to ops: encoding= is given twice"),
        (["--to", "ops=posthog,endpoint=http://127.0.0.1:9,api-key=phc_s3cret"],
         "--to ops: api-key= is not taken (a secret in the command line shows in ps): give api-key-file=PATH or OUTBOX_OPS_API_KEY"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,header=Authorization: Bearer s3cret,tail"],
         "--to ops: item 4 is not key=value (a value holds no comma"),
        (["--to", "ops=kafka,endpoint=http://127.0.0.1:9"], "--to ops: unknown destination 'kafka': the destinations are appcenter, otlp"),
        (["--to", "ops=otlp"], "--to ops: endpoint=URL is missing"),
        (["--to", "ops=otlp,endpoint=ftp://127.0.0.1"], "--to ops: endpoint must be an absolute http:// or https:// URL"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,encoding=xml"], "--to ops: encoding must be protobuf or json, got 'xml'"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,header=Content-Type: x"], "--to ops: header: header Content-Type is set by the engine"),
        (["--to", "ops=segment,endpoint=http://127.0.0.1:9,header=Authorization: Basic s3cret,write-key-file=/etc/hostname"],
         "header Authorization is set by the segment destination"),
        // Names: the form, and once each, also after `-` → `_`.
        (["--to", "Ops=otlp,endpoint=http://127.0.0.1:9"], "--to: a destination's name holds only a-z, 0-9, '_' and '-', got 'Ops'"),
        (["--to", "=otlp,endpoint=http://127.0.0.1:9"], "--to: a destination's name is 1 to 32 characters"),
        (["--to", String(repeating: "a", count: 33) + "=otlp,endpoint=http://127.0.0.1:9"], "--to: a destination's name is 1 to 32 characters"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9", "--to", "ops=otlp,endpoint=http://127.0.0.1:10"],
         "--to: destinations holds 'ops' twice"),
        (["--to", "eu-ops=otlp,endpoint=http://127.0.0.1:9", "--to", "eu_ops=otlp,endpoint=http://127.0.0.1:10"],
         "--to: destinations holds 'eu-ops' and 'eu_ops', the same name once '-' is read as '_'"),
        // A credential for another wire, by its owner.
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,write-key-file=/etc/hostname"], "--to ops: write-key-file and profile belong to segment, not to otlp"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,app-secret-file=/etc/hostname"], "--to ops: app-secret-file belongs to appcenter, not to otlp"),
        (["--to", "ops=segment,endpoint=http://127.0.0.1:9,api-key-file=/etc/hostname"], "--to ops: api-key-file belongs to posthog or amplitude, not to segment"),
        (["--to", "ops=posthog,endpoint=http://127.0.0.1:9,encoding=json"], "--to ops: encoding belongs to otlp, not to posthog"),
        // The wire's missing credential, with its file item and its own variable; a file that cannot be read.
        (["--to", "product=posthog,endpoint=http://127.0.0.1:9"], "--to product: posthog needs api-key-file=PATH or OUTBOX_PRODUCT_API_KEY"),
        (["--to", "ac-eu=appcenter,endpoint=http://127.0.0.1:9"], "--to ac-eu: appcenter needs app-secret-file=PATH or OUTBOX_AC_EU_APP_SECRET"),
        (["--to", "mp=mixpanel,endpoint=http://127.0.0.1:9,service-account-user=u,project-id=3"],
         "--to mp: mixpanel needs service-account-secret-file=PATH or OUTBOX_MP_SERVICE_ACCOUNT_SECRET"),
        (["--to", "mp=mixpanel,endpoint=http://127.0.0.1:9,service-account-user=u"], "--to mp: service-account-user needs project-id"),
        (["--to", "ga=ga4,endpoint=http://127.0.0.1:9,api-secret-file=/etc/hostname"], "--to ga: measurement-id is required for destination ga4"),
        (["--to", "product=posthog,endpoint=http://127.0.0.1:9,api-key-file=/nonexistent/key"],
         "--to product: api-key-file: cannot read /nonexistent/key: No such file or directory"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,header-file=/nonexistent/headers"],
         "--to ops: header-file: cannot read /nonexistent/headers"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,pinned-public-key=md5//x"], "--to: destination 'ops': pinnedPublicKey: 'md5//x' is not a sha256//BASE64 pin"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,client-key=/etc/hostname"], "--to: destination 'ops': clientKey is set without clientCertificate"),
        // BEHAVIOUR H2–H4: the policy items.
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,sample=debug*:1.5"], "--to: destination 'ops': sample's rate for 'debug*' must be between 0 and 1, got 1.5"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,sample=debug*"], "--to ops: sample= takes name:rate items between '|' (debug*:0.1|*:0.5), got 'debug*'"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,sample=a:0.1|a:0.2"], "--to ops: sample= gives 'a' twice"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,include=a|"], "--to: destination 'ops': include holds an empty name"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,exclude=de*bug"], "--to: destination 'ops': exclude's 'de*bug': '*' goes only at the end"),
        (["--to", "ops=otlp,endpoint=http://127.0.0.1:9,redact=a,redact=b"], "--to ops: redact= is given twice"),
    ])
    func refusalsNameTheirProblem(arguments: [String], expected: String) throws {
        let message = try #require(Self.emitRefusal(arguments), "\(arguments) was taken")
        #expect(message.contains(expected), "message: \(message)")
        #expect(!message.contains("s3cret"), "a secret in the message: \(message)")
    }

    // BEHAVIOUR H2–H4: a destination's policy inside its --to, `|` between names, `name:rate` for sample.
    @Test func policyItemsSetTheDestinationsPolicy() throws {
        let configuration = try Self.emitConfiguration([
            "--to", "ops=otlp,endpoint=http://127.0.0.1:4318",
            "--to", "product=otlp,endpoint=http://127.0.0.1:4319,include=checkout*|$identify|viewed,exclude=checkout_debug,"
                + "redact=email|card_*,sample=viewed:0.25|*:1",
        ])
        let ops = try #require(configuration.destinations.first), product = try #require(configuration.destinations.last)
        #expect(ops.include == nil && ops.exclude.isEmpty && ops.redact.isEmpty && ops.sample.isEmpty)
        #expect(product.include == ["checkout*", "$identify", "viewed"] && product.exclude == ["checkout_debug"])
        #expect(product.redact == ["email", "card_*"] && product.sample == ["viewed": 0.25, "*": 1])
        try configuration.validate()
    }

    // SPEC D15: a credential file that is empty is refused naming its item and the file.
    @Test func anEmptyCredentialFileIsRefused() throws {
        let files = try Files(); defer { files.dir.remove() }
        let message = Self.emitRefusal(["--to", "product=posthog,endpoint=http://127.0.0.1:9,api-key-file=\(files.empty)"])
        #expect(message == "--to product: api-key-file \(files.empty) is empty")
    }

    // SPEC D15: `fleet` takes `--to` too; every device gets the same list (the template's), a destination without
    // `endpoint=` goes to the run's server, and a credential not given is a test one as with `--destination`.
    @Test func theFleetGivesEveryDeviceTheList() throws {
        let files = try Files(); defer { files.dir.remove() }
        let fleet = try Fleet.parse(["--devices", "2", "--events", "1",
                                     "--to", "ops=otlp,encoding=json", "--to", "product=posthog,api-key-file=\(files.secret)",
                                     "--to", "ac=appcenter", "--to", "far=segment,endpoint=http://127.0.0.1:9"])
        let template = try fleet.deviceTemplate(logger: Logger(label: "test"))
        #expect(template.destinations.map(\.name) == ["ops", "product", "ac", "far"])
        #expect(template.destinations.map(\.endpoint) == [nil, nil, nil, "http://127.0.0.1:9"])
        #expect(template.destinations[0].otlpEncoding == .json)
        #expect(template.destinations[1].apiKey == "s3cret-file-value")
        #expect(template.destinations[2].appSecret == Fleet.testSecret)
        #expect(template.destinations[3].writeKey == "outbox-test-write-key")
        #expect(template.endpoint == nil && template.appSecret.isEmpty && template.apiKey.isEmpty && template.writeKey.isEmpty,
                "the single destination's fields stay unset beside the list")

        #expect(throws: (any Error).self) {
            try Fleet.parse(["--devices", "1", "--events", "1", "--to", "ops=otlp", "--endpoint", "http://127.0.0.1:9"])
        }
        do {
            _ = try Fleet.parse(["--devices", "1", "--events", "1", "--to", "ops=otlp", "--destination", "otlp"])
            Issue.record("fleet took --to beside --destination")
        } catch {
            #expect(Fleet.message(for: error).contains("--to and --destination do not go together"))
        }
    }

    // SPEC K3: the fleet's report shows the command line with a `--to`'s header values and URL credentials hidden.
    @Test func theCommandLineShownHidesWhatToHolds() {
        let shown = SecretOption.redacting(["--to", "ops=otlp,endpoint=http://user:pw-s3cret@127.0.0.1:9,header=Authorization: Bearer s3cret",
                                            "--to=b=posthog,header=X-Key: s3cret2"]).joined(separator: " ")
        #expect(!shown.contains("s3cret"), "shown: \(shown)")
        #expect(shown.contains("header=Authorization: ***") && shown.contains("header=X-Key: ***") && shown.contains("ops=otlp"))
    }
}

/// Credentials from the environment, through the real binary (the test process's environment is shared by every
/// test running at once): `OUTBOX_<NAME>_<CREDENTIAL>`, and not the single destination's variable.
extension CommandLineDestinationsTests {
    static func runEmit(_ arguments: [String], environment extra: [String: String]) throws -> (status: Int32, errors: String) {
        let dir = TempDirectory("cli-to-env"); defer { dir.remove() }
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("OUTBOX_") && !$0.key.hasPrefix("OTEL_") }
        environment.merge(extra) { _, new in new }
        return try runCapturingErrors(builtProduct("outbox"), ["emit", "--store", dir.file(), "--count", "0"] + arguments,
                                      environment: environment)
    }

    // SPEC D15: NAME upper-cased, `-` read as `_`; each wire's credential by its variable.
    @Test(arguments: [
        ("eu-product=posthog", "OUTBOX_EU_PRODUCT_API_KEY", "OUTBOX_API_KEY"),
        ("seg=segment", "OUTBOX_SEG_WRITE_KEY", "OUTBOX_WRITE_KEY"),
        ("ac=appcenter", "OUTBOX_AC_APP_SECRET", "OUTBOX_APP_SECRET"),
        ("ga=ga4,measurement-id=G-ABC123", "OUTBOX_GA_API_SECRET", "OUTBOX_API_SECRET"),
        ("mp=mixpanel", "OUTBOX_MP_PROJECT_TOKEN", "OUTBOX_PROJECT_TOKEN"),
        ("mp=mixpanel,service-account-user=u,project-id=3", "OUTBOX_MP_SERVICE_ACCOUNT_SECRET", "OUTBOX_SERVICE_ACCOUNT_SECRET"),
    ])
    func aCredentialComesFromItsDestinationsVariable(item: String, variable: String, single: String) throws {
        let to = ["--to", item + ",endpoint=http://127.0.0.1:9"]
        let without = try Self.runEmit(to, environment: [:])
        #expect(without.status == 64 && without.errors.contains(variable), "without \(variable): \(without)")
        let beside = try Self.runEmit(to, environment: [single: "s3cret"])
        #expect(beside.status == 64, "\(single), the single destination's variable, was taken for --to: \(beside)")
        let with = try Self.runEmit(to, environment: [variable: "s3cret"])
        #expect(with.status == 0, "with \(variable): \(with)")
        #expect(!with.errors.contains("s3cret") && !without.errors.contains("s3cret"))
    }
}
