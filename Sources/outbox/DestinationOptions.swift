import ArgumentParser
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

    func validate() throws {
        _ = try parsedDestination()
        _ = try parsedHeaders()
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

    func apply(to configuration: inout Configuration) throws {
        configuration.destination = try parsedDestination()
        configuration.headers = try parsedHeaders()
    }

    private static func field(_ line: String, flag: String) throws -> HeaderField {
        do {
            let field = try HeaderField(line: line)
            var probe = Configuration(storePath: "-")
            probe.headers = [field]
            try probe.validate()
            return field
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
