import BillingCore
import BillingSamples

/// All of the fake's state: subscriptions and purchases with their transactions, the notification
/// history, recorded requests, armed faults and the notification delivery queue.
///
/// Every change runs as one synchronous step on this actor, and every step first catches up with
/// the clock (``catchUp()``), so that nothing ever sees a subscription that should have renewed.
actor FakeAppStore {
    let clock: AppStoreFake.Clock
    let bundleID: String
    let appAppleID: Int64?
    let environment: AppStoreEnvironment
    let signer: PayloadSigner
    let timing: AppStoreFake.RetryTiming
    var products: [String: AppStoreFake.Product]
    var ids: IdentifierGenerator

    var subscriptions: [String: SubscriptionRecord] = [:]
    var transactions: [String: TransactionRecord] = [:]
    /// Each Apple account's transaction ids, oldest first.
    var customerTransactions: [String: [String]] = [:]
    /// Each order id's transaction ids.
    var orders: [String: [String]] = [:]
    /// The notification history, oldest first by `signedDate`.
    var notifications: [NotificationRecord] = []
    /// Where each notification is in ``notifications``.
    var notificationPositions: [String: Int] = [:]
    /// Test notification tokens and the notification each sent.
    var testNotifications: [String: String] = [:]
    var schedule = RenewalSchedule()
    /// The last value of the change counter behind history revisions.
    var revisionCounter: UInt64 = 0
    /// Set while seeding: notifications are recorded as delivered in the past, not sent.
    var isSeeding = false
    /// Notifications made while seeding, put in date order once at the end.
    var seededNotifications: [NotificationRecord] = []

    /// Requests kept for introspection, oldest first; nil when recording is off.
    var recorded: [AppStoreFake.RecordedRequest]?
    static let recordedLimit = 200_000
    var faults: [ArmedFault] = []
    /// Send Consumption Information calls answered 202, oldest first.
    var consumptionAnswers: [AppStoreFake.ConsumptionAnswer] = []
    var refusedTokens: [AppStoreFake.TokenRefusal] = []
    var acceptedTokens = 0

    var notificationURL: String?
    var deliveryPolicy = AppStoreFake.DeliveryPolicy()
    /// Notifications waiting to be sent, oldest first.
    var deliveryQueue: [String] = []
    var deliveriesInFlight = 0
    /// Wakes the sender when notifications are queued or the policy changes.
    nonisolated let deliveryWakeups: AsyncStream<Void>
    let wakeDelivery: AsyncStream<Void>.Continuation

    init(configuration: AppStoreFake.Configuration, pki: AppStoreTestPKI) {
        clock = configuration.clock
        bundleID = configuration.bundleID
        appAppleID = configuration.appAppleID
        environment = configuration.environment
        signer = PayloadSigner(pki: pki)
        timing = configuration.retryTiming ?? .default(for: configuration.environment)
        products = Dictionary(configuration.products.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last })
        ids = IdentifierGenerator(environment: configuration.environment, seed: configuration.seed, offset: configuration.idOffset)
        notificationURL = configuration.notificationURL
        recorded = configuration.recordsRequests ? [] : nil
        (deliveryWakeups, wakeDelivery) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    /// The product `id`, or a monthly subscription when the catalog does not name it.
    func catalogProduct(_ id: String) -> AppStoreFake.Product {
        products[id] ?? .monthly(id)
    }

    func nextRevision() -> UInt64 {
        revisionCounter += 1
        return revisionCounter
    }

    // MARK: - Transactions

    /// Stores a new transaction (under `transactionID`, else a new id) and indexes it by account and order.
    @discardableResult
    func addTransaction(
        _ transactionID: String? = nil, originalTransactionID: String?, customer: String, product: AppStoreFake.Product, purchaseDate: Int64,
        originalPurchaseDate: Int64?, expiresDate: Int64?, appAccountToken: String?, reason: String, offerType: Int? = nil
    ) -> TransactionRecord {
        let transactionID = transactionID ?? ids.transactionID()
        let isSubscription = product.period != nil
        let record = TransactionRecord(
            transactionID: transactionID, originalTransactionID: originalTransactionID ?? transactionID,
            customer: customer, webOrderLineItemID: isSubscription ? ids.webOrderLineItemID() : nil,
            productID: product.id, subscriptionGroupID: product.groupID, type: product.kind.transactionType,
            purchaseDate: purchaseDate, originalPurchaseDate: originalPurchaseDate ?? purchaseDate,
            expiresDate: expiresDate, appAccountToken: appAccountToken, reason: reason, orderID: ids.orderID(),
            price: product.price, currency: product.currency, offerType: offerType, revision: nextRevision())
        transactions[transactionID] = record
        customerTransactions[customer, default: []].append(transactionID)
        orders[record.orderID, default: []].append(transactionID)
        return record
    }

    // MARK: - Signed data

    func transactionPayload(_ record: TransactionRecord, signedDate: Int64) -> TransactionPayload {
        TransactionPayload(
            transactionId: record.transactionID, originalTransactionId: record.originalTransactionID,
            webOrderLineItemId: record.webOrderLineItemID, bundleId: bundleID, productId: record.productID,
            subscriptionGroupIdentifier: record.subscriptionGroupID, purchaseDate: record.purchaseDate,
            originalPurchaseDate: record.originalPurchaseDate, expiresDate: record.expiresDate, quantity: 1,
            type: record.type, appAccountToken: record.appAccountToken, inAppOwnershipType: "PURCHASED",
            signedDate: signedDate, environment: environment.rawValue, transactionReason: record.reason,
            storefront: "USA", storefrontId: "143441", price: record.price, currency: record.currency,
            offerType: record.offerType, revocationDate: record.revocationDate, revocationReason: record.revocationReason)
    }

    func renewalInfoPayload(_ subscription: SubscriptionRecord, signedDate: Int64) -> RenewalInfoPayload {
        let latest = transactions[subscription.latestTransactionID]
        let renewing = subscription.phase != .expired && subscription.phase != .revoked
        let inRetry =
            switch subscription.phase {
            case .gracePeriod, .billingRetry: true
            default: false
            }
        let renewalProduct = catalogProduct(subscription.autoRenewProductID)
        return RenewalInfoPayload(
            originalTransactionId: subscription.originalTransactionID,
            autoRenewProductId: subscription.autoRenewProductID, productId: subscription.productID,
            autoRenewStatus: subscription.autoRenew ? 1 : 0, expirationIntent: subscription.expirationIntent,
            gracePeriodExpiresDate: subscription.gracePeriodExpiresDate, isInBillingRetryPeriod: inRetry,
            signedDate: signedDate, environment: environment.rawValue,
            recentSubscriptionStartDate: subscription.recentStartDate,
            renewalDate: renewing ? latest?.expiresDate : nil, appAccountToken: subscription.appAccountToken,
            renewalPrice: renewalProduct.price, currency: renewalProduct.currency)
    }

    /// A transaction's JWS, signed now.
    func signedTransaction(_ record: TransactionRecord) -> String {
        signer.sign(transactionPayload(record, signedDate: clock.now))
    }

    /// A subscription's renewal info JWS, signed now.
    func signedRenewalInfo(_ subscription: SubscriptionRecord) -> String {
        signer.sign(renewalInfoPayload(subscription, signedDate: clock.now))
    }

    /// The `signedPayload` of the notification at `position`, signed on first use.
    func signedPayload(at position: Int) -> String {
        if let signed = notifications[position].signedPayload { return signed }
        let signed = signer.sign(
            notifications[position], bundleID: bundleID, appAppleID: appAppleID, environment: environment)
        notifications[position].signedPayload = signed
        return signed
    }

    // MARK: - Notifications

    /// Records a notification about `transaction` (and `subscription`, if any) at `date`, and
    /// queues it for delivery; returns its UUID.
    @discardableResult
    func notify(
        _ type: String, subtype: String? = nil, transaction: TransactionRecord?, subscription: SubscriptionRecord?,
        at date: Int64, consumptionRequestReason: String? = nil
    ) -> String {
        let record = NotificationRecord(
            uuid: ids.uuid(), type: type, subtype: subtype, signedDate: date,
            customer: transaction?.customer ?? subscription?.customer,
            transaction: transaction.map { transactionPayload($0, signedDate: date) },
            renewalInfo: subscription.map { renewalInfoPayload($0, signedDate: date) },
            status: subscription?.phase.status.rawValue, consumptionRequestReason: consumptionRequestReason)
        append(record)
        return record.uuid
    }

    /// Adds to the history in date order (a purchase back-dated with `at:` goes before later ones),
    /// and queues it for delivery.
    func append(_ record: NotificationRecord) {
        if isSeeding {
            var record = record
            record.sendAttempts = [.init(attemptDate: record.signedDate, result: .success, httpStatus: 200)]
            seededNotifications.append(record)
            return
        }
        if let last = notifications.last, last.signedDate > record.signedDate {
            let position = notifications.partitioningIndex { $0.signedDate > record.signedDate }
            notifications.insert(record, at: position)
            for index in position..<notifications.count { notificationPositions[notifications[index].uuid] = index }
        } else {
            notificationPositions[record.uuid] = notifications.count
            notifications.append(record)
        }
        enqueueDelivery(record)
    }

    /// Merges what seeding made into the history in one sort, not one insertion each.
    func flushSeededNotifications() {
        guard !seededNotifications.isEmpty else { return }
        let merged = (notifications + seededNotifications).enumerated()
            .sorted { ($0.element.signedDate, $0.offset) < ($1.element.signedDate, $1.offset) }
            .map(\.element)
        notifications = merged
        seededNotifications = []
        notificationPositions = Dictionary(
            uniqueKeysWithValues: notifications.enumerated().map { ($0.element.uuid, $0.offset) })
    }

    // MARK: - Introspection and faults

    /// Records a request with the verdict on its bearer token, and returns the fault it meets, if
    /// any (which then fires one time less). A request that meets a fault has its token neither
    /// counted nor judged: the fault answers first, as a gateway's would.
    func receive(
        _ request: AppStoreFake.RecordedRequest, refusal: AppStoreFake.TokenRefusal?
    ) -> AppStoreFake.Fault? {
        var request = request
        var fault: AppStoreFake.Fault?
        if let index = faults.firstIndex(where: { $0.matcher.matches(method: request.method, path: request.path) }) {
            fault = faults[index].fault
            faults[index].remaining -= 1
            if faults[index].remaining <= 0 { faults.remove(at: index) }
            request.fault = fault?.description
        } else if let refusal {
            refusedTokens.append(refusal)
            request.tokenRefusal = refusal
        } else {
            acceptedTokens += 1
        }
        if recorded != nil {
            recorded!.append(request)
            if recorded!.count > Self.recordedLimit + Self.recordedLimit / 10 {
                recorded!.removeFirst(recorded!.count - Self.recordedLimit)
            }
        }
        return fault
    }

    func arm(_ fault: AppStoreFake.Fault, times: Int, matching matcher: AppStoreFake.RequestMatcher) {
        faults.append(ArmedFault(fault: fault, matcher: matcher, remaining: times))
    }

    func clearFaults() { faults.removeAll() }

    func resetRequests() {
        if recorded != nil { recorded = [] }
        refusedTokens = []
        acceptedTokens = 0
    }

    /// Runs `body` on the store's executor, for the façade's multi-step helpers.
    @discardableResult
    func run<Result: Sendable, Failure: Error>(
        _ body: @Sendable (isolated FakeAppStore) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(self)
    }
}

extension Array {
    /// The first index whose element satisfies `belongs`, for an array where those come last.
    func partitioningIndex(where belongs: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if belongs(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
