import FoundationEssentials
import Glibc

/// What encoding a batch costs on each wire, apart from everything else delivery does (`outbox-bench encode`): the
/// encoder's share of D10's loop CPU per event. For the bench only; `package` so that it can reach the wires.
package enum WireEncodeBench {
    /// Nanoseconds of thread CPU per log to encode `rounds` batches of `batchSize` events, each event the one
    /// `properties(index)` describes, for the destination named (`appcenter`, `otlp`, …), or OTLP in an encoding
    /// (`otlp-json`).
    package static func nsPerLog(wire name: String, batchSize: Int, rounds: Int,
                                 properties: (Int) -> [String: PropertyValue]) throws -> Double {
        let wire = try Self.wire(named: name)
        let stamp = Stamp.bytes(sid: UUIDBytes(high: 0x0193_0000_0000_7000, low: 0x8000_0000_0000_0001), userID: nil)
        var logs: [StoredLog] = []
        for index in 0..<batchSize {
            let body = try EventValidator.validate(name: "bench", properties: properties(index)).body
            let id = UUIDBytes(high: UInt64(index), low: 0x8000_0000_0000_0000 | UInt64(index))
            logs.append(.made(.event, id: id, stamp: stamp, body: body, seq: Int64(index), wallMs: 1_790_000_000_000 + Int64(index)))
        }
        let contexts: [Int64: [UInt8]] = [1: Array(#"{"appVersion":"1.0","appBuild":"1","sdkName":"outbox","sdkVersion":"0.2.0","osName":"Linux","osVersion":"6.1","model":"bench","oemName":"bench","locale":"en_US","timeZoneOffset":0}"#.utf8)]
        let times = WireTimes(sentAtMs: 1_790_000_100_000, timestamp: { $0.wallMs })
        var bytes = 0
        let start = threadCPUNs()
        for _ in 0..<rounds { bytes &+= wire.encode(logs, contexts: contexts, times: times).count }
        let elapsed = threadCPUNs() - start
        return bytes > 0 ? Double(elapsed) / Double(rounds * batchSize) : 0
    }

    /// The wire its destination's spec makes, its credential a placeholder: `destination` or `otlp-ENCODING`.
    static func wire(named name: String) throws(OutboxError) -> any DeliveryWire {
        let parts = name.split(separator: "-", maxSplits: 1).map(String.init)
        guard let destination = parts.first.flatMap(Destination.init(rawValue:)) else {
            throw .invalidConfiguration("encode bench: unknown wire '\(name)'")
        }
        var configuration = Configuration(storePath: "")
        configuration.destination = destination
        if let credential = destination.spec.credential { configuration[keyPath: credential.keyPath] = "bench" }
        if parts.count > 1 {
            guard destination == .otlp, let encoding = OTLPEncoding(rawValue: parts[1]) else {
                throw .invalidConfiguration("encode bench: unknown wire '\(name)'")
            }
            configuration.otlpEncoding = encoding
        }
        return configuration.wire(installID: UUID())
    }

    private static func threadCPUNs() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
}
