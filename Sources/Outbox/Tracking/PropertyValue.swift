import FoundationEssentials

/// A typed event property (SPEC T3; App Center's typed properties).
///
/// ```swift
/// try engine.trackEvent("purchase", properties: ["sku": "A-1", "qty": 2, "price": 9.99, "gift": true])
/// ```
public enum PropertyValue: Sendable, Equatable {
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case date(Date)
}

extension PropertyValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
}

/// How a log is stored and sent (SPEC T1, T5, C4).
public enum LogFlags: Sendable, Equatable {
    /// Committed within the group-commit window; sent after critical logs.
    case normal
    /// Committed before `trackEvent` returns; sent first, evicted last.
    case critical

    var priority: Priority { self == .critical ? .critical : .normal }
}

/// A property value as the C interface reads it from the caller's JSON (SPEC E2): a string without escapes stays
/// in the caller's bytes, rather than becoming a `String` (a heap allocation and a copy on the caller's thread for
/// any text over 15 bytes) only to be copied again into the event's JSON.
@_spi(CInterface) public enum ScannedPropertyValue {
    case value(PropertyValue)
    /// Well-formed UTF-8 text, valid for the duration of the `trackEvent` call. Stored exactly as
    /// `.value(.string(String(decoding: text, as: UTF8.self)))` would be: escaped as needed, truncated the same way.
    case utf8(UnsafeBufferPointer<UInt8>)
}
