/// Which store a subscription is sold through, as the metrics name it.
public enum MetricsStore: String, Sendable, CaseIterable, Codable, Hashable {
    case stripe
    case appStore = "app_store"
}

/// What a subscription is at an instant, as the revenue metrics count it.
public enum SubscriptionState: Sendable, Equatable, Hashable {
    /// Paying: counts among the active subscriptions, and adds `monthly` minor units of
    /// `currency` (already rounded half-even) to MRR.
    case paying(currency: String, monthly: Int64)
    /// In a free trial.
    case trial
    /// Neither: not started, ended, unpaid, in billing retry outside grace, family-shared, …
    case inactive

    public var isPaying: Bool {
        if case .paying = self { return true }
        return false
    }
}

/// A stretch of time `[start, end)` (Unix seconds; `end` nil: still going) in one state.
public struct SubscriptionSpan: Sendable, Equatable {
    public var start: Int64
    public var end: Int64?
    public var state: SubscriptionState

    public init(start: Int64, end: Int64?, state: SubscriptionState) {
        self.start = start
        self.end = end
        self.state = state
    }

    public func contains(_ instant: Int64) -> Bool { start <= instant && end.map { instant < $0 } ?? true }
}

/// A free trial: when it started and ended, and whether (and when) the subscription then paid.
public struct TrialRecord: Sendable, Equatable {
    public var start: Int64
    /// When the trial ends or ended; nil when not known.
    public var end: Int64?
    /// When the subscription started paying after the trial; nil if it has not. A refund of the
    /// first paid period undoes the conversion: it is nil then too.
    public var convertedAt: Int64?

    public init(start: Int64, end: Int64?, convertedAt: Int64?) {
        self.start = start
        self.end = end
        self.convertedAt = convertedAt
    }
}

/// One subscription's history, the facts every revenue metric is computed from: a Stripe
/// subscription id or an App Store original transaction id, its plan, the spans of its states
/// in time order (not overlapping) and its trials. Built from the ledger's facts by
/// ``stripe(id:plan:snapshots:paidInvoices:)`` and ``appStore(id:plan:transactions:gracePeriodEnd:)``;
/// a late or out-of-order fact changes the history it is part of, and so the figures of the past.
public struct SubscriptionHistory: Sendable, Equatable {
    public var store: MetricsStore
    public var id: String
    /// The plan of the plan catalog, when the subscription's price or product maps to one.
    public var plan: String?
    public var spans: [SubscriptionSpan]
    public var trials: [TrialRecord]

    public init(store: MetricsStore, id: String, plan: String?, spans: [SubscriptionSpan], trials: [TrialRecord]) {
        self.store = store
        self.id = id
        self.plan = plan
        self.spans = spans
        self.trials = trials
    }

    /// The state at `instant`.
    public func state(at instant: Int64) -> SubscriptionState {
        spans.last { $0.contains(instant) }?.state ?? .inactive
    }

    /// Whether the subscription paid at some instant before `instant`.
    public func paid(before instant: Int64) -> Bool {
        spans.contains { $0.state.isPaying && $0.start < instant }
    }
}

// MARK: - Stripe

/// A snapshot of a Stripe subscription as an event (or a reconcile fetch) carried it: from
/// `version.eventCreated` on, the subscription was this, until the next snapshot.
public struct StripeSubscriptionSnapshot: Sendable, Equatable {
    public var version: SnapshotVersion
    public var status: SubscriptionStatus
    /// The subscription's currency and its monthly amount (exact); nil when no item counts.
    public var monthly: (currency: String, amount: ExactAmount)?
    public var currency: String?
    public var trialStart: Int64?
    public var trialEnd: Int64?

    public init(
        version: SnapshotVersion, status: SubscriptionStatus, monthly: (currency: String, amount: ExactAmount)?, currency: String?,
        trialStart: Int64?, trialEnd: Int64?
    ) {
        self.version = version
        self.status = status
        self.monthly = monthly
        self.currency = currency
        self.trialStart = trialStart
        self.trialEnd = trialEnd
    }

    /// The snapshot of `subscription` as carried at `version`, with its forever discounts.
    public init(_ subscription: Subscription, discounts: SubscriptionDiscounts, version: SnapshotVersion) {
        self.init(
            version: version, status: subscription.status, monthly: subscription.monthlyAmount(discounts: discounts),
            currency: subscription.currency, trialStart: subscription.trialStart, trialEnd: subscription.trialEnd)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.version == rhs.version && lhs.status == rhs.status && lhs.monthly?.currency == rhs.monthly?.currency
            && lhs.monthly?.amount == rhs.monthly?.amount && lhs.currency == rhs.currency && lhs.trialStart == rhs.trialStart
            && lhs.trialEnd == rhs.trialEnd
    }

    /// Whether `self` comes before `other` in the subscription's history: by the event's time,
    /// then the ledger's own evidence for same-second ties, then the event id, so that every
    /// delivery order gives one history.
    func precedes(_ other: StripeSubscriptionSnapshot) -> Bool {
        let mine = (version.eventCreated, version.terminal ? 1 : 0, version.transitionAt, version.statusRank, version.eventID)
        let theirs = (other.version.eventCreated, other.version.terminal ? 1 : 0, other.version.transitionAt, other.version.statusRank, other.version.eventID)
        return mine < theirs
    }

    var state: SubscriptionState {
        switch status {
        case .active, .pastDue:
            .paying(currency: (monthly?.currency ?? currency ?? "").lowercased(), monthly: monthly?.amount.roundedHalfEven ?? 0)
        case .trialing:
            .trial
        default:
            .inactive
        }
    }
}

extension SubscriptionHistory {
    /// A Stripe subscription's history from its snapshots, in any order and with duplicates.
    /// Paying while `active` or `past_due`; a trial while `trialing`. A deleted or terminal
    /// snapshot (canceled, incomplete_expired) ends the history: nothing later reopens it, as in
    /// the ledger. `paidInvoices` (paid time, whether refunded since) tell a conversion that a
    /// refund undid.
    public static func stripe(
        id: String, plan: String?, snapshots: [StripeSubscriptionSnapshot], paidInvoices: [(paidAt: Int64, refunded: Bool)] = []
    ) -> SubscriptionHistory {
        var ordered: [StripeSubscriptionSnapshot] = []
        for snapshot in snapshots.sorted(by: { $0.precedes($1) }) where ordered.last?.version.eventID != snapshot.version.eventID {
            ordered.append(snapshot)
            if snapshot.version.terminal || snapshot.version.deleted { break }
        }
        var spans: [SubscriptionSpan] = []
        for (index, snapshot) in ordered.enumerated() {
            let start = snapshot.version.eventCreated
            let end = index + 1 < ordered.count ? ordered[index + 1].version.eventCreated : nil
            if let end, end <= start { continue }
            let state = snapshot.version.deleted ? .inactive : snapshot.state
            if let last = spans.last, last.state == state, last.end == start {
                spans[spans.count - 1].end = end
            } else {
                spans.append(SubscriptionSpan(start: start, end: end, state: state))
            }
        }
        var trials: [TrialRecord] = []
        for snapshot in ordered where snapshot.status == .trialing {
            let start = snapshot.trialStart ?? snapshot.version.eventCreated
            if let index = trials.firstIndex(where: { $0.start == start }) {
                trials[index].end = snapshot.trialEnd ?? trials[index].end
            } else {
                trials.append(TrialRecord(start: start, end: snapshot.trialEnd, convertedAt: nil))
            }
        }
        for index in trials.indices {
            let trial = trials[index]
            guard let paying = spans.first(where: { $0.state.isPaying && $0.start >= trial.start }) else { continue }
            let firstPayment = paidInvoices.filter { $0.paidAt >= trial.start }.min { $0.paidAt < $1.paidAt }
            if firstPayment?.refunded != true { trials[index].convertedAt = paying.start }
        }
        return SubscriptionHistory(store: .stripe, id: id, plan: plan, spans: spans, trials: trials)
    }
}

// MARK: - App Store

/// One transaction of an App Store subscription, as the metrics read it. Times in Unix seconds.
public struct AppStoreTransactionFact: Sendable, Equatable {
    public var transactionID: String
    public var purchase: Int64
    public var expires: Int64
    /// Apple's price in milliunits of `currency` (9990 = 9.99).
    public var priceMilliunits: Int64
    public var currency: String?
    /// The product's period from the plan catalog, or else from the transaction's length.
    public var period: AppStorePeriod?
    /// A free trial: an introductory offer at price 0.
    public var isFreeTrial: Bool
    /// Family-shared: the family member did not pay.
    public var isFamilyShared: Bool
    /// When the transaction was revoked (refund, family sharing removed, upgrade); nil if it
    /// stands, or a reversal reinstated it.
    public var revokedAt: Int64?
    /// Revoked for a refund (Apple gave a revocation reason).
    public var refunded: Bool

    public init(
        transactionID: String, purchase: Int64, expires: Int64, priceMilliunits: Int64, currency: String?, period: AppStorePeriod?,
        isFreeTrial: Bool, isFamilyShared: Bool, revokedAt: Int64?, refunded: Bool
    ) {
        self.transactionID = transactionID
        self.purchase = purchase
        self.expires = expires
        self.priceMilliunits = priceMilliunits
        self.currency = currency
        self.period = period
        self.isFreeTrial = isFreeTrial
        self.isFamilyShared = isFamilyShared
        self.revokedAt = revokedAt
        self.refunded = refunded
    }

    /// The price in minor units of its currency, exactly: Apple's milliunits scaled to the
    /// currency's exponent (9990 USD is 999 cents, 480000 JPY 480 yen).
    public var price: ExactAmount {
        let exponent = Currency.exponent(of: currency ?? "usd")
        var scale: Int128 = 1
        for _ in 0..<exponent { scale *= 10 }
        return ExactAmount(Int128(priceMilliunits) * scale, over: 1000)
    }

    /// Whether the customer paid for it.
    public var isPaid: Bool { priceMilliunits > 0 && !isFamilyShared && !isFreeTrial }

    var state: SubscriptionState {
        if isFamilyShared { return .inactive }
        if isFreeTrial { return .trial }
        guard priceMilliunits > 0, let currency else { return .inactive }
        let period = period ?? AppStorePeriod.nearest(toSeconds: expires - purchase) ?? .oneMonth
        return .paying(currency: currency.lowercased(), monthly: price.scaled(by: MonthlyFactor(period)).roundedHalfEven)
    }

    /// When the transaction stops counting: its expiry, or its revocation if earlier.
    var coverageEnd: Int64 { min(expires, revokedAt ?? .max) }
}

extension SubscriptionHistory {
    /// An App Store subscription's history from its transactions, in any order: each covers
    /// `[purchaseDate, expiresDate)`, cut short by its revocation and by the next transaction
    /// (an upgrade takes over at its purchase). After the last paid transaction expires, the
    /// subscription still pays while in its billing grace period (`gracePeriodEnd`).
    public static func appStore(
        id: String, plan: String?, transactions: [AppStoreTransactionFact], gracePeriodEnd: Int64? = nil
    ) -> SubscriptionHistory {
        var seen = Set<String>()
        let ordered = transactions.sorted { ($0.purchase, $0.transactionID) < ($1.purchase, $1.transactionID) }
            .filter { seen.insert($0.transactionID).inserted }
        var spans: [SubscriptionSpan] = []
        for (index, transaction) in ordered.enumerated() {
            var end = transaction.coverageEnd
            if index + 1 < ordered.count { end = min(end, ordered[index + 1].purchase) }
            guard end > transaction.purchase else { continue }
            spans.append(SubscriptionSpan(start: transaction.purchase, end: end, state: transaction.state))
        }
        if let last = ordered.last, last.revokedAt == nil, last.isPaid, let gracePeriodEnd, gracePeriodEnd > last.expires {
            spans.append(SubscriptionSpan(start: last.expires, end: gracePeriodEnd, state: last.state))
        }
        var merged: [SubscriptionSpan] = []
        for span in spans {
            if let last = merged.last, last.state == span.state, last.end == span.start {
                merged[merged.count - 1].end = span.end
            } else {
                merged.append(span)
            }
        }
        var trials: [TrialRecord] = []
        for trial in ordered where trial.isFreeTrial && !trial.isFamilyShared {
            let firstPaid = ordered.first { $0.isPaid && $0.purchase >= trial.purchase }
            let converted = firstPaid.flatMap { $0.refunded ? nil : $0.purchase }
            trials.append(TrialRecord(start: trial.purchase, end: trial.coverageEnd, convertedAt: converted))
        }
        return SubscriptionHistory(store: .appStore, id: id, plan: plan, spans: merged, trials: trials)
    }
}
