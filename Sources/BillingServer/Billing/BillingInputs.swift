import BillingCore
import BillingStore
import Foundation
import HTTPTypes

/// What a Checkout session sells: a tier of the plan catalog billed every `interval`, a Stripe
/// price id, or a price's lookup key.
public enum PlanChoice: Sendable, Equatable, CustomStringConvertible {
    /// A catalog tier id (`pro`); nil interval picks the tier's monthly price, else its first priced interval.
    case tier(String, interval: RecurringInterval?)
    /// A Stripe price id (`price_…`).
    case price(String)
    /// A Stripe price's `lookup_key`.
    case lookupKey(String)

    public var description: String {
        switch self {
        case .tier(let id, let interval): "plan \(id)" + (interval.map { " (\($0.rawValue)ly)" } ?? "")
        case .price(let id): "price \(id)"
        case .lookupKey(let key): "lookup key \(key)"
        }
    }
}

/// A validated request for a Checkout session; built by the service API from JSON and by
/// `billingd checkout` from options, with the same rules and the same error codes.
public struct CheckoutInput: Sendable, Equatable {
    public var user: String
    public var scope: ServiceScope
    public var plan: PlanChoice
    /// Units of the price (seats), 1…10000.
    public var quantity: Int64
    /// Free days before the first charge, 1…730; nil for none.
    public var trialDays: Int64?
    /// `allow_promotion_codes`; nil leaves Stripe's default (no promotion code field).
    public var allowPromotionCodes: Bool?
    public var successURL: String
    public var cancelURL: String
    /// Used only when billingd creates the user's Stripe customer.
    public var email: String?
    /// The client's `Idempotency-Key`; the same key gives the same session.
    public var idempotencyKey: String?

    /// Validates every field; the error names the first that is wrong.
    public init(
        user: String, scope: ServiceScope, plan: PlanChoice, quantity: Int64 = 1, trialDays: Int64? = nil,
        allowPromotionCodes: Bool? = nil, successURL: String, cancelURL: String, email: String? = nil,
        idempotencyKey: String? = nil
    ) throws(APIError) {
        self.user = try CheckoutInput.user(user)
        self.scope = scope
        self.plan = try CheckoutInput.plan(plan)
        guard (1...10_000).contains(quantity) else { throw .invalidField("quantity", "a whole number from 1 to 10000") }
        self.quantity = quantity
        if let trialDays, !(1...730).contains(trialDays) {
            throw .invalidField("trial_days", "a whole number of days from 1 to 730 (Stripe's limit), or leave it out for no trial")
        }
        self.trialDays = trialDays
        self.allowPromotionCodes = allowPromotionCodes
        self.successURL = try CheckoutInput.url(successURL, field: "success_url")
        self.cancelURL = try CheckoutInput.url(cancelURL, field: "cancel_url")
        self.email = try email.map { email throws(APIError) in try CheckoutInput.email(email) }
        self.idempotencyKey = try idempotencyKey.map { key throws(APIError) in try CheckoutInput.idempotencyKey(key) }
    }

    // MARK: - Field rules, shared with the portal and cancel inputs

    /// An app user id: 1 to 255 bytes of UTF-8 without control characters (as in the user endpoints' path).
    static func user(_ user: String, field: String = "user") throws(APIError) -> String {
        guard !user.isEmpty else { throw .missingField(field, "give the app's id of the user") }
        guard user.utf8.count <= UserRequest.maximumUserBytes else {
            throw .invalidField(field, "an app user id of at most \(UserRequest.maximumUserBytes) bytes of UTF-8 (it is \(user.utf8.count))")
        }
        guard !user.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .invalidField(field, "an app user id without control characters")
        }
        return user
    }

    static func plan(_ plan: PlanChoice) throws(APIError) -> PlanChoice {
        switch plan {
        case .tier(let id, let interval):
            guard !id.isEmpty, id.utf8.count <= 64 else { throw .invalidField("plan", "a tier id of the plan catalog, such as pro") }
            if let interval, interval != .month, interval != .year {
                throw .invalidField("interval", "month or year")
            }
        case .price(let id):
            guard isStripeID(id) else {
                throw .invalidField("price", "a Stripe price id such as price_1QabcXYZ (letters, digits, _ and -)")
            }
        case .lookupKey(let key):
            let bytes = Array(key.utf8)
            guard (1...200).contains(bytes.count), bytes.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else {
                throw .invalidField("lookup_key", "a price lookup key of 1 to 200 characters without spaces or control characters")
            }
        }
        return plan
    }

    /// The longest URL accepted; Stripe's own limit is higher, but no redirect needs more.
    static let maximumURLLength = 2048

    /// An absolute `http` or `https` URL with a host. `{CHECKOUT_SESSION_ID}`, Stripe's template
    /// for the session id in `success_url`, is allowed.
    static func url(_ value: String, field: String) throws(APIError) -> String {
        guard !value.isEmpty else { throw .missingField(field, "give an absolute http(s) URL") }
        guard value.utf8.count <= maximumURLLength else {
            throw .invalidField(field, "a URL of at most \(maximumURLLength) characters")
        }
        guard !value.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.properties.generalCategory == .control }) else {
            throw .invalidURL(field, value)
        }
        let template = value.replacingOccurrences(of: "{CHECKOUT_SESSION_ID}", with: "CHECKOUT_SESSION_ID")
        guard let components = URLComponents(string: template), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty,
            template.lowercased().hasPrefix("\(scheme)://")
        else { throw .invalidURL(field, value) }
        return value
    }

    /// An e-mail address of a plausible shape: one `@`, something before it, a dotted domain after.
    static func email(_ value: String) throws(APIError) -> String {
        let parts = value.split(separator: "@", omittingEmptySubsequences: false)
        let valid = value.utf8.count <= 512 && parts.count == 2 && !parts[0].isEmpty
            && parts[1].contains(".") && !parts[1].hasPrefix(".") && !parts[1].hasSuffix(".") && !parts[1].contains("..")
            && !value.unicodeScalars.contains { $0.properties.isWhitespace || $0.properties.generalCategory == .control }
        guard valid else { throw .invalidField("email", "an e-mail address such as ada@example.com") }
        return value
    }

    /// An `Idempotency-Key`: 1 to 255 printable ASCII characters (Stripe's rule for its own keys).
    static func idempotencyKey(_ value: String) throws(APIError) -> String {
        let bytes = Array(value.utf8)
        guard (1...255).contains(bytes.count), bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw APIError(
                .badRequest, code: "invalid_idempotency_key",
                message: "The Idempotency-Key header must be 1 to 255 printable ASCII characters without spaces, e.g. a UUID.")
        }
        return value
    }

    /// A connected account id (`acct_…`), for the scope.
    static func account(_ value: String) throws(APIError) -> String {
        guard ServiceScope.isAccountID(value) else {
            throw .invalidField("account", "a Stripe connected account id (acct_…), or leave it out for the platform account")
        }
        return value
    }

    static func isStripeID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...255).contains(bytes.count) else { return false }
        return bytes.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
    }

    /// A value safe to echo in a message: control characters dropped, at most 100 characters.
    static func printable(_ value: some StringProtocol) -> String {
        UserRequest.printable(value)
    }
}

/// A validated request for a Customer Portal session.
public struct PortalInput: Sendable, Equatable {
    public var user: String
    public var scope: ServiceScope
    /// Where the portal's "return" link goes.
    public var returnURL: String
    public var idempotencyKey: String?

    public init(user: String, scope: ServiceScope, returnURL: String, idempotencyKey: String? = nil) throws(APIError) {
        self.user = try CheckoutInput.user(user)
        self.scope = scope
        self.returnURL = try CheckoutInput.url(returnURL, field: "return_url")
        self.idempotencyKey = try idempotencyKey.map { key throws(APIError) in try CheckoutInput.idempotencyKey(key) }
    }
}

/// A validated request to cancel a user's subscription.
public struct CancelInput: Sendable, Equatable {
    public var user: String
    public var scope: ServiceScope
    /// True (the default): keep access until the paid period ends, then stop. False: end now.
    public var atPeriodEnd: Bool
    public var idempotencyKey: String?

    public init(user: String, scope: ServiceScope, atPeriodEnd: Bool = true, idempotencyKey: String? = nil) throws(APIError) {
        self.user = try CheckoutInput.user(user)
        self.scope = scope
        self.atPeriodEnd = atPeriodEnd
        self.idempotencyKey = try idempotencyKey.map { key throws(APIError) in try CheckoutInput.idempotencyKey(key) }
    }
}
