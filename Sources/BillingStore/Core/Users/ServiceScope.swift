/// The part of the ledger the service API answers from: one mode (test or live) and one account
/// (the platform, or a connected account). Test and live data never mix, nor do accounts.
public struct ServiceScope: Sendable, Hashable, CustomStringConvertible {
    /// `''` for the platform account, else `acct_…`.
    public let account: String
    public let livemode: Bool

    public init(account: String = "", livemode: Bool) {
        self.account = account
        self.livemode = livemode
    }

    /// The platform account in test mode: billingd without a Stripe API key.
    public static let test = ServiceScope(livemode: false)

    /// The scope of a `STRIPE_API_KEY`: live keys (`sk_live_`, `rk_live_`) serve live data;
    /// test keys, and no key, serve test data. `isLive` is `Settings.Stripe.apiKeyIsLive`.
    public static func forAPIKey(isLive: Bool?) -> ServiceScope {
        ServiceScope(livemode: isLive ?? false)
    }

    /// The same mode for a connected account (`acct_…`), or the platform for nil.
    public func account(_ account: String?) -> ServiceScope {
        ServiceScope(account: account ?? "", livemode: livemode)
    }

    /// Whether `text` has the shape of a Stripe account id: `acct_` and 1 to 64 letters or digits.
    public static func isAccountID(_ text: some StringProtocol) -> Bool {
        let bytes = Array(text.utf8)
        let prefix = Array("acct_".utf8)
        guard bytes.count > prefix.count, bytes.count <= prefix.count + 64, bytes.starts(with: prefix) else { return false }
        return bytes[prefix.count...].allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
        }
    }

    public var description: String {
        "\(livemode ? "live" : "test") mode, \(account.isEmpty ? "platform account" : account)"
    }
}
