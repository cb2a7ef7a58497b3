/// A subscription's status; values Stripe adds later are kept as they come, never rejected.
public struct SubscriptionStatus: RawRepresentable, Codable, Hashable, Sendable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }

    public static let incomplete = SubscriptionStatus(rawValue: "incomplete")
    public static let incompleteExpired = SubscriptionStatus(rawValue: "incomplete_expired")
    public static let trialing = SubscriptionStatus(rawValue: "trialing")
    public static let active = SubscriptionStatus(rawValue: "active")
    public static let pastDue = SubscriptionStatus(rawValue: "past_due")
    public static let canceled = SubscriptionStatus(rawValue: "canceled")
    public static let unpaid = SubscriptionStatus(rawValue: "unpaid")
    public static let paused = SubscriptionStatus(rawValue: "paused")
}

/// A Stripe subscription, decoded from either API shape: billing periods on the subscription
/// (API versions before 2025-03-31) or on each item (later versions).
public struct Subscription: Decodable, Sendable, Equatable {
    public var id: String
    public var customer: Expandable
    public var status: SubscriptionStatus
    public var created: Int64?
    public var livemode: Bool?
    public var currency: String?
    public var cancelAtPeriodEnd: Bool
    public var cancelAt: Int64?
    public var canceledAt: Int64?
    public var endedAt: Int64?
    public var trialStart: Int64?
    public var trialEnd: Int64?
    public var startDate: Int64?
    /// `charge_automatically` or `send_invoice`.
    public var collectionMethod: String?
    public var defaultPaymentMethod: Expandable?
    public var latestInvoice: Expandable?
    public var metadata: [String: String]
    /// `cancellation_details.reason`, e.g. `cancellation_requested`, `payment_failed`.
    public var cancellationReason: String?
    /// `pause_collection.behavior` while collection is paused, e.g. `void`, `mark_uncollectible`.
    public var pauseBehavior: String?
    public var items: [SubscriptionItem]
    /// True when Stripe sent only the first page of items; fetch the rest before trusting ``items``.
    public var itemsHasMore: Bool
    /// The subscription's own `current_period_start` (old API) or the earliest of its items' (new API).
    public var currentPeriodStart: Int64?
    /// The subscription's own `current_period_end` (old API) or the latest of its items' (new API).
    public var currentPeriodEnd: Int64?

    public init(
        id: String, customer: Expandable, status: SubscriptionStatus, created: Int64? = nil, livemode: Bool? = nil,
        currency: String? = nil, cancelAtPeriodEnd: Bool = false, cancelAt: Int64? = nil, canceledAt: Int64? = nil,
        endedAt: Int64? = nil, trialStart: Int64? = nil, trialEnd: Int64? = nil, startDate: Int64? = nil,
        collectionMethod: String? = nil, defaultPaymentMethod: Expandable? = nil, latestInvoice: Expandable? = nil,
        metadata: [String: String] = [:], cancellationReason: String? = nil, pauseBehavior: String? = nil,
        items: [SubscriptionItem] = [], itemsHasMore: Bool = false, currentPeriodStart: Int64? = nil,
        currentPeriodEnd: Int64? = nil
    ) {
        self.id = id
        self.customer = customer
        self.status = status
        self.created = created
        self.livemode = livemode
        self.currency = currency
        self.cancelAtPeriodEnd = cancelAtPeriodEnd
        self.cancelAt = cancelAt
        self.canceledAt = canceledAt
        self.endedAt = endedAt
        self.trialStart = trialStart
        self.trialEnd = trialEnd
        self.startDate = startDate
        self.collectionMethod = collectionMethod
        self.defaultPaymentMethod = defaultPaymentMethod
        self.latestInvoice = latestInvoice
        self.metadata = metadata
        self.cancellationReason = cancellationReason
        self.pauseBehavior = pauseBehavior
        self.items = items
        self.itemsHasMore = itemsHasMore
        self.currentPeriodStart = currentPeriodStart
        self.currentPeriodEnd = currentPeriodEnd
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        let items = wire.items?.data ?? []
        self.init(
            id: wire.id, customer: wire.customer, status: wire.status, created: wire.created,
            livemode: wire.livemode, currency: wire.currency, cancelAtPeriodEnd: wire.cancel_at_period_end ?? false,
            cancelAt: wire.cancel_at, canceledAt: wire.canceled_at, endedAt: wire.ended_at,
            trialStart: wire.trial_start, trialEnd: wire.trial_end, startDate: wire.start_date,
            collectionMethod: wire.collection_method, defaultPaymentMethod: wire.default_payment_method,
            latestInvoice: wire.latest_invoice, metadata: wire.metadata.values,
            cancellationReason: wire.cancellation_details?.reason, pauseBehavior: wire.pause_collection?.behavior,
            items: items, itemsHasMore: wire.items?.has_more ?? false,
            currentPeriodStart: wire.current_period_start ?? items.compactMap(\.currentPeriodStart).min(),
            currentPeriodEnd: wire.current_period_end ?? items.compactMap(\.currentPeriodEnd).max())
    }

    private struct Wire: Decodable {
        struct CancellationDetails: Decodable {
            let reason: String?
        }
        struct PauseCollection: Decodable {
            let behavior: String?
        }
        let id: String
        let customer: Expandable
        let status: SubscriptionStatus
        let created: Int64?
        let livemode: Bool?
        let currency: String?
        let cancel_at_period_end: Bool?
        let cancel_at: Int64?
        let canceled_at: Int64?
        let ended_at: Int64?
        let trial_start: Int64?
        let trial_end: Int64?
        let start_date: Int64?
        let collection_method: String?
        let default_payment_method: Expandable?
        let latest_invoice: Expandable?
        let metadata: StripeJSON.Metadata?
        let cancellation_details: CancellationDetails?
        let pause_collection: PauseCollection?
        let items: StripeJSON.List<SubscriptionItem>?
        let current_period_start: Int64?
        let current_period_end: Int64?
    }
}

/// One price on a subscription, with its own billing period in the new API shape.
public struct SubscriptionItem: Decodable, Sendable, Equatable {
    public var id: String
    public var price: Price?
    public var quantity: Int64?
    /// Present from API 2025-03-31 on; nil in older shapes (use the subscription's).
    public var currentPeriodStart: Int64?
    public var currentPeriodEnd: Int64?
    public var created: Int64?
    public var metadata: [String: String]

    public init(
        id: String, price: Price? = nil, quantity: Int64? = nil, currentPeriodStart: Int64? = nil,
        currentPeriodEnd: Int64? = nil, created: Int64? = nil, metadata: [String: String] = [:]
    ) {
        self.id = id
        self.price = price
        self.quantity = quantity
        self.currentPeriodStart = currentPeriodStart
        self.currentPeriodEnd = currentPeriodEnd
        self.created = created
        self.metadata = metadata
    }

    public init(from decoder: any Decoder) throws {
        let wire = try Wire(from: decoder)
        self.init(
            id: wire.id, price: wire.price, quantity: wire.quantity, currentPeriodStart: wire.current_period_start,
            currentPeriodEnd: wire.current_period_end, created: wire.created, metadata: wire.metadata.values)
    }

    private struct Wire: Decodable {
        let id: String
        let price: Price?
        let quantity: Int64?
        let current_period_start: Int64?
        let current_period_end: Int64?
        let created: Int64?
        let metadata: StripeJSON.Metadata?
    }
}
