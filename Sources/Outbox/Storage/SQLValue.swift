/// A value to bind when convenience matters more than speed (schema code, meta, tests).
/// The hot paths bind typed values directly.
enum SQLValue: Sendable, Equatable {
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
    case null
}
