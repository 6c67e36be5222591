/// Builds the request body of a batch at send time (SPEC C9, W1, W2): each stored payload gets its `timestamp`
/// (corrected by A9) and its `device` context spliced in, and the container is stamped with `sentAt`.
struct BatchEncoder {
    /// Device context JSON by version id (`StoredLog.context`); 0 is the current context.
    var contexts: [Int64: [UInt8]]

    func encode(_ logs: [StoredLog], sentAtMs: Int64, timestamp: (StoredLog) -> Int64) -> [UInt8] {
        // The logs of a batch nearly always share one context: it is looked up when the id changes, not per log.
        var last: (id: Int64, json: [UInt8]?)?
        func device(_ id: Int64) -> [UInt8]? {
            if let last, last.id == id { return last.json }
            let json = contexts[id] ?? contexts[0]
            last = (id, json)
            return json
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(logs.reduce(64) { $0 + $1.payload.count + 64 + (device($1.context)?.count ?? 0) })
        bytes.append(contentsOf: #"{"sentAt":"#.utf8)
        Timestamp.write(ms: sentAtMs, into: &bytes)
        bytes.append(contentsOf: #","logs":["#.utf8)
        for (index, log) in logs.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: #"{"timestamp":"#.utf8)
            Timestamp.write(ms: timestamp(log), into: &bytes)
            if let device = device(log.context) {
                bytes.append(contentsOf: #","device":"#.utf8)
                bytes.append(contentsOf: device)
            }
            // The payload is a JSON object: drop its opening brace and keep the rest.
            if log.payload.count > 2 {
                bytes.append(UInt8(ascii: ","))
                bytes.append(contentsOf: log.payload.dropFirst())
            } else {
                bytes.append(UInt8(ascii: "}"))
            }
        }
        bytes.append(contentsOf: "]}".utf8)
        return bytes
    }
}
