import FoundationEssentials

/// App Center's wire (SPEC W1, W2): `{endpoint}/logs?api-version=1.0.0`, `App-Secret`, `{"sentAt","logs":[…]}`.
struct AppCenterWire: DeliveryWire {
    var appSecret: String
    var installID: UUID

    var destination: Destination { .appCenter }

    /// App Center's secret is its credential, but the library sends without one (its server answers 401, R1 stops the
    /// channel): only the command line requires it.
    static let spec = DestinationSpec(
        destination: .appCenter, fields: ["appSecret"],
        credential: DestinationCredential(field: "appSecret", keyPath: \.appSecret, missing: nil),
        headers: ["Content-Type", "Content-Encoding", "App-Secret", "Install-ID"],
        makeWire: { configuration, installID in AppCenterWire(appSecret: configuration.appSecret, installID: installID) })

    func request(endpoint: String, headers: [HeaderField]) -> DeliveryDriver.RequestSettings {
        DeliveryDriver.RequestSettings(
            url: Self.url(endpoint, "/logs", query: "api-version=1.0.0"),
            headers: [("Content-Type", "application/json"), ("App-Secret", appSecret)] + commonHeaders(headers))
    }

    func encode(_ logs: [StoredLog], contexts: [Int64: [UInt8]], times: WireTimes) -> [UInt8] {
        BatchEncoder(contexts: contexts).encode(logs, sentAtMs: times.sentAtMs, timestamp: times.timestamp)
    }
}
