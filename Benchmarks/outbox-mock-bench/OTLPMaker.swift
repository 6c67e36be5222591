import Foundation

/// OTLP/HTTP log batches as OpenTelemetry's Python exporter sends them (Fixtures/vendors/otlp/python-logs-50):
/// an ExportLogsServiceRequest in protobuf, one resource and scope, each record with a body, severity, trace
/// context, an event name and five attributes. Written with a few lines of protobuf encoding here, because the
/// generated message types are internal to OutboxMock; every record has its own time and order number, so each
/// hashes to a new key and the server de-duplicates nothing.
enum OTLPMaker {
    static func logsRequest(r: Int, batchSize: Int, nowNs: UInt64) -> [UInt8] {
        let resource = message([
            field(1, keyValue("service.name", string("outbox-bench"))),
            field(1, keyValue("telemetry.sdk.language", string("python"))),
            field(1, keyValue("telemetry.sdk.name", string("opentelemetry"))),
            field(1, keyValue("telemetry.sdk.version", string("1.45.2"))),
        ])
        let scope = message([field(1, Array("analytics".utf8)), field(2, Array("1.0".utf8))])
        var traceId = [UInt8](repeating: 0, count: 16), spanId = [UInt8](repeating: 0, count: 8)
        for i in 0..<16 { traceId[i] = UInt8.random(in: 1...255) }
        for i in 0..<8 { spanId[i] = UInt8.random(in: 1...255) }
        var scopeLogs = [field(1, scope)]
        for i in 0..<batchSize {
            let n = r * batchSize + i
            let name = LogMaker.names[n % LogMaker.names.count]
            var record: [UInt8] = []
            record += fixed64(1, nowNs + UInt64(i))
            record += varintField(2, 9)  // SEVERITY_NUMBER_INFO
            record += field(3, Array("INFO".utf8))
            record += field(5, string(name))
            record += field(6, keyValue("user_id", string("user-\(r % 97)")))
            record += field(6, keyValue("order", int(n)))
            record += field(6, keyValue("price", double(Double(n % 1000) / 10 + 0.99)))
            record += field(6, keyValue("sku", string("A-\(n % 50)")))
            record += field(6, keyValue("tags", array([string("a"), string("b")])))
            record += fixed32(8, 1)
            record += field(9, traceId)
            record += field(10, spanId)
            record += fixed64(11, nowNs + UInt64(i))
            record += field(12, Array(name.utf8))
            scopeLogs.append(field(2, record))
        }
        let resourceLogs = message([field(1, resource), field(2, message(scopeLogs))])
        return field(1, resourceLogs)
    }

    // MARK: - protobuf wire format

    private static func message(_ fields: [[UInt8]]) -> [UInt8] { fields.flatMap { $0 } }

    private static func varint(_ value: UInt64) -> [UInt8] {
        var v = value, out: [UInt8] = []
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
        return out
    }

    /// A length-delimited field (wire type 2).
    private static func field(_ number: UInt64, _ payload: [UInt8]) -> [UInt8] {
        varint(number << 3 | 2) + varint(UInt64(payload.count)) + payload
    }

    private static func varintField(_ number: UInt64, _ value: UInt64) -> [UInt8] { varint(number << 3) + varint(value) }

    private static func fixed64(_ number: UInt64, _ value: UInt64) -> [UInt8] {
        varint(number << 3 | 1) + (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    private static func fixed32(_ number: UInt64, _ value: UInt32) -> [UInt8] {
        varint(number << 3 | 5) + (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
    }

    // AnyValue: string_value = 1, int_value = 3, double_value = 4, array_value = 5 (ArrayValue.values = 1).
    private static func string(_ s: String) -> [UInt8] { field(1, Array(s.utf8)) }
    private static func int(_ i: Int) -> [UInt8] { varintField(3, UInt64(bitPattern: Int64(i))) }
    private static func double(_ d: Double) -> [UInt8] { fixed64(4, d.bitPattern) }
    private static func array(_ values: [[UInt8]]) -> [UInt8] { field(5, message(values.map { field(1, $0) })) }

    /// KeyValue: key = 1, value = 2.
    private static func keyValue(_ key: String, _ value: [UInt8]) -> [UInt8] {
        field(1, Array(key.utf8)) + field(2, value)
    }
}
