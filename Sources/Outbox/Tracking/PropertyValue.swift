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
