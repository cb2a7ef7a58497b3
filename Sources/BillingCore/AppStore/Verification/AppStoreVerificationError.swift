/// Why data claiming to come from the App Store was not accepted. The code is stable (the JSON
/// error body and the metrics label); the message says what is wrong and what to check.
///
/// Messages quote at most a short excerpt of the input, with control characters replaced, so
/// that a hostile payload cannot flood or forge a log line.
public struct AppStoreVerificationError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable {
        /// Not three base64url segments, or a header that is not a JSON object.
        case invalidJWS = "invalid_jws"
        /// The header's `alg` is not ES256.
        case unsupportedAlgorithm = "unsupported_algorithm"
        /// An `x5c` entry (or a configured root) is not a base64 DER X.509 certificate.
        case invalidCertificate = "invalid_certificate"
        /// `x5c` does not hold exactly leaf, intermediate and root.
        case invalidChainLength = "invalid_chain_length"
        /// Leaf and intermediate do not chain to a configured root under RFC 5280.
        case untrustedChain = "untrusted_chain"
        /// The intermediate or the leaf lacks Apple's marker extension.
        case missingAppleOID = "missing_apple_oid"
        /// Leaf or intermediate was outside its validity at the payload's `signedDate`.
        case certificateExpiredAtSignedDate = "certificate_expired_at_signed_date"
        /// The ES256 signature does not match `header.payload` under the leaf's key.
        case signatureMismatch = "signature_mismatch"
        case wrongBundleID = "wrong_bundle_id"
        case wrongAppAppleID = "wrong_app_apple_id"
        case wrongEnvironment = "wrong_environment"
        /// The payload is not a JSON object with the fields its kind must have.
        case invalidPayload = "invalid_payload"
    }

    public let code: Code
    public let message: String

    init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// The same error with its message prefixed by where it was found, e.g. a notification's
    /// `data.signedTransactionInfo`.
    func located(in place: String) -> Self {
        Self(code, "In \(place): \(message)")
    }

    /// At most `limit` characters of untrusted text, quoted, with control and other invisible
    /// characters replaced by `?`, for quoting in a message.
    static func excerpt(_ text: some StringProtocol, limit: Int = 40) -> String {
        var out = ""
        var count = 0
        for scalar in text.unicodeScalars {
            if count == limit {
                out += "…"
                break
            }
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned:
                out += "?"
            default:
                out.unicodeScalars.append(scalar)
            }
            count += 1
        }
        return "\"" + out + "\""
    }
}
