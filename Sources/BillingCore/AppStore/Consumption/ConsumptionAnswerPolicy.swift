/// How billingd answers a `CONSUMPTION_REQUEST`: whether it answers at all, and what it says.
/// Pure: the responder gathers the facts from the ledger, the catalog and the settings, this
/// decides, in this order:
///
/// 1. Past Apple's window (12 hours from the notification's `signedDate`): nothing is sent,
///    the request is expired.
/// 2. The purchase's owner did not consent (or billingd knows no owner): nothing is sent.
/// 3. Otherwise a ``ConsumptionInformation`` with `customerConsented: true`, the delivery status
///    the ledger shows (``ConsumptionDelivery``), `sampleContentProvided` from the catalog, the
///    refund preference of `APPSTORE_REFUND_PREFERENCE` — for `by_usage`, the one its thresholds
///    give the share of the purchase used (``shareUsed(_:now:)``) — and a consumption percentage
///    only where Apple takes one and billingd knows it
///    (``consumptionPercentage(_:delivery:preference:share:)``).
public struct ConsumptionAnswerPolicy: Sendable, Equatable {
    /// How long after the notification Apple takes an answer: 12 hours.
    public static let answerWindow: Int64 = 12 * 3_600_000

    public var refund: AppStoreRefundPolicy

    public init(refund: AppStoreRefundPolicy = .none) {
        self.refund = refund
    }

    /// The last moment (Unix ms) an answer to a request signed at `requestedAt` may be sent.
    public static func deadline(requestedAt: Int64) -> Int64 {
        requestedAt + answerWindow
    }

    /// What to do with a request at `now` (Unix ms).
    public func decide(_ facts: ConsumptionFacts, now: Int64) -> ConsumptionDecision {
        guard now < Self.deadline(requestedAt: facts.requestedAt) else { return .expired }
        guard facts.consented else { return .noConsent }
        let share = Self.shareUsed(facts, now: now)
        let preference = refund.preference(shareUsed: share)
        return .send(ConsumptionInformation(
            customerConsented: true, deliveryStatus: facts.delivery, sampleContentProvided: facts.sampleContentProvided,
            refundPreference: preference,
            consumptionPercentage: facts.transaction.flatMap {
                Self.consumptionPercentage($0, delivery: facts.delivery, preference: preference, share: share)
            }))
    }

    /// The share of the purchase its buyer used, in milliunits (100000 is all of it); nil when
    /// billingd cannot tell:
    ///
    /// - not delivered: 0;
    /// - a product the catalog gives a `consumption_meter`: the use of that meter during the
    ///   purchase's period against the limit its tier gives the meter (``ConsumptionFacts/Usage``),
    ///   at most all of it;
    /// - otherwise a subscription (auto-renewable or not): the time used of its period, from its
    ///   purchase to now (or its revocation, if earlier), of its purchase to its end — its expiry
    ///   when Apple gives one, else its purchase plus the period the catalog gives the product
    ///   (`period: P1M`); unknown without either;
    /// - a consumable or non-consumable without a meter: unknown.
    public static func shareUsed(_ facts: ConsumptionFacts, now: Int64) -> Int64? {
        guard facts.delivery == .delivered else { return 0 }
        if let usage = facts.usage { return usage.share }
        guard let transaction = facts.transaction,
            transaction.type == AppStoreTransaction.autoRenewable || transaction.type == AppStoreTransaction.nonRenewing,
            let start = transaction.purchaseDate,
            let end = transaction.expiresDate ?? transaction.period.map({ start + $0.productionSeconds * 1000 }), end > start
        else { return nil }
        let used = min(max(min(now, transaction.revocationDate ?? now), start), end) - start
        return share(used, of: end - start)
    }

    /// The `consumptionPercentage` sent, where Apple takes one and billingd knows the share used:
    ///
    /// - an auto-renewable subscription: never (Apple computes it, and refuses one sent);
    /// - not delivered: 0, as Apple requires — left out instead with `GRANT_PRORATED`, which
    ///   takes only a share above 0;
    /// - otherwise the share used (``shareUsed(_:now:)``), left out when unknown; with
    ///   `GRANT_PRORATED` kept strictly between 0 and 100 %, the range Apple takes a prorated
    ///   share in.
    public static func consumptionPercentage(
        _ transaction: ConsumptionFacts.Transaction, delivery: ConsumptionDeliveryStatus, preference: ConsumptionRefundPreference?,
        share: Int64?
    ) -> Int64? {
        guard transaction.type != AppStoreTransaction.autoRenewable else { return nil }
        guard delivery == .delivered else { return preference == .grantProrated ? nil : 0 }
        guard let share else { return nil }
        let full = ConsumptionInformation.fullConsumption
        guard preference == .grantProrated else { return min(max(share, 0), full) }
        return min(max(share, 1), full - 1)
    }

    /// `part / whole` in milliunits, rounded down, at most all of it; exact for any counts.
    public static func share(_ part: Int64, of whole: Int64) -> Int64 {
        let full = ConsumptionInformation.fullConsumption
        guard whole > 0 else { return part > 0 ? full : 0 }
        guard part < whole else { return full }
        guard part > 0 else { return 0 }
        let product = part.multipliedFullWidth(by: full)
        return whole.dividingFullWidth(product).quotient
    }
}

/// What billingd knows of a request when it answers.
public struct ConsumptionFacts: Sendable, Equatable {
    /// The transaction as the ledger holds it.
    public struct Transaction: Sendable, Equatable {
        /// Apple's `type`: `Auto-Renewable Subscription`, `Non-Renewing Subscription`, `Consumable`, `Non-Consumable`.
        public var type: String?
        /// Unix ms.
        public var purchaseDate: Int64?
        public var expiresDate: Int64?
        public var revocationDate: Int64?
        /// The period the catalog gives the product (how long a non-renewing subscription lasts).
        public var period: AppStorePeriod?

        public init(
            type: String?, purchaseDate: Int64? = nil, expiresDate: Int64? = nil, revocationDate: Int64? = nil, period: AppStorePeriod? = nil
        ) {
            self.type = type
            self.purchaseDate = purchaseDate
            self.expiresDate = expiresDate
            self.revocationDate = revocationDate
            self.period = period
        }
    }

    /// The use of the product's `consumption_meter` during the purchase.
    public struct Usage: Sendable, Equatable {
        public var meter: String
        /// The meter's total from the purchase to its expiry (or to now, for a purchase without one).
        public var used: Int64
        /// The limit the product's tier gives the meter, above 0.
        public var limit: Int64

        public init(meter: String, used: Int64, limit: Int64) {
            self.meter = meter
            self.used = used
            self.limit = limit
        }

        /// The share of the limit used, in milliunits: at most all of it.
        public var share: Int64 { ConsumptionAnswerPolicy.share(used, of: limit) }
    }

    /// The notification's `signedDate`, Unix ms: the window runs from it.
    public var requestedAt: Int64
    /// Whether the purchase's owner has consented to share consumption data with Apple; false
    /// when they withdrew consent, never gave it, or billingd knows no owner.
    public var consented: Bool
    /// Nil when the ledger does not hold the transaction.
    public var transaction: Transaction?
    public var delivery: ConsumptionDeliveryStatus
    /// The catalog's `app_store.sample_content_provided` for the product's tier.
    public var sampleContentProvided: Bool
    /// Nil when the catalog names no `consumption_meter` for the product, or its tier's limit
    /// for it is no number above 0 (unlimited says nothing of a share).
    public var usage: Usage?

    public init(
        requestedAt: Int64, consented: Bool, transaction: Transaction?, delivery: ConsumptionDeliveryStatus, sampleContentProvided: Bool,
        usage: Usage? = nil
    ) {
        self.requestedAt = requestedAt
        self.consented = consented
        self.transaction = transaction
        self.delivery = delivery
        self.sampleContentProvided = sampleContentProvided
        self.usage = usage
    }
}

/// What ``ConsumptionAnswerPolicy`` decides.
public enum ConsumptionDecision: Sendable, Equatable {
    /// Send this body.
    case send(ConsumptionInformation)
    /// The owner has not consented: send nothing (Apple refuses `customerConsented: false`).
    case noConsent
    /// Apple's 12 hours are over: send nothing.
    case expired
}

/// The `deliveryStatus` the ledger supports. billingd delivers access, so it can tell only of
/// products the plan catalog maps to a tier: for those it answers `UNDELIVERED_OTHER` when the
/// user's entitlement history (the access each change of the ledger left them with) shows that
/// this purchase never entitled them, and `DELIVERED` otherwise. A product the catalog does not
/// map (a consumable the app hands out itself, say) is `DELIVERED`: billingd has no record that
/// says otherwise, and neither has it when it kept no history of the user at all.
public enum ConsumptionDelivery {
    /// - Parameters:
    ///   - productHasTier: the catalog maps the purchase's product to a tier.
    ///   - historyRecords: how many entitlement records the ledger keeps of the user.
    ///   - entitledThroughPurchase: one of them shows the user entitled through this purchase
    ///     (its original transaction).
    public static func status(productHasTier: Bool, historyRecords: Int, entitledThroughPurchase: Bool) -> ConsumptionDeliveryStatus {
        guard productHasTier, historyRecords > 0, !entitledThroughPurchase else { return .delivered }
        return .undeliveredOther
    }
}
