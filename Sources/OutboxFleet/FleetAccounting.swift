import FoundationEssentials
import Histogram
import Logging
import Outbox

/// SPEC F2: every tracked log is delivered (in the mock's records), pending, dead-lettered or evicted; whatever is
/// none of these is lost. The mock's `/_mock/logs` is read line by line, and a device's delivered events are kept as
/// a bitmap of their ordinals, so that the accounting of a million logs takes a few megabytes.
struct FleetAccounting {
    struct Device {
        var number: Int
        var install: String
        var tracked: Int
        var store: FleetStoreCount?
        var delivered: [UInt64]
        var uniqueDelivered = 0
        /// The session's id, learnt from the device's events in the mock's records (FleetSessions.swift).
        var sid: String? = nil
        var startSessionDelivered = false
        var endSessionDelivered = false

        func isDelivered(_ ordinal: Int) -> Bool {
            let word = ordinal >> 6
            return word < delivered.count && delivered[word] & (1 << UInt64(ordinal & 63)) != 0
        }

        var pending: Int { store?.pending ?? 0 }
        var deadLettered: Int { store?.deadLettered ?? 0 }
        var evicted: Int { store?.evicted ?? 0 }
        var expired: Int { store?.expired ?? 0 }
        var serverRejected: Int { store?.serverRejected ?? 0 }
        var skipped: Int { store?.skipped ?? 0 }
        /// SPEC F2, F2a: what is none of delivered, pending, dead-lettered, evicted, expired, refused inside an
        /// accepted request or skipped by a destination's policy (BEHAVIOUR H2).
        var lost: Int { tracked - uniqueDelivered - pending - deadLettered - evicted - expired - serverRejected - skipped }
    }

    private(set) var devices: [Device]
    /// SPEC F6: logs of this run that more than one of the accounting mocks recorded (each counted once per extra mock).
    private(set) var crossMockDuplicates = 0
    private let deviceOffset: Int
    private let events: Int
    /// Delivery delay (server arrival − the log's timestamp) of this run's unique logs, ms.
    private(set) var histogram = Histogram<UInt64>(highestTrackableValue: 24 * 3600 * 1000, numberOfSignificantValueDigits: .three)
    /// SPEC F9: the backlog of a fault is every log tracked (stamped) before the fault ended, epoch ms: set before
    /// the records are read; `lastBacklogReceivedMs` is when the mock received the last of them (nil: none).
    var backlogCutoffMs: Int64?
    private(set) var lastBacklogReceivedMs: Int64?

    init(devices counts: [(number: Int, tracked: Int, rejected: Int, install: String)], stores: [String: FleetStoreCount],
         deviceOffset: Int, events: Int) {
        self.deviceOffset = deviceOffset
        self.events = events
        var devices = counts.map {
            Device(number: $0.number, install: $0.install, tracked: $0.tracked, store: stores[$0.install],
                   delivered: [UInt64](repeating: 0, count: (events + 63) / 64))
        }
        devices.sort { $0.number < $1.number }
        self.devices = devices
    }

    var tracked: Int { devices.reduce(0) { $0 + $1.tracked } }
    var uniqueDelivered: Int { devices.reduce(0) { $0 + $1.uniqueDelivered } }
    var engineDelivered: Int { devices.reduce(0) { $0 + ($1.store?.delivered ?? 0) } }
    var pending: Int { devices.reduce(0) { $0 + $1.pending } }
    var deadLettered: Int { devices.reduce(0) { $0 + $1.deadLettered } }
    var evicted: Int { devices.reduce(0) { $0 + $1.evicted } }
    var lost: Int { devices.reduce(0) { $0 + max(0, $1.lost) } }

    /// Why the devices that still hold pending logs did not send them: each distinct stop reason of theirs (SPEC R5,
    /// R1), with how many devices gave it, most frequent first; `none` for devices that were still trying.
    var pendingReasons: [(reason: String, devices: Int)] {
        var counts: [String: Int] = [:]
        for device in devices where device.pending > 0 { counts[device.store?.stopReason ?? "none", default: 0] += 1 }
        return counts.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    var delayPercentiles: FleetSummary.Delay {
        guard histogram.totalCount > 0 else { return FleetSummary.Delay(p50: 0, p90: 0, p99: 0, max: 0) }
        return FleetSummary.Delay(p50: Int(histogram.valueAtPercentile(50)), p90: Int(histogram.valueAtPercentile(90)),
                                  p99: Int(histogram.valueAtPercentile(99)), max: Int(histogram.max))
    }

    /// Streams `GET /_mock/logs` and counts this run's logs by device and ordinal. Called once per accounting mock
    /// (SPEC F6): a log already counted from another mock is a cross-mock duplicate (a mock lists each log once).
    mutating func readLogs(client: FleetMockClient, runID: String, fields: FleetLineFields) throws {
        var crossMockDuplicates = self.crossMockDuplicates
        var splitter = LineSplitter()
        var histogram = self.histogram
        var devices = self.devices
        var lastBacklogReceivedMs = self.lastBacklogReceivedMs
        let cutoff = backlogCutoffMs ?? .min
        let offset = deviceOffset
        let events = self.events
        // Session logs carry no properties: they are kept aside (a few per device) and tied to their device by the
        // sid its events carry, once every line was read — a session log can arrive before the device's events.
        var sessionLogs: [FleetLogLine.SessionLog] = []
        var deviceBySID: [String: Int] = [:]
        // Sids learnt from a mock read before (SPEC F6): its session logs may be all this one holds of a device.
        for (index, device) in devices.enumerated() { if let sid = device.sid { deviceBySID[sid] = index } }
        // Devices are numbered offset, offset + 1, …: index by number.
        let consume: (UnsafeRawBufferPointer) -> Void = { line in
            guard let log = FleetLogLine.parse(line, fields: fields) else {
                // Only lines that are not events are looked at again: the events are nearly all of them.
                if let session = FleetLogLine.parseSessionLog(line, fields: fields) { sessionLogs.append(session) }
                return
            }
            guard log.run == runID else { return }
            let index = log.device - offset
            guard index >= 0, index < devices.count, devices[index].number == log.device,
                  log.ordinal >= 0, log.ordinal < events else { return }
            if let sid = log.sid, devices[index].sid == nil {
                devices[index].sid = sid
                deviceBySID[sid] = index
            }
            let word = log.ordinal >> 6
            let bit: UInt64 = 1 << UInt64(log.ordinal & 63)
            guard devices[index].delivered[word] & bit == 0 else {
                crossMockDuplicates += 1
                return
            }
            devices[index].delivered[word] |= bit
            devices[index].uniqueDelivered += 1
            if log.receivedMs - log.delayMs <= cutoff {
                lastBacklogReceivedMs = max(lastBacklogReceivedMs ?? log.receivedMs, log.receivedMs)
            }
            _ = histogram.record(UInt64(max(0, min(log.delayMs, 24 * 3600 * 1000))))
        }
        try client.get("/_mock/logs") { chunk in splitter.feed(chunk, line: consume) }
        splitter.finish(line: consume)
        for session in sessionLogs {
            guard let index = deviceBySID[session.sid] else { continue }
            switch session.kind {
            case .start where !devices[index].startSessionDelivered: devices[index].startSessionDelivered = true
            case .end where !devices[index].endSessionDelivered: devices[index].endSessionDelivered = true
            default:
                crossMockDuplicates += 1
                continue
            }
            devices[index].uniqueDelivered += 1
            if session.receivedMs - session.delayMs <= cutoff {
                lastBacklogReceivedMs = max(lastBacklogReceivedMs ?? session.receivedMs, session.receivedMs)
            }
            _ = histogram.record(UInt64(max(0, min(session.delayMs, 24 * 3600 * 1000))))
        }
        self.devices = devices
        self.lastBacklogReceivedMs = lastBacklogReceivedMs
        self.histogram = histogram
        self.crossMockDuplicates = crossMockDuplicates
    }

    /// SPEC F2: `missing DEVICE LOG-ID` for at most `limit` logs of the devices that lost some. A log that never
    /// reached the server has no id outside the store that dropped it, so it is named by its install and ordinal
    /// (`INSTALL-ID/i`, the `i` property of the event).
    func missingLines(limit: Int) -> [String] {
        var lines: [String] = []
        for device in devices where device.lost > 0 {
            let dead = device.store?.deadOrdinals ?? []
            var named = 0
            // A device that tracked events has a session around them; its logs have no ordinal (FleetSessions.swift).
            if events > 0 && device.tracked > 0 {
                for (kind, delivered, ordinal) in [("startSession", device.startSessionDelivered, Self.startSessionOrdinal),
                                                   ("endSession", device.endSessionDelivered, Self.endSessionOrdinal)]
                where !delivered && !dead.contains(ordinal) && lines.count < limit && named < device.lost {
                    lines.append("missing \(device.number) \(device.install)/\(kind)")
                    named += 1
                }
            }
            for ordinal in 0..<events where !device.isDelivered(ordinal) && !dead.contains(ordinal) {
                guard lines.count < limit, named < device.lost else { break }
                lines.append("missing \(device.number) \(device.install)/\(ordinal)")
                named += 1
            }
            if lines.count >= limit { break }
        }
        return lines
    }

    /// Stand-ins for the session logs' ordinals among a device's dead letters: they have no `i`.
    static let startSessionOrdinal = -1
    static let endSessionOrdinal = -2

    /// The `i` property of an event's JSON as the engine sends it (`typedProperties`); a session log's stand-in.
    static func ordinal(inLogJSON json: String, fields: FleetLineFields) -> Int? {
        var json = json
        return json.withUTF8 { bytes -> Int? in
            if FleetLogLine.find(fields.sessionStart, in: bytes) != nil { return startSessionOrdinal }
            if FleetLogLine.find(fields.sessionEnd, in: bytes) != nil { return endSessionOrdinal }
            return FleetLogLine.intValue(after: fields.ordinal, in: bytes)
        }
    }

}

extension FleetAccounting {
    /// What the stores left open at the end hold (SPEC F2): pending, dead-lettered, evicted, expired, refused inside
    /// accepted requests, and the dead letters' ordinals; by install id. Devices that closed reported theirs already
    /// (`FleetLoop.closedStores`). With several destinations each store's count holds each destination's too (BEHAVIOUR
    /// D18: its own pending and dead letters, read with that destination's `fields`).
    static func storeCounts(loops: [FleetLoop], fields: FleetLineFields, fieldsByName: [String: FleetLineFields] = [:],
                            logger: Logger) async -> [String: FleetStoreCount] {
        let engines = await withTaskGroup(of: [OutboxEngine].self) { group in
            for loop in loops { group.addTask { await loop.openEngines() } }
            return await group.reduce(into: []) { $0 += $1 }
        }
        if !engines.isEmpty {
            logger.warning("devices left open at the end: their stores hold what they did not deliver (pending) or dead letters",
                           metadata: ["outbox.devices": "\(engines.count)"])
        }
        var stores: [String: FleetStoreCount] = [:]
        for engine in engines {
            let install = engine.installID.uuidString.lowercased()
            guard let status = try? await engine.status() else { continue }
            var count = FleetStoreCount(status, pending: status.pendingNormal + status.pendingCritical + status.inFlight)
            count.stopReason = status.store.disabledReason
            if status.deadLetters > 0, let letters = try? await engine.deadLetters() {
                count.deadOrdinals = Set(letters.compactMap { ordinal(inLogJSON: $0.log, fields: fields) })
            }
            for (name, report) in status.store.destinations ?? [:] {
                var own = count.destination(report)
                if report.deadLetters > 0, let letters = try? await engine.deadLetters(destination: name) {
                    own.deadOrdinals = Set(letters.compactMap { ordinal(inLogJSON: $0.log, fields: fieldsByName[name] ?? fields) })
                }
                count.destinations[name] = own
            }
            stores[install] = count
        }
        return stores
    }
}

/// What one store held at the end (SPEC F2).
struct FleetStoreCount {
    var pending: Int
    var deadLettered: Int
    var evicted: Int
    var delivered: Int
    var deadOrdinals: Set<Int>
    /// SPEC F2a: too old to send (S4), and refused by the server inside an accepted request (D5): settled, not lost.
    var expired = 0
    var serverRejected = 0
    /// BEHAVIOUR H2: settled by a destination's policy without a request (its engine's count since it opened).
    var skipped = 0
    /// Why the store's engine had stopped sending at the end, if it had (SPEC R1, R5).
    var stopReason: String? = nil
    /// BEHAVIOUR D18: each destination's own count, by name, when the store serves several; eviction and expiry
    /// remove a log for every destination (D17), so each keeps the store's.
    var destinations: [String: FleetStoreCount] = [:]

    /// The engine's status with `pending` as the caller counts it (nothing, for a device that closed drained).
    init(_ status: EngineStatus, pending: Int) {
        self.init(pending: pending, deadLettered: status.deadLetters, evicted: status.evicted,
                  delivered: status.delivered, deadOrdinals: [], expired: status.expired,
                  serverRejected: status.serverRejected)
        skipped = status.skipped
        for (name, report) in status.store.destinations ?? [:] { destinations[name] = destination(report) }
    }

    init(pending: Int, deadLettered: Int, evicted: Int, delivered: Int, deadOrdinals: Set<Int>, expired: Int = 0,
         serverRejected: Int = 0) {
        self.pending = pending
        self.deadLettered = deadLettered
        self.evicted = evicted
        self.delivered = delivered
        self.deadOrdinals = deadOrdinals
        self.expired = expired
        self.serverRejected = serverRejected
    }

    /// One destination's part of this store (BEHAVIOUR D18): what it has not settled, in flight included.
    func destination(_ report: DestinationReport) -> FleetStoreCount {
        var own = FleetStoreCount(pending: report.pending + report.inFlight, deadLettered: report.deadLetters,
                                  evicted: evicted, delivered: report.delivered ?? 0, deadOrdinals: [],
                                  expired: expired, serverRejected: report.serverRejected)
        own.stopReason = report.disabledReason
        own.skipped = report.skipped ?? 0
        return own
    }
}

/// BEHAVIOUR D18: one destination of the run accounted on its own — its records read with its wire's fields, its
/// stores' own pending and dead letters, the re-sent logs of its wire the mocks absorbed. A run with the single
/// destination has one, with no name.
struct FleetDestinationAccount {
    var name: String?
    var wire: Destination
    var fields: FleetLineFields
    var accounting: FleetAccounting
    var duplicates = 0

    func summary(recordsRead: Bool) -> FleetSummary.DestinationFigures {
        FleetSummary.DestinationFigures(
            name: name ?? NamedDestination.defaultName, wire: wire.name,
            delivered: recordsRead ? accounting.uniqueDelivered : accounting.engineDelivered, duplicates: duplicates,
            deadLettered: accounting.deadLettered, pending: accounting.pending, lost: recordsRead ? accounting.lost : nil)
    }
}
