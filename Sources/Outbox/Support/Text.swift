/// Whitespace trimming without Foundation's `CharacterSet`: one reference to Foundation proper (rather than
/// FoundationEssentials) links CoreFoundation and ICU into every process that embeds the library, megabytes of
/// start-up memory for an engine that needs none of it.
extension Unicode.Scalar {
    /// Foundation's `CharacterSet.whitespaces`: tab and the space separators (Zs).
    var isSpaceOrTab: Bool { value == 0x09 || properties.generalCategory == .spaceSeparator }

    /// Foundation's `CharacterSet.whitespacesAndNewlines`: also U+000A–U+000D, U+0085, U+2028 and U+2029.
    var isSpaceOrNewline: Bool {
        isSpaceOrTab || (0x0A...0x0D).contains(value) || value == 0x85 || value == 0x2028 || value == 0x2029
    }
}

extension StringProtocol {
    /// The text without the leading and trailing scalars that `drop` matches.
    func trimming(_ drop: (Unicode.Scalar) -> Bool) -> String {
        let scalars = Substring(self).unicodeScalars
        guard let first = scalars.firstIndex(where: { !drop($0) }),
              let last = scalars.lastIndex(where: { !drop($0) }) else { return "" }
        return String(Substring(scalars[first...last]))
    }
}
