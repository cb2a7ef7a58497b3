/// Turns a request path into a low-cardinality route for logs and metrics: object ids become
/// `{id}`, e.g. `/v1/customers/cus_N2x/payment_methods` → `/v1/customers/{id}/payment_methods`.
enum RouteTemplate {
    /// Known id prefixes, for hand-made ids such as `cus_abc` that have no digit or capital.
    private static let idPrefixes: Set<Substring> = [
        "acct", "ba", "bpc", "bps", "card", "ch", "clock", "cn", "cs", "cus", "dp", "du", "evt", "feat", "fee", "ibt",
        "ii", "il", "in", "pi", "pm", "po", "price", "prod", "promo", "py", "qt", "re", "seti", "si", "sli", "src", "sub",
        "tok", "tr", "trr", "txn", "txr", "we",
    ]

    static func route(for path: String) -> String {
        let pathOnly = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        var segments: [Substring] = []
        for (index, segment) in pathOnly.split(separator: "/").enumerated() {
            segments.append(index == 0 || !isIdentifier(segment) ? segment : "{id}")
        }
        return "/" + segments.joined(separator: "/")
    }

    /// Resource and action names are lowercase letters and underscores (`payment_methods`,
    /// `search`); ids have digits or capitals (`cus_N2x…`) or start with a known id prefix.
    static func isIdentifier(_ segment: Substring) -> Bool {
        let isName = segment.utf8.allSatisfy { ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || $0 == UInt8(ascii: "_") }
        guard isName else { return true }
        guard let underscore = segment.firstIndex(of: "_"), segment.index(after: underscore) != segment.endIndex else {
            return false
        }
        return idPrefixes.contains(segment[..<underscore])
    }
}
