import Foundation
@_exported import OutboxTestSupport
@testable import Outbox

/// A fresh directory per test, removed by `cleanup()`.
struct TempDir {
    let path: String

    init(_ name: String = #function) {
        let safe = name.filter { $0.isLetter || $0.isNumber }
        path = NSTemporaryDirectory() + "outbox-tests-\(safe)-\(UUID().uuidString.prefix(8))"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String = "store.outbox") -> String { path + "/" + name }
    func cleanup() { try? FileManager.default.removeItem(atPath: path) }
}

func testConfiguration(_ path: String) -> Configuration {
    var configuration = Configuration(storePath: path)
    configuration.testingAllowsValuesBelowBounds = true
    configuration.sessionTracking = .manual
    return configuration
}

/// The `i` property of an event payload (the tests' ordinal), read with JSONSerialization (slow, fine here).
func properties(of log: StoredLog) -> [String: Any] {
    guard let object = try? JSONSerialization.jsonObject(with: Data(log.payload)) as? [String: Any],
          let typed = object["typedProperties"] as? [[String: Any]] else { return [:] }
    var result: [String: Any] = [:]
    for property in typed {
        if let name = property["name"] as? String { result[name] = property["value"] }
    }
    return result
}

func payloadObject(_ log: StoredLog) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(log.payload)) as? [String: Any]) ?? [:]
}
