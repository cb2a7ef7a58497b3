import APITransport
import BillingCore
import Foundation

/// A failed App Store Server API call, typed by what the caller can do about it. Carries Apple's
/// numeric `errorCode` and message when Apple sent one; never a token or the private key.
public struct AppStoreAPIError: Error, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// 401: the token was refused (wrong issuer, key id, bundle id, revoked key, skewed clock).
        case authentication
        /// 404 with Apple's code: no such transaction, order, app or test notification.
        case notFound = "not_found"
        /// 400 or another 4xx: the request is wrong and retrying will not help.
        case invalidRequest = "invalid_request"
        /// 429 after every retry.
        case rateLimited = "rate_limited"
        /// 5xx after every retry.
        case server
        /// No HTTP answer after every retry (connect, TLS, timeout, dropped connection).
        case transport
        /// An answer did not verify to a configured root, or came from another environment.
        case verification
        /// A 2xx answer that is not what Apple documents.
        case decoding
        /// The calling task was cancelled.
        case cancelled
        /// A token could not be signed.
        case signing
    }

    public let kind: Kind
    /// The HTTP status, nil when none arrived.
    public let status: Int?
    /// Apple's `errorCode`, e.g. 4040010 (transaction id not found) or 4290000 (rate limit).
    public let errorCode: Int?
    public let message: String
    /// The route template, e.g. `/inApps/v2/history/{transactionId}`: no ids, which belong to customers.
    public let route: String
    public let attempts: Int

    public init(kind: Kind, status: Int? = nil, errorCode: Int? = nil, message: String, route: String, attempts: Int = 1) {
        self.kind = kind
        self.status = status
        self.errorCode = errorCode
        self.message = message
        self.route = route
        self.attempts = attempts
    }

    /// Apple's codes billingd acts on.
    public static let transactionIDNotFound = 4_040_010
    public static let invalidTransactionID = 4_000_006
    public static let rateLimitExceeded = 4_290_000
    public static let originalTransactionIDNotFound = 4_040_005

    public var description: String {
        var text = "App Store Server API \(route): "
        if let status { text += "HTTP \(status) " }
        if let errorCode { text += "\(errorCode) " }
        text += message
        if attempts > 1 { text += " (after \(attempts) attempts)" }
        return text
    }

    /// Apple's `{"errorCode": …, "errorMessage": …}`, or a readable stand-in.
    struct Body: Decodable {
        let errorCode: Int?
        let errorMessage: String?

        static func read(_ answer: HTTPTransportResponse) -> (code: Int?, message: String) {
            if let body = try? JSONDecoder().decode(Body.self, fromUntrusted: answer.body), body.errorCode != nil || body.errorMessage != nil {
                return (body.errorCode, body.errorMessage ?? "HTTP \(answer.status) with no error message")
            }
            if answer.status == 401 {
                return (nil, "Apple refused the token: check APPSTORE_ISSUER_ID, APPSTORE_KEY_ID, APPSTORE_BUNDLE_ID, that the key is an In-App Purchase key that was not revoked, and this machine's clock")
            }
            return (nil, answer.body.isEmpty ? "HTTP \(answer.status) with an empty body" : "HTTP \(answer.status) with a body that is not an App Store error")
        }
    }
}
