import FoundationEssentials

/// BEHAVIOUR H2–H4: what one destination sends of the stored logs — `include` / `exclude` by name, `redact` by
/// property name, `sample` by a rate per event name — compiled once from the configuration's lists and applied to
/// each batch the destination claims, on the loop, before anything is encoded. The store keeps every log whole: a
/// policy decides only what this destination's requests carry, so another destination (or a changed policy) still
/// has the log as it was tracked.
///
/// nil where nothing is asked (`make` returns nil): a destination without a policy pays nothing per log.
struct DestinationPolicy: Sendable {
    /// Patterns as the keys paragraph of BEHAVIOUR H says: a name matches exactly, else by its longest `prefix*`
    /// (`*` alone is the empty prefix, so it comes last).
    struct Names<Value: Sendable>: Sendable {
        private var exact: [String: Value] = [:]
        private var prefixes: [(prefix: [UInt8], value: Value)] = []

        var isEmpty: Bool { exact.isEmpty && prefixes.isEmpty }

        /// A later pattern replaces an equal earlier one: `exclude` is added after `include`, so the same pattern in
        /// both excludes.
        mutating func add(_ pattern: String, _ value: Value) {
            guard pattern.hasSuffix("*") else { exact[pattern] = value; return }
            let prefix = Array(pattern.utf8.dropLast())
            if let index = prefixes.firstIndex(where: { $0.prefix == prefix }) {
                prefixes[index].value = value
            } else {
                prefixes.append((prefix, value))
                prefixes.sort { $0.prefix.count > $1.prefix.count }
            }
        }

        func match(_ name: String) -> Value? {
            if let value = exact[name] { return value }
            return prefixes.first { name.utf8.starts(with: $0.prefix) }?.value
        }
    }

    /// `include`'s patterns as true, `exclude`'s as false: the most specific match decides.
    private var passes = Names<Bool>()
    private var hasInclude = false
    private var redacted = Names<Bool>()
    private var rates = Names<Double>()

    /// The policy the four fields ask for, or nil when they ask for nothing (every log sent whole).
    static func make(include: [String]?, exclude: [String], redact: [String], sample: [String: Double]) -> DestinationPolicy? {
        guard include != nil || !exclude.isEmpty || !redact.isEmpty || sample.values.contains(where: { $0 < 1 }) else {
            return nil
        }
        var policy = DestinationPolicy()
        policy.hasInclude = include != nil
        for pattern in include ?? [] { policy.passes.add(pattern, true) }
        for pattern in exclude { policy.passes.add(pattern, false) }
        for pattern in redact { policy.redacted.add(pattern, true) }
        for (pattern, rate) in sample { policy.rates.add(pattern, rate) }
        return policy
    }

    /// Why the four fields cannot make a policy, naming the key and the pattern (BEHAVIOUR H): an empty name, a `*`
    /// anywhere but at the end, a rate outside 0–1. nil when they can.
    static func problem(include: [String]?, exclude: [String], redact: [String], sample: [String: Double]) -> String? {
        let lists: [(String, [String])] = [("include", include ?? []), ("exclude", exclude), ("redact", redact),
                                           ("sample", sample.keys.sorted())]
        for (key, patterns) in lists {
            for pattern in patterns {
                if pattern.isEmpty { return "\(key) holds an empty name" }
                if pattern.dropLast().contains("*") {
                    return "\(key)'s '\(pattern)': '*' goes only at the end of a name (a prefix: 'debug*'; '*' alone: every name)"
                }
            }
        }
        for (pattern, rate) in sample.sorted(by: { $0.key < $1.key }) where !(rate >= 0 && rate <= 1) {
            return "sample's rate for '\(pattern)' must be between 0 and 1, got \(rate)"
        }
        return nil
    }

    /// BEHAVIOUR H2, H4: a claimed batch split into the logs this destination sends and the seqs of those it skips.
    func partition(_ logs: [StoredLog]) -> (kept: [StoredLog], skipped: [Int64]) {
        guard hasInclude || !passes.isEmpty || !rates.isEmpty else { return (logs, []) }
        var kept: [StoredLog] = [], skipped: [Int64] = []
        kept.reserveCapacity(logs.count)
        for log in logs {
            let reading = read(log.payload, redacting: false)
            if skips(type: reading.type, name: reading.name, id: log.id) { skipped.append(log.seq) } else { kept.append(log) }
        }
        return (kept, skipped)
    }

    /// BEHAVIOUR H3: the logs as this destination's request carries them, without the redacted properties. Done for
    /// every request rather than once at the claim, so that a policy changed by `update` also covers the batches
    /// already waiting for a retry.
    func redacting(_ logs: [StoredLog]) -> [StoredLog] {
        guard !redacted.isEmpty else { return logs }
        return logs.map { log in
            guard let payload = read(log.payload, redacting: true).redacted else { return log }
            var log = log
            log.payload = payload
            return log
        }
    }

    /// BEHAVIOUR H2, H4: whether this destination leaves the log out. Non-event logs go by the engine's own names
    /// (`$screen`, `$identify`, …), whatever their wire calls them; only events are sampled.
    func skips(type: LogType, name: String?, id: UUIDBytes) -> Bool {
        let matched = type == .event ? (name ?? "") : "$" + type.rawValue
        if let passes = passes.match(matched) {
            if !passes { return true }
        } else if hasInclude {
            return true
        }
        guard type == .event, let rate = rates.match(matched), rate < 1 else { return false }
        return Self.sampleFraction(id) >= rate
    }

    /// BEHAVIOUR H4: where a log id falls in [0, 1) — a fixed mix of its 128 bits (splitmix64's finaliser), the same
    /// on every attempt, every restart and every machine, so that a log is sampled in or out once and for all.
    static func sampleFraction(_ id: UUIDBytes) -> Double {
        var z = id.high ^ (id.low &* 0x9E37_79B9_7F4A_7C15)
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Double(z >> 11) * 0x1p-53
    }

    /// The payload's type and name, and the payload again without the redacted properties (nil: none to remove).
    /// The engine wrote the payload, so it parses; one that did not would be sent as it is.
    private func read(_ payload: [UInt8], redacting: Bool) -> (type: LogType, name: String?, redacted: [UInt8]?) {
        payload.withUnsafeBufferPointer { buffer in
            var type = LogType.event, name: String?
            // Each property list's place in the payload and its entries' places, kept or not.
            var lists: [(list: Range<Int>, kept: [Range<Int>], removed: Int)] = []
            var scanner = JSONScanner(buffer)
            try? scanner.members { (key: JSONText, s: inout JSONScanner) throws(JSONError) in
                if key.is("type"), s.peekKind() == .string {
                    type = LogType(stored: try s.text())
                } else if key.is("name"), s.peekKind() == .string {
                    name = try s.text().string
                } else if redacting, key.is("typedProperties") || key.is("properties"), s.peekKind() == .array {
                    let start = s.offset
                    var kept: [Range<Int>] = [], removed = 0
                    try s.elements { (s: inout JSONScanner) throws(JSONError) in
                        let entry = try s.skip()
                        if let property = Self.propertyName(UnsafeBufferPointer(rebasing: buffer[entry])),
                           redacted.match(property) == true {
                            removed += 1
                        } else {
                            kept.append(entry)
                        }
                    }
                    lists.append((start..<s.offset, kept, removed))
                } else {
                    try s.skip()
                }
            }
            guard lists.contains(where: { $0.removed > 0 }) else { return (type, name, nil) }
            var out: [UInt8] = []
            out.reserveCapacity(buffer.count)
            var at = 0
            for (list, kept, removed) in lists where removed > 0 {
                out.append(contentsOf: buffer[at..<list.lowerBound])
                out.append(UInt8(ascii: "["))
                for (index, entry) in kept.enumerated() {
                    if index > 0 { out.append(UInt8(ascii: ",")) }
                    out.append(contentsOf: buffer[entry])
                }
                out.append(UInt8(ascii: "]"))
                at = list.upperBound
            }
            out.append(contentsOf: buffer[at...])
            return (type, name, out)
        }
    }

    /// A stored property entry's `name` (`{"type":…,"name":"k","value":…}`).
    private static func propertyName(_ entry: UnsafeBufferPointer<UInt8>) -> String? {
        var scanner = JSONScanner(entry)
        var name: String?
        try? scanner.members { (key: JSONText, s: inout JSONScanner) throws(JSONError) in
            if key.is("name"), s.peekKind() == .string { name = try s.text().string } else { try s.skip() }
        }
        return name
    }
}
