/// Where each log record's bytes are in a protobuf ExportLogsServiceRequest, found by walking the wire format
/// (tag, length) without decoding: the de-duplication hash then covers the bytes as received instead of a
/// re-encoding, which cost as much as swift-protobuf's decoding of them. Only the request's nesting is followed
/// (resource_logs = 1; resource = 1, scope_logs = 2; scope = 1, log_records = 2), every other field is skipped.
enum OTLPWire {
    /// Per resource, per scope: the resource's, the scope's and each record's bytes.
    struct LogsLayout {
        var resources: [ArraySlice<UInt8>] = []
        var scopes: [[ArraySlice<UInt8>]] = []
        var records: [[[ArraySlice<UInt8>]]] = []
    }

    /// nil when the body is not well-formed protobuf (swift-protobuf has then refused it already) or uses groups.
    static func logsLayout(_ body: [UInt8]) -> LogsLayout? {
        var layout = LogsLayout()
        let ok = forEachField(body[...]) { field, resourceLogs in
            guard field == 1 else { return true }
            var resource = ArraySlice<UInt8>(), scopes = [ArraySlice<UInt8>](), records = [[ArraySlice<UInt8>]]()
            let ok = forEachField(resourceLogs) { field, value in
                switch field {
                case 1: resource = value
                case 2:
                    var scope = ArraySlice<UInt8>(), mine = [ArraySlice<UInt8>]()
                    let ok = forEachField(value) { field, value in
                        if field == 1 { scope = value } else if field == 2 { mine.append(value) }
                        return true
                    }
                    scopes.append(scope)
                    records.append(mine)
                    return ok
                default: break
                }
                return true
            }
            layout.resources.append(resource)
            layout.scopes.append(scopes)
            layout.records.append(records)
            return ok
        }
        return ok ? layout : nil
    }

    /// Calls `body` with each length-delimited field of `message` (its number and payload) and skips the others;
    /// false when the bytes end inside a field or use a wire type proto3 does not write.
    private static func forEachField(_ message: ArraySlice<UInt8>,
                                     _ body: (UInt64, ArraySlice<UInt8>) -> Bool) -> Bool {
        var i = message.startIndex
        while i < message.endIndex {
            guard let key = varint(message, &i) else { return false }
            switch key & 7 {
            case 0: guard varint(message, &i) != nil else { return false }
            case 1: guard message.endIndex - i >= 8 else { return false }; i += 8
            case 5: guard message.endIndex - i >= 4 else { return false }; i += 4
            case 2:
                guard let length = varint(message, &i), length <= UInt64(message.endIndex - i) else { return false }
                let end = i + Int(length)
                guard body(key >> 3, message[i..<end]) else { return false }
                i = end
            default: return false
            }
        }
        return true
    }

    private static func varint(_ bytes: ArraySlice<UInt8>, _ i: inout Int) -> UInt64? {
        var value: UInt64 = 0, shift: UInt64 = 0
        while i < bytes.endIndex, shift < 64 {
            let byte = bytes[i]
            i += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
        return nil
    }
}
