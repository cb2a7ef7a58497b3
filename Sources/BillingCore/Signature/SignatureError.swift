/// Why a webhook delivery was not accepted as genuine. Each case has a stable code for the
/// JSON error body and the metrics label, and a message that says what to check.
public enum SignatureError: Error, Sendable, Equatable {
    case missingHeader
    case headerTooLong
    case malformedPair
    case missingTimestamp
    case duplicateTimestamp
    case invalidTimestamp
    case noV1Signature
    case timestampTooOld(ageSeconds: Int64, tolerance: Int64)
    case timestampInFuture(aheadSeconds: Int64, tolerance: Int64)
    case noMatchingSignature

    /// A stable, machine-readable reason.
    public var code: String {
        switch self {
        case .missingHeader: "missing_signature_header"
        case .headerTooLong: "signature_header_too_long"
        case .malformedPair: "malformed_signature_header"
        case .missingTimestamp: "signature_timestamp_missing"
        case .duplicateTimestamp: "signature_timestamp_repeated"
        case .invalidTimestamp: "signature_timestamp_invalid"
        case .noV1Signature: "no_v1_signature"
        case .timestampTooOld: "signature_timestamp_too_old"
        case .timestampInFuture: "signature_timestamp_in_future"
        case .noMatchingSignature: "signature_mismatch"
        }
    }

    /// Whether the header was well-formed but its timestamp is outside the tolerance.
    public var isStale: Bool {
        switch self {
        case .timestampTooOld, .timestampInFuture: true
        default: false
        }
    }

    /// A sentence for the person reading the response or the log.
    public var message: String {
        switch self {
        case .missingHeader: "The Stripe-Signature header is missing or empty."
        case .headerTooLong: "The Stripe-Signature header is longer than \(SignatureHeader.maximumLength) bytes."
        case .malformedPair: "The Stripe-Signature header must be comma-separated key=value pairs."
        case .missingTimestamp: "The Stripe-Signature header has no t= timestamp."
        case .duplicateTimestamp: "The Stripe-Signature header has more than one t= timestamp."
        case .invalidTimestamp: "The Stripe-Signature timestamp is not a Unix time in seconds."
        case .noV1Signature: "The Stripe-Signature header has no v1 signature of 64 hex digits."
        case .timestampTooOld(let age, let tolerance):
            "The signature timestamp is \(age) s old, more than the \(tolerance) s tolerance (a replay, or a clock off)."
        case .timestampInFuture(let ahead, let tolerance):
            "The signature timestamp is \(ahead) s in the future, more than the \(tolerance) s tolerance (check this host's clock)."
        case .noMatchingSignature:
            "No v1 signature matches any configured webhook secret (wrong STRIPE_WEBHOOK_SECRET, or the body was altered)."
        }
    }
}
