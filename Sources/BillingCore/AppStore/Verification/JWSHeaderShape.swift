/// A JOSE header's size counted without decoding it: how many members the object has and how
/// many entries its `x5c` array holds, found by one pass over the bytes that tracks only strings
/// and nesting. The verifier refuses a header over the bounds before `JSONDecoder` sees it, so an
/// unauthenticated header of thousands of members or certificates costs a scan, not a parse.
///
/// The bounds are cheap, not the rule: a header spelled so that the scan does not see its `x5c`
/// (the key written with `\u` escapes) is decoded — at most ``CompactJWS/maximumHeaderLength``
/// bytes — and the decoded chain's length is checked again (``AppleCertificateChain``).
struct JWSHeaderShape: Equatable {
    /// Members of the top-level object (0 for `{}` or for input that is not an object).
    var members = 0
    /// Entries of the top-level `x5c` array (the longest, should the key come twice), nil when
    /// there is none or it is not an array.
    var x5cEntries: Int?

    /// The most members accepted; Apple's header has two (`alg`, `x5c`).
    static let maximumMembers = 16
    /// Apple's chain: leaf, intermediate, root.
    static let maximumX5CEntries = 3

    init(_ header: [UInt8]) {
        var depth = 0
        var inString = false
        var escaped = false
        // The text of the string being read while it may be a top-level key, else nil.
        var key: [UInt8]?
        var expectingKey = false
        var lastKey: [UInt8] = []
        var inX5C = false
        var x5cCount = 0
        var x5cHasEntry = false
        for byte in header {
            if inString {
                if escaped {
                    escaped = false
                    key = nil  // an escaped key is not compared; the decoder's count still holds
                } else if byte == UInt8(ascii: "\\") {
                    escaped = true
                } else if byte == UInt8(ascii: "\"") {
                    inString = false
                    if let text = key { lastKey = text }
                    key = nil
                } else if key != nil {
                    key = (key?.count ?? 0) < 8 ? key! + [byte] : nil
                }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
                if depth == 1 && expectingKey {
                    key = []
                    lastKey = []
                    expectingKey = false
                }
                if inX5C && depth == 2 { x5cHasEntry = true }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                if depth == 1 && byte == UInt8(ascii: "{") {
                    expectingKey = true
                } else if depth == 2 && byte == UInt8(ascii: "[") && lastKey == Array("x5c".utf8) {
                    inX5C = true
                    x5cCount = 0
                    x5cHasEntry = false
                } else if inX5C && depth == 3 {
                    x5cHasEntry = true
                }
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 2 && inX5C {
                    inX5C = false
                    if x5cHasEntry { x5cCount += 1 }
                    x5cEntries = max(x5cEntries ?? 0, x5cCount)
                }
                depth -= 1
            case UInt8(ascii: ","):
                if depth == 1 {
                    members += 1
                    expectingKey = true
                } else if depth == 2 && inX5C {
                    x5cCount += 1
                    x5cHasEntry = false
                }
            case UInt8(ascii: ":"):
                if depth == 1 && members == 0 { members = 1 }
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
                break
            default:
                if inX5C && depth == 2 { x5cHasEntry = true }
            }
        }
        if inX5C {  // cut short inside the array: what was counted still counts
            x5cEntries = max(x5cEntries ?? 0, x5cCount + (x5cHasEntry ? 1 : 0))
        }
    }

    /// Refuses a header over the bounds: `invalid_chain_length` for a long `x5c`, `invalid_jws`
    /// for too many members.
    static func check(_ header: [UInt8]) throws(AppStoreVerificationError) {
        let shape = JWSHeaderShape(header)
        if let entries = shape.x5cEntries, entries > maximumX5CEntries {
            throw AppStoreVerificationError(
                .invalidChainLength,
                "The JWS header's x5c holds \(entries) entries; Apple's holds exactly three (leaf, intermediate, root).")
        }
        if shape.members > maximumMembers {
            throw AppStoreVerificationError(
                .invalidJWS,
                "The JWS header has \(shape.members) members, more than the \(maximumMembers) accepted; Apple's has alg and x5c.")
        }
    }
}
