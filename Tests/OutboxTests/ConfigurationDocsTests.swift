import Foundation
import Testing
@testable import Outbox

/// README's configuration table against the engine's table of fields (`Configuration.schema`): a field added to
/// one and not the other, or a change of what `update` may change, fails here.
@Suite("README's configuration table (SPEC R8)")
struct ConfigurationDocsTests {
    private static let readme: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)) ?? ""
    }()

    /// The names in the first column of the table under `## Configuration`.
    private static func tableFields() -> Set<String> {
        guard let start = readme.range(of: "## Configuration\n") else { return [] }
        var names = Set<String>()
        for line in readme[start.upperBound...].split(separator: "\n") {
            if line.hasPrefix("## ") { break }
            guard line.hasPrefix("| `") else { continue }
            let cell = line.dropFirst(2).prefix { $0 != "|" }
            for part in cell.split(separator: ",") {
                let name = part.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`"))
                if !name.isEmpty { names.insert(name) }
            }
        }
        return names
    }

    @Test func theTableNamesEveryFieldAUserSets() {
        // Testing hooks are not a user's settings: the first is described under the table, the second is internal.
        let fields = Set(Configuration.schema.map(\.name)).subtracting(["testingAllowsValuesBelowBounds", "testingIDSeed"])
        #expect(Self.tableFields() == fields)
    }

    @Test func theTableSaysWhatUpdateMayChange() {
        let listed = Configuration.changeableFields.map { "`\($0)`" }
        let sentence = listed.dropLast().joined(separator: ", ") + " and " + (listed.last ?? "")
        #expect(Self.readme.replacingOccurrences(of: "\n", with: " ").contains(sentence + " can change on a running engine"),
                "README should say: \(sentence) can change on a running engine")
    }
}
