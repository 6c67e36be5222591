import Foundation
@testable import OutboxMock

/// A request saved under `Fixtures/vendors/<vendor>/` (captured from an official client by
/// scripts/capture-vendors.py, or a hand-written malformed one), with what the mock must answer.
struct VendorFixture {
    var vendor: Vendor
    var name: String
    var method: String
    var uri: String
    var headers: [(String, String)]
    var body: [UInt8]
    var status: Int
    /// Events in the body, refused ones included.
    var events: Int
    /// Events the mock refuses.
    var refused: Int

    /// Every fixture of `vendor`, in name order.
    static func all(_ vendor: Vendor, file: String = #filePath) throws -> [VendorFixture] {
        let dir = URL(fileURLWithPath: file).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures/vendors/\(vendor.rawValue)")
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".json") }.sorted()
        return try names.map { try load(vendor, dir.appendingPathComponent($0)) }
    }

    static func load(_ vendor: Vendor, _ url: URL) throws -> VendorFixture {
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any] ?? [:]
        let expect = object["expect"] as? [String: Any] ?? [:]
        let body: [UInt8]
        if let b64 = object["body_base64"] as? String {
            body = Array(Data(base64Encoded: b64) ?? Data())
        } else {
            body = Array((object["body"] as? String ?? "").utf8)
        }
        // Host, Content-Length and Connection are the test client's own.
        let skip: Set<String> = ["host", "content-length", "connection"]
        let headers = (object["headers"] as? [[String]] ?? []).compactMap { pair -> (String, String)? in
            guard pair.count == 2, !skip.contains(pair[0].lowercased()) else { return nil }
            return (pair[0], pair[1])
        }
        return VendorFixture(vendor: vendor, name: url.deletingPathExtension().lastPathComponent,
                             method: object["method"] as? String ?? "POST", uri: object["uri"] as? String ?? "/",
                             headers: headers, body: body, status: expect["status"] as? Int ?? 200,
                             events: expect["events"] as? Int ?? 0, refused: expect["refused"] as? Int ?? 0)
    }

    /// Sends the fixture over real HTTP.
    func send(_ port: Int) throws -> TestResponse {
        try TestConnection(port: port).request(method, uri, headers: headers, body: body)
    }

    /// Whether its events carry the vendor's de-duplication key (Mixpanel's profile and group updates do not).
    var hasKeys: Bool { !(vendor == .mixpanel && (uri.hasPrefix("/engage") || uri.hasPrefix("/groups"))) }
}

extension MockStats.VendorStats {
    var tuple: [Int] { [requests, eventsReceived, eventsUnique, eventsDuplicate, eventsRefused] }
}
