import ArgumentParser
import Foundation
import Outbox

@main
struct OutboxCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "Outbox: durable analytics logs in SQLite, delivered in batches.",
        subcommands: [Emit.self, Status.self, Demo.self]
    )
}

/// Prints a JSON object with keys in a stable order (scripts and acceptance tests read it).
func printJSON(_ object: [(String, Any?)]) {
    var parts: [String] = []
    for (key, value) in object {
        let rendered: String
        switch value {
        case nil: rendered = "null"
        case let text as String: rendered = jsonString(text)
        case let flag as Bool: rendered = flag ? "true" : "false"
        case let number as Int: rendered = String(number)
        case let number as Double: rendered = String(format: "%.3f", number)
        default: rendered = jsonString("\(value!)")
        }
        parts.append("\(jsonString(key)):\(rendered)")
    }
    print("{" + parts.joined(separator: ",") + "}")
}

func jsonString(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}

struct CLIError: Error, CustomStringConvertible {
    var description: String
}
