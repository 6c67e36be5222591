/// The tests' one seeded random source: SplitMix64, tiny and the same sequence on every platform for a given
/// seed, so that randomised test data and intervals are reproducible. (The mock's scenarios draw from the
/// same algorithm, in MockServer/OutboxMock/ScenarioEngine.swift.)
///
/// ```swift
/// var random = SplitMix64(seed: 42)
/// let byte = UInt8.random(in: 0...255, using: &random)
/// ```
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public private(set) var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
