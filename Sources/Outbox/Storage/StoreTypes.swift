import FoundationEssentials

/// Priority of a stored log (SPEC C4, S2): critical logs are sent first and evicted last.
public enum Priority: Int, Sendable, Comparable, CaseIterable {
    case normal = 0
    case critical = 1
    public static func < (lhs: Priority, rhs: Priority) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A log ready to be stored. `payload` is the log's JSON object **without** `timestamp` and `device`
/// (they are spliced in at send time: the timestamp may be corrected by SPEC A9 and the device context is
/// stored once per version in `contexts`, not per log).
/// Example payload: `{"type":"event","id":"…","sid":null,"name":"tap"}`.
struct NewLog: Sendable {
    /// The log's UUID as 16 raw bytes (T7; stable across retries).
    var id: UUIDBytes
    var priority: Priority
    /// Wall-clock capture time, milliseconds since the Unix epoch.
    var wallMs: Int64
    /// CLOCK_BOOTTIME capture time in nanoseconds (A9).
    var monoNs: Int64
    /// First 8 bytes of /proc/sys/kernel/random/boot_id: two monotonic readings compare only with equal boots.
    var boot: Int64
    /// Device-context version this log was captured under (0 = none yet).
    var context: Int64
    /// The JSON object bytes, as described above — or, with `sealedUnder`, those bytes sealed already.
    var payload: [UInt8]
    /// SPEC K1: the id of the key `payload` is sealed under (a caller sealed it, `CallerPayloads`); nil: plaintext.
    var sealedUnder: UInt32? = nil
}

/// 16 raw bytes of a UUID.
struct UUIDBytes: Hashable, Sendable {
    var high: UInt64
    var low: UInt64
}

/// A stored log as loaded for sending.
struct StoredLog: Sendable, Equatable {
    var seq: Int64
    var id: UUIDBytes
    var priority: Priority
    var wallMs: Int64
    var monoNs: Int64
    var boot: Int64
    var context: Int64
    var payload: [UInt8]

    static func == (a: StoredLog, b: StoredLog) -> Bool { a.seq == b.seq && a.id == b.id }

    /// A log as the engine stores it — `{"type":…,"id":…` then the session's stamp (`Stamp.bytes`) and the type's own
    /// fields (`body`, without braces) — for the encode bench and the wires' tests.
    static func made(_ type: LogType, id: UUIDBytes, stamp: [UInt8], body: [UInt8], seq: Int64, wallMs: Int64,
                     monoNs: Int64 = 0, context: Int64 = 1) -> StoredLog {
        var payload = Array(type.payloadPrefix)
        id.write(into: &payload)
        payload.append(UInt8(ascii: "\""))
        payload += stamp
        if !body.isEmpty { payload.append(UInt8(ascii: ",")) }
        payload += body
        payload.append(UInt8(ascii: "}"))
        return StoredLog(seq: seq, id: id, priority: .normal, wallMs: wallMs, monoNs: monoNs, boot: 0, context: context,
                         payload: payload)
    }
}

/// A claimed batch (SPEC C9): its rows are marked in flight with `batchID` until completed or released.
struct ClaimedBatch: Sendable {
    var batchID: Int64
    var logs: [StoredLog]
}

/// What one `append` did.
struct AppendResult: Sendable, Equatable {
    /// Logs stored, in input order of the accepted ones.
    var stored: Int = 0
    /// Logs evicted to make room (S2, S5).
    var evicted: Int = 0
    /// Input indexes rejected, with why (S3 storageFull, or logTooLarge).
    var rejected: [Int: OutboxError] = [:]
}

/// Counters of the store (SPEC X4).
struct StoreCounts: Sendable, Equatable {
    var pendingNormal: Int = 0
    var pendingCritical: Int = 0
    var inFlight: Int = 0
    /// Bytes used by the database: (page_count − freelist_count) × page_size.
    var bytes: Int = 0
    /// Wall-clock capture time of the oldest stored log (ms since epoch), nil when empty.
    var oldestWallMs: Int64? = nil
    var deadLetters: Int = 0
}

/// A refused log kept for inspection (SPEC R2).
struct DeadLetter: Sendable, Equatable {
    var id: UUIDBytes
    var status: Int
    var reason: String
    var atMs: Int64
    var payload: [UInt8]
}

/// Limits the store enforces (SPEC S2, S4, S5).
struct StoreLimits: Sendable {
    /// SPEC S2: the database file never grows beyond this (bytes).
    var maxStorageSize: Int = 10 * 1024 * 1024
    /// SPEC S5: optional cap on the number of stored logs.
    var maxLogCount: Int? = nil
    /// SPEC S4: logs older than this (ms) are deleted and never sent.
    var maxAgeMs: Int64 = 25 * 24 * 3600 * 1000
    /// SPEC R2: dead-letter table cap (bytes of payload).
    var maxDeadLetterBytes: Int = 1024 * 1024
    /// SQLite's page cache in KiB; nil: `StoreOpener.pageCacheKiB(for:)` of the cap.
    var pageCacheKiB: Int? = nil
    /// SPEC S7: the reserve file's size; nil: `LogStore.defaultDiskReserveBytes`.
    var diskReserveBytes: Int? = nil
    /// SQLite's `locking_mode = EXCLUSIVE` (`Configuration.exclusiveStoreLock`): no `-shm` file, SQLite's own lock on
    /// the database for the connection's life instead of the `.lock` file's.
    var exclusiveLock = false
    /// SPEC K1: the key the store is sealed with; nil: plain (a sealed store then refuses to open).
    var key: StoreKey? = nil
}

/// Lower bounds of the stored logs' capture times (SPEC S4): wall time of the logs of earlier boots, boot time of
/// this boot's. Nil: no such log.
struct ExpiryBound: Sendable, Equatable {
    var otherBootWallMs: Int64? = nil
    var thisBootMonoNs: Int64? = nil

    mutating func include(wallMs: Int64, monoNs: Int64, sameBoot: Bool) {
        if sameBoot { thisBootMonoNs = min(thisBootMonoNs ?? monoNs, monoNs) }
        else { otherBootWallMs = min(otherBootWallMs ?? wallMs, wallMs) }
    }

    mutating func lower(to other: ExpiryBound) {
        if let wall = other.otherBootWallMs { otherBootWallMs = min(otherBootWallMs ?? wall, wall) }
        if let mono = other.thisBootMonoNs { thisBootMonoNs = min(thisBootMonoNs ?? mono, mono) }
    }

    func mayHaveExpired(wallCutoff: Int64, monoCutoff: Int64) -> Bool {
        (otherBootWallMs.map { $0 < wallCutoff } ?? false) || (thisBootMonoNs.map { $0 < monoCutoff } ?? false)
    }
}

/// A dead-letter row with everything needed to show it as sent or to put its log back in the queue (SPEC R2, X6).
struct DeadLetterRow: Sendable, Equatable {
    /// The row's own seq in `dead_letters` (the table's order: oldest letter first).
    var seq: Int64
    /// The seq the log had in `logs`.
    var logSeq: Int64
    var id: UUIDBytes
    var priority: Priority
    /// The log's wall-clock capture time (ms since the epoch).
    var wallMs: Int64
    var status: Int
    var reason: String
    /// When it was dead-lettered (wall clock, ms since the epoch).
    var atMs: Int64
    /// The stored payload: the log's JSON without `timestamp` and `device` (see `NewLog`).
    var payload: [UInt8]
    /// SPEC D17: the destination that refused it (its id in `destinations`; 0 for `default` and a store of one).
    var dest: Int64 = 0
    /// SPEC K1: its sealed values did not open (`DeadLettersTable.unreadableReason`); a requeue leaves it where it is.
    var unreadable = false
}

/// What a requeue of dead letters did (SPEC R2).
struct DeadLetterRequeue: Sendable, Equatable {
    /// Letters put back in the queue as pending logs, by priority.
    var normal = 0
    var critical = 0
    /// Logs evicted to make room for them (SPEC S2, S5).
    var evicted = 0
    /// Letters left in the dead-letter table because the store could not take them (SPEC S2, S3).
    var kept = 0

    var requeued: Int { normal + critical }
}

/// A log the server refused, as the API and `outbox dead-letters` show it (SPEC R2, X6).
///
/// ```swift
/// for letter in try await engine.deadLetters() {
///     print(letter.id, letter.status, letter.reason, letter.log)
/// }
/// ```
public struct DeadLetterRecord: Sendable, Equatable, Hashable {
    /// The log's id (SPEC T7); a requeued log keeps it.
    public var id: UUID
    /// The HTTP status of the refusal (400, 413, 422, …).
    public var status: Int
    /// What the server said, cut to its first 1000 characters.
    public var reason: String
    /// When the log was moved to the dead-letter table, in milliseconds since the Unix epoch (wall clock).
    public var deadLetteredAtMs: Int64
    /// The log's JSON object as it is sent: `timestamp` (its capture time, without clock correction), the device
    /// context (the store's current one: a dead letter does not keep the version it was captured with), then
    /// the log's own fields.
    public var log: String

    /// SPEC D18: the destination that refused it, when the store serves a list; nil for one destination.
    public var destination: String? = nil

    public var deadLetteredAt: Date { Date(timeIntervalSince1970: Double(deadLetteredAtMs) / 1000) }

    public init(id: UUID, status: Int, reason: String, deadLetteredAtMs: Int64, log: String) {
        self.id = id
        self.status = status
        self.reason = reason
        self.deadLetteredAtMs = deadLetteredAtMs
        self.log = log
    }
}
