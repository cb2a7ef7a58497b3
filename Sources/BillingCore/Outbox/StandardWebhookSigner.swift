import Crypto
import Foundation

/// Signs outbound webhooks per the Standard Webhooks specification (standardwebhooks.com):
/// `webhook-signature` is `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, one per secret and
/// separated by spaces, so that the app verifies during a rotation with either secret.
public struct StandardWebhookSigner: Sendable {
    /// The keys, each the base64 text after `whsec_` decoded.
    let keys: [SymmetricKey]

    /// - Parameter secrets: `whsec_<base64>` secrets (the prefix is optional).
    /// - Throws: ``StandardWebhookSecretError`` naming the secret that is not base64.
    public init(secrets: [String]) throws(StandardWebhookSecretError) {
        var keys: [SymmetricKey] = []
        for (index, secret) in secrets.enumerated() {
            let text = secret.hasPrefix("whsec_") ? String(secret.dropFirst("whsec_".count)) : secret
            guard let bytes = Data(base64Encoded: text), bytes.count >= 16 else {
                throw .notBase64(index: index)
            }
            keys.append(SymmetricKey(data: bytes))
        }
        guard !keys.isEmpty else { throw .missing }
        self.keys = keys
    }

    /// The value of `webhook-signature` for a message.
    /// - Parameter timestamp: Unix seconds, the value of `webhook-timestamp`.
    public func signature(id: String, timestamp: Int64, body: [UInt8]) -> String {
        var content = Array("\(id).\(timestamp).".utf8)
        content.append(contentsOf: body)
        return keys.map { key in
            "v1," + Data(HMAC<SHA256>.authenticationCode(for: content, using: key)).base64EncodedString()
        }.joined(separator: " ")
    }

    /// The three headers of a signed message.
    public func headers(id: String, timestamp: Int64, body: [UInt8]) -> [(name: String, value: String)] {
        [("webhook-id", id), ("webhook-timestamp", String(timestamp)), ("webhook-signature", signature(id: id, timestamp: timestamp, body: body))]
    }

    /// A new random secret in the `whsec_` form, 32 bytes.
    public static func generateSecret() -> String {
        "whsec_" + SymmetricKey(size: .bits256).withUnsafeBytes { Data($0).base64EncodedString() }
    }
}

/// Why an app webhook secret cannot sign.
public enum StandardWebhookSecretError: Error, Equatable, CustomStringConvertible {
    case missing
    /// The secret at this position (0-based) is not `whsec_` and base64 of at least 16 bytes.
    case notBase64(index: Int)

    public var description: String {
        switch self {
        case .missing:
            "No secret: set BILLINGD_APP_WEBHOOK_SECRET to one or more whsec_ secrets, comma-separated."
        case .notBase64(let index):
            "Secret \(index + 1) of BILLINGD_APP_WEBHOOK_SECRET is not whsec_ followed by base64 of at least 16 bytes; generate one with `billingd outbox send-test --new-secret` or `openssl rand -base64 32`."
        }
    }
}
