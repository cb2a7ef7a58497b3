import BillingCore

/// Whose an inbox row is, as its `account` column holds it: a Stripe account, or an App Store
/// environment.
///
/// The column text is the contract (existing ledgers hold it): Stripe's platform account is '',
/// a connected account its `acct_…` id, and an App Store environment `appstore:<environment>`.
/// Stripe's ids never hold a colon, so the two stores' keys never collide, and the unique key
/// (event id, account, livemode) that deduplicates Stripe's redeliveries deduplicates Apple's
/// as well. Every column value parses and renders back to the same text.
public enum InboxAccount: Hashable, Sendable, CustomStringConvertible {
    /// A Stripe account: nil for the platform account, or a connected account's `acct_…` id.
    case stripe(connected: String?)
    /// An App Store environment.
    case appStore(AppStoreEnvironment)

    /// What an App Store row's column starts with; the SQL that joins App Store tables to the
    /// inbox prefixes their `environment` with it.
    public static let appStorePrefix = "appstore:"

    /// Reads an `account` column value.
    public init(column: String) {
        if column.hasPrefix(Self.appStorePrefix) {
            self = .appStore(AppStoreEnvironment(rawValue: String(column.dropFirst(Self.appStorePrefix.count))))
        } else {
            self = .stripe(connected: column.isEmpty ? nil : column)
        }
    }

    /// The `account` column value.
    public var column: String {
        switch self {
        case .stripe(let connected): connected ?? ""
        case .appStore(let environment): Self.appStorePrefix + environment.rawValue
        }
    }

    /// The App Store environment of an App Store row; nil for Stripe's.
    public var appStoreEnvironment: AppStoreEnvironment? {
        if case .appStore(let environment) = self { environment } else { nil }
    }

    public var description: String { column }
}
