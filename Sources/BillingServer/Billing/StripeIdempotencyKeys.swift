import BillingStore
import Crypto

/// The `Idempotency-Key`s billingd sends for its writes, scoped by mode and account so that the
/// same client key never means two things, and at most 255 characters as Stripe requires.
enum StripeIdempotencyKeys {
    /// The key that creates a user's customer: the same for every request (and every billingd
    /// process) of one user in one scope, so that racing creations within Stripe's 24 hours of
    /// key retention give one customer.
    static func customer(user: String, scope: ServiceScope) -> String {
        "billingd-customer-\(prefix(scope))-\(digest(user))"
    }

    /// A client's `Idempotency-Key` for an action, forwarded: the same key gives Stripe's first
    /// answer again. Keys too long to fit after the prefix are hashed.
    static func forwarded(_ clientKey: String, action: String, user: String, scope: ServiceScope) -> String {
        // The user is part of the key so that one client key reused for two users is two
        // requests to Stripe, not an idempotency conflict.
        let key = "billingd-\(action)-\(prefix(scope))-\(digest(user).prefix(16))-\(clientKey)"
        return key.utf8.count <= 255 ? key : "billingd-\(action)-\(prefix(scope))-\(digest(user).prefix(16))-h\(digest(clientKey))"
    }

    private static func prefix(_ scope: ServiceScope) -> String {
        "\(scope.livemode ? "live" : "test")-\(scope.account.isEmpty ? "platform" : scope.account)"
    }

    /// Hex SHA-256 of the text: fixed length, any bytes in, nothing of the user's id readable.
    static func digest(_ text: String) -> String {
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(64)
        for byte in SHA256.hash(data: Array(text.utf8)) {
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
