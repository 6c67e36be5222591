import ArgumentParser
import Outbox
import OutboxFleet

/// A flag that sets a bounded configuration field, checked in the flag's own unit against the field's bounds in
/// `BoundedField` (SPEC X3a): the message names the flag and its unit, not the library field in milliseconds, and says
/// what `--testing` lowers the minimum to.
struct BoundedFlag: Sendable {
    let flag: String
    let field: BoundedField
    /// Field units in one flag unit: 1000 for a flag in seconds over a field in milliseconds.
    let scale: Double
    let unit: String

    static let interval = BoundedFlag(flag: "--interval", field: .transmissionInterval, scale: 1000, unit: " s")
    static let retryIntervals = BoundedFlag(flag: "--retry-intervals", field: .retryIntervals, scale: 1000, unit: " s")
    static let batchSize = BoundedFlag(flag: "--batch-size", field: .batchSize, scale: 1, unit: "")
    static let maxStorageBytes = BoundedFlag(flag: "--max-storage-bytes", field: .maxStorageSize, scale: 1, unit: " bytes")
    /// Every flag of `emit` and `fleet` that sets a bounded field (a test checks them against the field's bounds).
    static let all: [BoundedFlag] = [.interval, .retryIntervals, .batchSize, .maxStorageBytes]

    /// `given` (in the flag's unit) in the field's unit, or a usage error that names the flag, its bounds and unit.
    func value(_ given: Double, testing: Bool) throws -> Int64 {
        let range = field.range(testing: testing)
        let converted = given * scale
        guard given.isFinite, converted >= Double(range.lowerBound), converted <= Double(range.upperBound) else {
            var message = "\(flag) must be between \(Self.format(Double(range.lowerBound) / scale)) and "
                + "\(Self.format(Double(range.upperBound) / scale))\(unit), got \(Self.format(given))\(unit)"
            let lowered = field.range(testing: true).lowerBound
            if !testing && lowered < range.lowerBound {
                message += " (--testing lowers the minimum to \(Self.format(Double(lowered) / scale))\(unit))"
            }
            throw ValidationError(message)
        }
        return Int64(converted.rounded())
    }

    /// A number as a person writes it: 6, 0.5, 0.001; large values without an exponent.
    static func format(_ value: Double) -> String {
        guard value.isFinite else { return "\(value)" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return cFormat("%g", value)
    }

    /// A comma-separated list of numbers of seconds (`--retry-intervals 10,300,1200`): an empty item is an error,
    /// not skipped; an empty list means no retry interval.
    func list(_ text: String, testing: Bool) throws -> [Int64] {
        if text.isEmpty { return [] }
        return try text.split(separator: ",", omittingEmptySubsequences: false).map { part in
            let trimmed = part.trimmingSpaceAndTab
            guard !trimmed.isEmpty, let seconds = Double(trimmed) else {
                throw ValidationError("\(flag) takes numbers of seconds separated by commas (such as 10,300,1200), got '\(text)'")
            }
            return try value(seconds, testing: testing)
        }
    }
}
