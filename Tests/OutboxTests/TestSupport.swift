import Foundation
@_exported import OutboxTestSupport
@testable import Outbox

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
