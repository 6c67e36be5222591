import Foundation
import OutboxTestSupport
import OutboxMock
import Testing
@testable import Outbox

/// SPEC P2: one version. `VERSION` is the source; the engine, the mock, both command lines, outbox.h's macros and the
/// changelog carry the same (outbox.pc and outbox_version() are checked by `make c-test`, the packages by `make deb`).
@Suite("One version (SPEC P2)")
struct VersionTests {
    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    private static func read(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    private static func versionOutput(_ product: String) throws -> String {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: builtProduct(product))
        process.arguments = ["--version"]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = readToEnd(pipe.fileHandleForReading)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(product) --version exits 0")
        return String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func everyPlaceCarriesTheVersionOfTheVersionFile() throws {
        let version = try Self.read("VERSION").trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(version.split(separator: ".").count == 3 && version.split(separator: ".").allSatisfy { Int($0) != nil })
        #expect(OutboxVersion.string == version)
        #expect(MockVersion.string == version)
        #expect(try Self.versionOutput("outbox") == version)
        #expect(try Self.versionOutput("outbox-mock") == version)
        let header = try Self.read("include/outbox.h")
        let macros = ["MAJOR", "MINOR", "PATCH"].map { part in
            header.split(separator: "\n").first { $0.hasPrefix("#define OUTBOX_VERSION_\(part) ") }
                .map { String($0.split(separator: " ").last ?? "") } ?? "?"
        }
        #expect(macros.joined(separator: ".") == version)
        let changelog = try Self.read("CHANGELOG.md")
        #expect(changelog.contains("## [\(version)]"), "CHANGELOG.md has a section for \(version)")
    }
}
