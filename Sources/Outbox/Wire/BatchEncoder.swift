/// Builds the request body of a batch at send time (SPEC C9, W1, W2): each stored payload gets its `timestamp`
/// (corrected by A9) and its `device` context spliced in, and the container is stamped with `sentAt`.
struct BatchEncoder {
    /// Device context JSON by version id (`StoredLog.context`); 0 is the current context.
    var contexts: [Int64: [UInt8]]

    /// One log as it goes on the wire: `timestamp` and `device` spliced into its stored payload.
    @inline(__always)
    static func write(_ payload: [UInt8], timestampMs: Int64, device: [UInt8]?, into writer: inout JSONWriter) {
        writer.raw(#"{"timestamp":"#)
        writer.timestamp(ms: timestampMs)
        if let device {
            writer.raw(#","device":"#)
            writer.raw(device)
        }
        // The payload is a JSON object: drop its opening brace and keep the rest.
        if payload.count > identifyPrefix.count, payload[9] == UInt8(ascii: "i"),
           payload.starts(with: identifyPrefix) {
            writeIdentify(payload, into: &writer)
        } else if payload.count > 2 {
            writer.raw(UInt8(ascii: ","))
            payload.withUnsafeBytes { writer.raw(UnsafeRawBufferPointer(rebasing: $0.dropFirst())) }
        } else {
            writer.raw(UInt8(ascii: "}"))
        }
    }

    private static let identifyPrefix = Array(#"{"type":"identify""#.utf8)
    private static let emptyTraits = Array(#","properties":[]}"#.utf8)

    /// SPEC A8a: W has no identify; it goes as the `userProperties` log it amounts to. Without traits it carries the
    /// user id as its one property (W2's user properties are never empty).
    private static func writeIdentify(_ payload: [UInt8], into writer: inout JSONWriter) {
        writer.raw(#","type":"userProperties""#)
        let rest = payload[identifyPrefix.count...]
        guard rest.count >= emptyTraits.count, rest.suffix(emptyTraits.count).elementsEqual(emptyTraits) else {
            rest.withUnsafeBytes { writer.raw($0) }
            return
        }
        rest.dropLast(emptyTraits.count).withUnsafeBytes { writer.raw($0) }
        var user: [UInt8] = []
        payload.withUnsafeBufferPointer { buffer in
            StoredPayload.scan(buffer) { field in if case .userID(let id) = field { user = id.decoded } }
        }
        writer.raw(#","properties":[{"type":"string","name":"userId","value":"#)
        user.withUnsafeBufferPointer { writer.string(utf8: $0) }
        writer.raw("}]}")
    }

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
        // Written through a pointer into one buffer of the right size (`JSONWriter`): every `Array` append pays
        // its bounds and uniqueness checks, and a log takes six.
        var size = 64
        for log in logs { size += log.payload.count + 64 + (device(log.context)?.count ?? 0) }
        var writer = JSONWriter(capacity: size)
        writer.raw(#"{"sentAt":"#)
        writer.timestamp(ms: sentAtMs)
        writer.raw(#","logs":["#)
        for (index, log) in logs.enumerated() {
            if index > 0 { writer.raw(UInt8(ascii: ",")) }
            Self.write(log.payload, timestampMs: timestamp(log), device: device(log.context), into: &writer)
        }
        writer.raw("]}")
        return writer.bytes
    }
}
