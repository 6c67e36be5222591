import ArgumentParser
import Outbox

/// SPEC K2: the TLS identity and trust of `emit` and `fleet`: an extra CA bundle, a client certificate and key for
/// mutual TLS, and pins of the server's key. Paths and public pins, never secrets: they may appear in a report.
struct TLSOptions: ParsableArguments {
    @Option(help: "Extra CA bundle (PEM) for an HTTPS endpoint.") var caFile: String?
    @Option(help: ArgumentHelp("This host's certificate (PEM) for mutual TLS (SPEC K2); with --client-key.", valueName: "path"))
    var clientCertificate: String?
    @Option(help: ArgumentHelp("The private key (PEM, unencrypted) of --client-certificate.", valueName: "path"))
    var clientKey: String?
    @Option(help: ArgumentHelp("Pins of the server's public key, curl's form: sha256//BASE64[;sha256//…] (SPEC K2).", valueName: "pins"))
    var pinnedPublicKey: String?

    /// The flags given: `--to` refuses them, each destination's TLS going inside it (SPEC D15).
    var givenFlags: [String] {
        [("--ca-file", caFile), ("--client-certificate", clientCertificate), ("--client-key", clientKey),
         ("--pinned-public-key", pinnedPublicKey)].filter { $0.1 != nil }.map(\.0)
    }

    func apply(to configuration: inout Configuration) {
        configuration.caFile = caFile
        configuration.clientCertificate = clientCertificate
        configuration.clientKey = clientKey
        configuration.pinnedPublicKey = pinnedPublicKey
    }
}

/// SPEC A10, D4: the app's identity in what is sent — its namespace (OTLP's `service.name`), version and build.
struct AppIdentityOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The app's namespace, e.g. com.example.shop (OTLP's service.name; default outbox).",
                               valueName: "name"))
    var appNamespace: String?
    @Option(help: ArgumentHelp("The app's version in the device context (OTLP's service.version).", valueName: "version"))
    var appVersion: String?
    @Option(help: ArgumentHelp("The app's build in the device context.", valueName: "build"))
    var appBuild: String?

    func validate() throws {
        for (flag, value) in [("--app-namespace", appNamespace), ("--app-version", appVersion), ("--app-build", appBuild)] {
            if let value, value.isEmpty { throw ValidationError("\(flag) is empty") }
        }
    }

    /// The given fields into `configuration`; the others keep what it has.
    func apply(to configuration: inout Configuration) {
        if let appNamespace { configuration.appNamespace = appNamespace }
        if let appVersion { configuration.appVersion = appVersion }
        if let appBuild { configuration.appBuild = appBuild }
    }
}
