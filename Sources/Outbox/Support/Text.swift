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

/// `url` as it may appear in a reason, a log or a report (SPEC K3): its userinfo (`user:password@`) and the value of
/// each query parameter but `api-version` (a token, a signature, a key) shown as `***`.
///
/// ```swift
/// maskingCredentials(in: "https://u:p@h/v1/logs?token=t")  // "https://***@h/v1/logs?token=***"
/// ```
package func maskingCredentials(in url: String) -> String {
    let fragmentSplit = url.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
    let parts = fragmentSplit[0].split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
    var base = String(parts[0])
    let schemeEnd = base.afterScheme
    if schemeEnd != base.startIndex {
        let authorityEnd = base[schemeEnd...].firstIndex(of: "/") ?? base.endIndex
        if let at = base[schemeEnd..<authorityEnd].lastIndex(of: "@") {
            base.replaceSubrange(schemeEnd..<at, with: "***")
        }
    }
    guard parts.count > 1 else { return base + (fragmentSplit.count > 1 ? "#…" : "") }
    let query = parts[1].split(separator: "&", omittingEmptySubsequences: false).map { pair -> String in
        guard let equals = pair.firstIndex(of: "=") else { return String(pair) }
        let name = pair[..<equals]
        return name.lowercased() == "api-version" ? String(pair) : name + "=***"
    }
    return base + "?" + query.joined(separator: "&") + (fragmentSplit.count > 1 ? "#…" : "")
}

extension String {
    /// Where a URL's authority starts: just after its `scheme://`; the start when it has none.
    var afterScheme: Index {
        guard let colon = firstIndex(of: ":"), self[colon...].hasPrefix("://") else { return startIndex }
        return index(colon, offsetBy: 3)
    }
}
