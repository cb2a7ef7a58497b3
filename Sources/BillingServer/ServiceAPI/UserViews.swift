import BillingCore
import BillingStore
import HTTPTypes
import Hummingbird
import NIOCore

/// The JSON answers of the service API's user endpoints. Keys are snake_case, times are Unix
/// seconds (as in Stripe's API), amounts are `{"amount": minor units, "currency", "decimal"}`.
enum UserJSONResponse {
    static func response(_ bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func scope(_ scope: ServiceScope, user: String, into json: inout JSONBytesWriter) {
        json.field("user", user)
        json.field("livemode", scope.livemode)
        json.field("account", scope.account.isEmpty ? nil : scope.account)
    }
}

/// `GET /v1/users/{user}/subscription`: is the user subscribed, to which plan, in which status,
/// until when. Built from the user's billing and the catalog; the cancel endpoint answers the
/// same view.
public struct SubscriptionView: Sendable {
    public let user: String
    public let scope: ServiceScope
    public let resolution: PlanResolution

    public init(user: String, scope: ServiceScope, resolution: PlanResolution) {
        self.user = user
        self.scope = scope
        self.resolution = resolution
    }

    /// The view of a user's billing under `catalog` at `now` (Unix seconds).
    public init(billing: UserBilling, catalog: PlanCatalog, now: Int64) {
        self.init(user: billing.user, scope: billing.scope, resolution: billing.resolve(catalog, now: now))
    }

    /// The JSON object, e.g. `{"user": "user_42", "subscribed": true, "plan": "pro", "status": "active", …}`.
    public func jsonBytes() -> [UInt8] {
        jsonBytes(extra: { _ in })
    }

    /// The JSON object with more members, written before it closes (restore's counts).
    func jsonBytes(extra: (inout JSONBytesWriter) -> Void) -> [UInt8] {
        let resolution = resolution
        var json = JSONBytesWriter()
        json.beginObject()
        UserJSONResponse.scope(scope, user: user, into: &json)
        json.field("subscribed", resolution.entitled)
        json.field("plan", resolution.plan)
        json.field("plan_name", resolution.plan == nil ? nil : resolution.tier.name)
        if let record = resolution.appStoreSubscription {
            Self.appStore(record, status: resolution.appStoreStatus, resolution: resolution, into: &json)
        } else if let grant = resolution.grant {
            Self.grant(grant, resolution: resolution, into: &json)
        } else {
            Self.stripe(resolution, into: &json)
        }
        json.field("ends_at", resolution.endsAt)
        json.field("valid_until", resolution.validUntil)
        json.field("grace_until", resolution.graceUntil)
        json.field("unmapped_price", resolution.unmappedPrice)
        extra(&json)
        json.endObject()
        return json.bytes
    }

    private static func stripe(_ resolution: PlanResolution, into json: inout JSONBytesWriter) {
        let subscription = resolution.subscription
        let item = resolution.item
        json.field("status", subscription?.status.rawValue)
        json.field("why", resolution.why.rawValue)
        json.field("source", subscription == nil ? nil : EntitlementSource.stripe.rawValue)
        json.field("subscription_id", subscription?.id)
        json.field("customer_id", subscription?.customer)
        json.field("product_id", item?.product)
        json.field("price_id", item?.price)
        json.field("lookup_key", item?.lookupKey)
        json.field("interval", item?.interval?.rawValue)
        json.field("interval_count", item?.intervalCount)
        json.field("quantity", item.map { $0.quantity ?? 1 })
        json.money("unit_amount", item?.unitAmount, currency: item?.currency ?? subscription?.currency)
        json.field("current_period_start", item?.currentPeriodStart ?? subscription?.currentPeriodStart)
        json.field("current_period_end", item?.currentPeriodEnd ?? subscription?.currentPeriodEnd)
        json.field("cancel_at_period_end", subscription?.cancelAtPeriodEnd ?? false)
        json.field("cancel_at", subscription?.cancelAt)
        json.field("canceled_at", subscription?.canceledAt)
        json.field("trial_start", subscription?.trialStart)
        json.field("trial_end", subscription?.trialEnd)
        if let subscription {
            let live = [.active, .trialing, .pastDue].contains(subscription.status) && subscription.endedAt == nil
            json.field("will_renew", live && !subscription.cancelAtPeriodEnd && subscription.cancelAt == nil)
            json.field("billing_issue", [.pastDue, .unpaid].contains(subscription.status))
        } else {
            json.field("will_renew", false)
            json.field("billing_issue", false)
        }
        json.field("environment", nil as String?)
    }

    /// A promotional grant: its id as `subscription_id` and `grant_id`, its start and expiry as
    /// the period; it never renews and has no billing issue.
    private static func grant(_ grant: PromotionalGrant, resolution: PlanResolution, into json: inout JSONBytesWriter) {
        json.field("status", resolution.grantStatus)
        json.field("why", resolution.why.rawValue)
        json.field("source", EntitlementSource.grant.rawValue)
        json.field("subscription_id", grant.id)
        json.field("grant_id", grant.id)
        json.field("quantity", 1 as Int64?)
        json.field("current_period_start", grant.startsAt)
        json.field("current_period_end", grant.expiresAt)
        json.field("cancel_at_period_end", false)
        json.field("will_renew", false)
        json.field("billing_issue", false)
        json.field("revoked_at", grant.revokedAt)
        json.field("environment", nil as String?)
    }

    /// An App Store purchase: its status by date, its product, and Apple's renewal state.
    private static func appStore(
        _ record: AppStoreSubscriptionRecord, status: AppStoreStatus?, resolution: PlanResolution, into json: inout JSONBytesWriter
    ) {
        let status = status ?? .expired
        json.field("status", status.rawValue)
        json.field("why", resolution.why.rawValue)
        json.field("source", EntitlementSource.appStore.rawValue)
        json.field("subscription_id", record.originalTransactionID)
        json.field("original_transaction_id", record.originalTransactionID)
        json.field("transaction_id", record.transactionID)
        json.field("product_id", record.productID)
        json.field("product_type", record.type)
        json.field("quantity", 1 as Int64?)
        json.field("current_period_start", record.purchaseDate.map { $0 / 1000 })
        json.field("current_period_end", record.expiresDate.map { $0 / 1000 })
        json.field("cancel_at_period_end", !record.isLifetime && record.autoRenewStatus == false)
        json.field("will_renew", [.active, .gracePeriod, .billingRetry].contains(status) && !record.isLifetime && record.willRenew)
        json.field("renews_to_product_id", record.autoRenewProductID)
        json.field("billing_issue", status == .gracePeriod || status == .billingRetry)
        json.field("revoked_at", record.revoked ? record.revocationDate.map { $0 / 1000 } : nil)
        json.field("environment", record.environment)
        json.field("manage_url", AppStoreController.manageSubscriptionsURL)
    }

    public func response(status: HTTPResponse.Status = .ok) -> Response {
        UserJSONResponse.response(jsonBytes(), status: status)
    }
}

/// `GET /v1/users/{user}/entitlements`: what the user may do: the plan's features and limits,
/// Stripe's active entitlements, until when and why.
public struct EntitlementsView: Sendable {
    public let user: String
    public let scope: ServiceScope
    public let resolution: PlanResolution
    /// The meters' states (`GET …/usage`'s), embedded as `usage.meters` when the catalog has meters.
    public let usage: [UsageMeterState]

    public init(user: String, scope: ServiceScope, resolution: PlanResolution, usage: [UsageMeterState] = []) {
        self.user = user
        self.scope = scope
        self.resolution = resolution
        self.usage = usage
    }

    public init(billing: UserBilling, catalog: PlanCatalog, now: Int64) {
        self.init(user: billing.user, scope: billing.scope, resolution: billing.resolve(catalog, now: now))
    }

    public func jsonBytes() -> [UInt8] {
        let resolution = resolution
        var json = JSONBytesWriter()
        json.beginObject()
        UserJSONResponse.scope(scope, user: user, into: &json)
        json.field("plan", resolution.plan)
        json.field("plan_name", resolution.plan == nil ? nil : resolution.tier.name)
        json.field("rank", resolution.plan == nil ? nil : resolution.tier.rank)
        json.field("entitled", resolution.entitled)
        json.field("why", resolution.why.rawValue)
        json.field("source", resolution.source?.rawValue)
        json.field("status", resolution.appStoreStatus?.rawValue ?? resolution.subscription?.status.rawValue ?? resolution.grantStatus)
        json.field("subscription_id", resolution.subscription?.id ?? resolution.appStoreSubscription?.originalTransactionID ?? resolution.grant?.id)
        json.field("grant_id", resolution.grant?.id)
        json.field("environment", resolution.appStoreSubscription?.environment)
        json.field("valid_until", resolution.validUntil)
        json.field("grace_until", resolution.graceUntil)
        json.field("ends_at", resolution.endsAt)
        json.field("quantity", resolution.quantity)
        json.strings("features", resolution.features)
        json.key("limits")
        json.beginObject()
        for limit in resolution.limits {
            switch limit.value {
            case .count(let count): json.field(limit.key, count)
            case .unlimited: json.field(limit.key, "unlimited")
            }
        }
        json.endObject()
        json.strings("stripe_entitlements", resolution.stripeEntitlements)
        json.field("unmapped_price", resolution.unmappedPrice)
        if !usage.isEmpty {
            json.key("usage")
            json.beginObject()
            UsageJSON.meters(usage, into: &json)
            json.endObject()
        }
        json.endObject()
        return json.bytes
    }

    public func response(status: HTTPResponse.Status = .ok) -> Response {
        UserJSONResponse.response(jsonBytes(), status: status)
    }
}

/// `GET /v1/users/{user}/invoices`: a page of billing history, newest first, as a Stripe-style list.
public struct InvoiceListView: Sendable {
    public let user: String
    public let scope: ServiceScope
    public let page: UserInvoicePage

    public init(user: String, scope: ServiceScope, page: UserInvoicePage) {
        self.user = user
        self.scope = scope
        self.page = page
    }

    public func jsonBytes() -> [UInt8] {
        var json = JSONBytesWriter(capacity: 1024 + page.invoices.count * 1024)
        json.beginObject()
        json.field("object", "list")
        UserJSONResponse.scope(scope, user: user, into: &json)
        json.key("data")
        json.beginArray()
        for invoice in page.invoices {
            json.beginObject()
            json.field("id", invoice.id)
            json.field("number", invoice.number)
            json.field("status", invoice.status)
            json.field("customer_id", invoice.customer)
            json.field("subscription_id", invoice.subscription)
            json.field("currency", invoice.currency.lowercased())
            json.money("subtotal", invoice.subtotal, currency: invoice.currency)
            json.money("discount", invoice.discount, currency: invoice.currency)
            json.money("tax", invoice.tax, currency: invoice.currency)
            json.money("total", invoice.total, currency: invoice.currency)
            json.money("amount_due", invoice.amountDue, currency: invoice.currency)
            json.money("amount_paid", invoice.amountPaid, currency: invoice.currency)
            json.money("amount_remaining", invoice.amountRemaining, currency: invoice.currency)
            json.field("created", invoice.created)
            json.field("finalized_at", invoice.finalizedAt)
            json.field("paid_at", invoice.paidAt)
            json.field("voided_at", invoice.voidedAt)
            json.field("due_date", invoice.dueDate)
            json.field("period_start", invoice.periodStart)
            json.field("period_end", invoice.periodEnd)
            json.field("billing_reason", invoice.billingReason)
            json.field("collection_method", invoice.collectionMethod)
            json.field("hosted_invoice_url", invoice.hostedInvoiceURL)
            json.field("invoice_pdf", invoice.invoicePDF)
            json.endObject()
        }
        json.endArray()
        json.field("has_more", page.hasMore)
        json.field("next_starting_after", page.hasMore ? page.invoices.last?.id : nil)
        json.endObject()
        return json.bytes
    }

    public func response() -> Response {
        UserJSONResponse.response(jsonBytes())
    }
}

/// `GET /v1/users/{user}/payment-methods`: brand, last 4, expiry, and which is the default.
public struct PaymentMethodListView: Sendable {
    public let user: String
    public let scope: ServiceScope
    public let methods: [UserPaymentMethod]

    public init(user: String, scope: ServiceScope, methods: [UserPaymentMethod]) {
        self.user = user
        self.scope = scope
        self.methods = methods
    }

    public func jsonBytes() -> [UInt8] {
        var json = JSONBytesWriter()
        json.beginObject()
        json.field("object", "list")
        UserJSONResponse.scope(scope, user: user, into: &json)
        json.key("data")
        json.beginArray()
        for method in methods {
            json.beginObject()
            json.field("id", method.id)
            json.field("type", method.type)
            json.field("customer_id", method.customer)
            json.field("brand", method.brand)
            json.field("last4", method.last4)
            json.field("exp_month", method.expMonth)
            json.field("exp_year", method.expYear)
            json.field("created", method.created)
            json.field("default", method.isDefault)
            json.endObject()
        }
        json.endArray()
        json.field("default_payment_method", methods.first(where: \.isDefault)?.id)
        json.endObject()
        return json.bytes
    }

    public func response() -> Response {
        UserJSONResponse.response(jsonBytes())
    }
}
