/// A user's billing as the ledger holds it: the reads behind the service API's user endpoints.
public protocol UserLedgerStore: Sendable {
    /// The user's customers in `scope`, preferred first; empty for a user billingd does not know.
    func customers(of user: String, in scope: ServiceScope) async throws -> [LinkedCustomer]
    /// The user's customers, subscriptions and (unless `stripeEntitlements` is false) active
    /// Stripe Entitlements in `scope`.
    func billing(of user: String, in scope: ServiceScope, stripeEntitlements: Bool) async throws -> UserBilling
    /// A page of the user's invoices, newest first; nil for a user without customers. Throws
    /// ``UserLedgerError/unknownInvoice(_:)`` when `startingAfter` is not the user's.
    func invoices(of user: String, in scope: ServiceScope, limit: Int, startingAfter: String?) async throws -> UserInvoicePage?
    /// The user's payment methods (detached ones left out), newest first; nil for a user without customers.
    func paymentMethods(of user: String, in scope: ServiceScope) async throws -> [UserPaymentMethod]?
    /// The app users a search term names in `scope` (the console's customer search): as an app
    /// user id, a customer's e-mail, a Stripe customer or subscription id, or (platform account
    /// only) an App Store original transaction id; each user once per way it matched, by user id.
    func users(matching term: String, in scope: ServiceScope, limit: Int) async throws -> [UserMatch]
}

/// An app user a search term found, and how.
public struct UserMatch: Sendable, Equatable {
    /// What the term was to the user.
    public enum Field: String, Sendable, Equatable, CaseIterable {
        case appUserID = "app_user_id"
        case email
        case stripeCustomer = "stripe_customer"
        case subscription
        case originalTransactionID = "original_transaction_id"
    }

    public var user: String
    public var field: Field

    public init(user: String, field: Field) {
        self.user = user
        self.field = field
    }
}

extension UserLedgerStore {
    /// The user's billing with their Stripe Entitlements.
    public func billing(of user: String, in scope: ServiceScope) async throws -> UserBilling {
        try await billing(of: user, in: scope, stripeEntitlements: true)
    }
}
