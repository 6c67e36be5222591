/// Builds the request body of a batch at send time (SPEC C9, W1, W2): each stored payload gets its `timestamp`
/// (corrected by A9) and its `device` context spliced in, and the container is stamped with `sentAt`.
struct BatchEncoder {
    /// Device context JSON by version id (`StoredLog.context`); 0 is the current context.
    var contexts: [Int64: [UInt8]]

    func encode(_ logs: [StoredLog], sentAtMs: Int64, timestamp: (StoredLog) -> Int64) -> [UInt8] {
        // The logs of a batch nearly always share one context: it is looked up when the id changes, not per log.
        var lastID: Int64?
        var lastDevice: [UInt8]?
        func device(_ id: Int64) -> [UInt8]? {
            if id != lastID {
                lastID = id
                lastDevice = contexts[id] ?? contexts[0]
            }
            return lastDevice
        }
        // Written through a pointer into one buffer of the right size (`JSONWriter`): an `Array` append costs
        // ~150 instructions of checks per call, and a log took six.
        var size = 64
        for log in logs { size += log.payload.count + 64 + (device(log.context)?.count ?? 0) }
        var writer = JSONWriter(capacity: size)
        writer.raw(#"{"sentAt":"#)
        writer.timestamp(ms: sentAtMs)
        writer.raw(#","logs":["#)
        for (index, log) in logs.enumerated() {
            if index > 0 { writer.raw(UInt8(ascii: ",")) }
            writer.raw(#"{"timestamp":"#)
            writer.timestamp(ms: timestamp(log))
            if let device = device(log.context) {
                writer.raw(#","device":"#)
                writer.raw(device)
            }
            // The payload is a JSON object: drop its opening brace and keep the rest.
            if log.payload.count > 2 {
                writer.raw(UInt8(ascii: ","))
                log.payload.withUnsafeBytes { writer.raw(UnsafeRawBufferPointer(rebasing: $0.dropFirst())) }
            } else {
                writer.raw(UInt8(ascii: "}"))
            }
        }
        writer.raw("]}")
        return writer.bytes
    }
}
