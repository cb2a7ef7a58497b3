import BillingCore

/// The App Store Server API's endpoints as operations on the state, each answering Apple's
/// response body or throwing Apple's error.
extension FakeAppStore {
    typealias APIError = AppStoreFake.APIError

    /// Apple's page size for transaction, refund and notification history.
    static let pageSize = 20

    /// The transaction `id`; `4000006` when it is not an Apple transaction id, `4040010` when unknown.
    func existingTransaction(_ id: String) throws(APIError) -> TransactionRecord {
        guard !id.isEmpty, id.count <= 20, id.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw .invalidTransactionID
        }
        guard let transaction = transactions[id] else { throw .transactionIDNotFound }
        return transaction
    }

    // MARK: - Get All Subscription Statuses

    /// Every auto-renewable subscription of the account that made transaction `id`, grouped by
    /// subscription group, each with its latest transaction and renewal info.
    func allSubscriptionStatuses(_ id: String, statuses filter: Set<Int>) throws(APIError) -> StatusResponse {
        catchUp()
        let transaction = try existingTransaction(id)
        var groups: [String: [StatusResponse.LastTransaction]] = [:]
        var groupOrder: [String] = []
        var seen: Set<String> = []
        for transactionID in customerTransactions[transaction.customer] ?? [] {
            guard let original = transactions[transactionID]?.originalTransactionID, seen.insert(original).inserted,
                let subscription = subscriptions[original], let latest = latest(of: subscription)
            else { continue }
            let status = subscription.phase.status.rawValue
            guard filter.isEmpty || filter.contains(status) else { continue }
            if groups[subscription.groupID] == nil { groupOrder.append(subscription.groupID) }
            groups[subscription.groupID, default: []].append(
                .init(
                    originalTransactionId: original, status: status, signedTransactionInfo: signedTransaction(latest),
                    signedRenewalInfo: signedRenewalInfo(subscription)))
        }
        return StatusResponse(
            environment: environment.rawValue, bundleId: bundleID, appAppleId: appAppleID,
            data: groupOrder.map { .init(subscriptionGroupIdentifier: $0, lastTransactions: groups[$0] ?? []) })
    }

    // MARK: - Get Transaction Info

    func transactionInfo(_ id: String) throws(APIError) -> TransactionInfoResponse {
        catchUp()
        return TransactionInfoResponse(signedTransactionInfo: signedTransaction(try existingTransaction(id)))
    }

    // MARK: - Get Transaction History (v2)

    /// The query of Get Transaction History, as read from the URL.
    struct HistoryQuery: Sendable {
        var revision: String?
        var sort: String?
        var startDate: Int64?
        var endDate: Int64?
        var productIDs: Set<String> = []
        var productTypes: Set<String> = []
        var subscriptionGroupIDs: Set<String> = []
        var revoked: String?
    }

    /// The account's transactions 20 at a time, in the order they last changed; `revision`
    /// pages on, and from the last page tells later calls where new changes begin.
    func transactionHistory(_ id: String, _ query: HistoryQuery) throws(APIError) -> HistoryResponse {
        catchUp()
        let transaction = try existingTransaction(id)
        let ascending: Bool
        switch query.sort {
        case nil, "ASCENDING": ascending = true
        case "DESCENDING": ascending = false
        default: throw .invalidSort
        }
        let revoked: Bool?
        switch query.revoked {
        case nil: revoked = nil
        case "true": revoked = true
        case "false": revoked = false
        default: throw .invalidRevoked
        }
        let types = ["AUTO_RENEWABLE": "Auto-Renewable Subscription", "NON_RENEWABLE": "Non-Renewing Subscription",
                     "CONSUMABLE": "Consumable", "NON_CONSUMABLE": "Non-Consumable"]
        var wantedTypes: Set<String> = []
        for type in query.productTypes {
            guard let name = types[type] else { throw .invalidProductType }
            wantedTypes.insert(name)
        }
        let cursor = try query.revision.map { (revision) throws(APIError) in
            try Self.decodeCursor(revision, kind: ascending ? "a" : "d")
        }

        let matching = (customerTransactions[transaction.customer] ?? []).compactMap { transactions[$0] }.filter { record in
            (query.productIDs.isEmpty || query.productIDs.contains(record.productID))
                && (wantedTypes.isEmpty || wantedTypes.contains(record.type))
                && (query.subscriptionGroupIDs.isEmpty
                    || record.subscriptionGroupID.map(query.subscriptionGroupIDs.contains) == true)
                && (revoked == nil || (record.revocationDate != nil) == revoked)
                && (query.startDate.map { record.purchaseDate >= $0 } ?? true)
                && (query.endDate.map { record.purchaseDate < $0 } ?? true)
                && (cursor.map { ascending ? record.revision > $0 : record.revision < $0 } ?? true)
        }
        let ordered = matching.sorted { ascending ? $0.revision < $1.revision : $0.revision > $1.revision }
        let page = ordered.prefix(Self.pageSize)
        let next = page.last?.revision ?? cursor ?? (ascending ? 0 : UInt64.max)
        return HistoryResponse(
            revision: Self.encodeCursor(next, kind: ascending ? "a" : "d"), hasMore: ordered.count > page.count,
            bundleId: bundleID, appAppleId: appAppleID, environment: environment.rawValue,
            signedTransactions: page.map { signedTransaction($0) })
    }

    // MARK: - Get Refund History (v2)

    /// The account's refunded transactions, oldest refund first, 20 at a time.
    func refundHistory(_ id: String, revision: String?) throws(APIError) -> RefundHistoryResponse {
        catchUp()
        let transaction = try existingTransaction(id)
        let cursor = try revision.map { (revision) throws(APIError) in try Self.decodeCursor(revision, kind: "r") }
        let refunded = (customerTransactions[transaction.customer] ?? []).compactMap { transactions[$0] }
            .filter { record in record.refundRevision.map { $0 > (cursor ?? 0) } ?? false }
            .sorted { ($0.refundRevision ?? 0) < ($1.refundRevision ?? 0) }
        let page = refunded.prefix(Self.pageSize)
        return RefundHistoryResponse(
            signedTransactions: page.map { signedTransaction($0) },
            revision: Self.encodeCursor(page.last?.refundRevision ?? cursor ?? 0, kind: "r"),
            hasMore: refunded.count > page.count)
    }

    // MARK: - Look Up Order ID

    /// The transactions of a receipt's order id; status 1 and none for an id the App Store does not know.
    func lookUpOrder(_ orderID: String) -> OrderLookupResponse {
        catchUp()
        guard let ids = orders[orderID], !ids.isEmpty else { return OrderLookupResponse(status: 1, signedTransactions: []) }
        return OrderLookupResponse(status: 0, signedTransactions: ids.compactMap { transactions[$0] }.map { signedTransaction($0) })
    }

    // MARK: - Get Notification History

    /// How far back Get Notification History reaches: 180 days in Production, 30 in Sandbox.
    var notificationRetention: Int64 { (environment == .production ? 180 : 30) * 86_400_000 }

    /// The notifications signed in `[startDate, endDate)` that pass the filters, 20 at a time.
    func notificationHistory(
        _ request: NotificationHistoryRequest, paginationToken: String?
    ) throws(APIError) -> NotificationHistoryResponse {
        catchUp()
        guard let start = request.startDate else { throw .invalidStartDate }
        guard let end = request.endDate else { throw .invalidEndDate }
        guard start < end else { throw .startDateAfterEndDate }
        guard start >= clock.now - notificationRetention else { throw .startDateTooFarInPast }
        if request.notificationType != nil || request.notificationSubtype != nil, request.transactionId != nil {
            throw .multipleFiltersSupplied
        }
        if let type = request.notificationType, !Self.notificationTypes.contains(type) {
            throw .invalidNotificationType
        }
        if let subtype = request.notificationSubtype, !Self.notificationSubtypes.contains(subtype) {
            throw .invalidNotificationType
        }
        let customer = try request.transactionId.map { (id) throws(APIError) in try existingTransaction(id).customer }
        let fingerprint = Self.fingerprint(request)
        var offset = 0
        if let paginationToken {
            guard let decoded = Self.decodePaginationToken(paginationToken), decoded.fingerprint == fingerprint else {
                throw .invalidPaginationToken
            }
            offset = decoded.offset
        }

        // The page alone, not every match in the window: a walk of N notifications costs N/20 pages,
        // and scanning the whole window for each made a walk quadratic in the history's length.
        let first = notifications.partitioningIndex { $0.signedDate >= start }
        let last = notifications.partitioningIndex { $0.signedDate >= end }
        var page: [Int] = []
        let hasMore: Bool
        if request.notificationType == nil, request.notificationSubtype == nil, customer == nil, request.onlyFailures != true {
            let from = min(first + offset, max(first, last))
            page = Array(from..<min(from + Self.pageSize, max(from, last)))
            hasMore = from + page.count < last
        } else {
            var skipped = 0
            var more = false
            for position in first..<max(first, last) {
                guard (request.notificationType.map { $0 == notifications[position].type } ?? true)
                    && (request.notificationSubtype.map { $0 == notifications[position].subtype } ?? true)
                    && (customer.map { $0 == notifications[position].customer } ?? true)
                    && (request.onlyFailures != true || !notifications[position].everDelivered)
                else { continue }
                if skipped < offset {
                    skipped += 1
                } else if page.count < Self.pageSize {
                    page.append(position)
                } else {
                    more = true
                    break
                }
            }
            hasMore = more
        }
        return NotificationHistoryResponse(
            notificationHistory: page.map { position in
                .init(
                    signedPayload: signedPayload(at: position),
                    sendAttempts: notifications[position].sendAttempts.map(SendAttemptItem.init))
            },
            hasMore: hasMore,
            paginationToken: hasMore ? Self.encodePaginationToken(offset: offset + page.count, fingerprint: fingerprint) : nil)
    }

    // MARK: - Test notifications

    /// Records a `TEST` notification, queues it for the notification URL, and returns its token.
    func sendTestNotification() throws(APIError) -> SendTestNotificationResponse {
        guard notificationURL != nil else { throw .serverNotificationURLNotFound }
        let now = clock.now
        let record = NotificationRecord(
            uuid: ids.uuid(), type: "TEST", subtype: nil, signedDate: now, customer: nil, transaction: nil,
            renewalInfo: nil, status: nil)
        append(record)
        let token = "\(record.uuid)_\(now)"
        testNotifications[token] = record.uuid
        return SendTestNotificationResponse(testNotificationToken: token)
    }

    /// The test notification and its send attempts so far.
    func testNotificationStatus(_ token: String) throws(APIError) -> CheckTestNotificationResponse {
        let parts = token.split(separator: "_")
        guard parts.count == 2, parts[0].count == 36, parts[1].allSatisfy(\.isNumber) else {
            throw .invalidTestNotificationToken
        }
        guard let uuid = testNotifications[token], let position = notificationPositions[uuid] else {
            throw .testNotificationNotFound
        }
        return CheckTestNotificationResponse(
            signedPayload: signedPayload(at: position),
            sendAttempts: notifications[position].sendAttempts.map(SendAttemptItem.init))
    }

    // MARK: - Paging tokens

    /// An opaque cursor: a kind letter (`a`scending, `d`escending, `r`efunds) and a change counter value.
    static func encodeCursor(_ revision: UInt64, kind: String) -> String {
        Base64URL.encode(Array("\(kind)|\(revision)".utf8))
    }

    static func decodeCursor(_ text: String, kind: String) throws(APIError) -> UInt64 {
        guard let bytes = Base64URL.decode(text) else { throw .invalidRequestRevision }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: "|")
        guard parts.count == 2, parts[0] == kind, let revision = UInt64(parts[1]) else { throw .invalidRequestRevision }
        return revision
    }

    static func encodePaginationToken(offset: Int, fingerprint: UInt64) -> String {
        Base64URL.encode(Array("n|\(offset)|\(fingerprint)".utf8))
    }

    static func decodePaginationToken(_ text: String) -> (offset: Int, fingerprint: UInt64)? {
        guard let bytes = Base64URL.decode(text) else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: "|")
        guard parts.count == 3, parts[0] == "n", let offset = Int(parts[1]), offset >= 0, let fingerprint = UInt64(parts[2])
        else { return nil }
        return (offset, fingerprint)
    }

    /// FNV-1a of the request's filters: a token is good only for the request that made it.
    static func fingerprint(_ request: NotificationHistoryRequest) -> UInt64 {
        let text = [
            request.startDate.map(String.init), request.endDate.map(String.init), request.notificationType,
            request.notificationSubtype, request.transactionId, request.onlyFailures.map { "\($0)" },
        ].map { $0 ?? "-" }.joined(separator: "|")
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        return hash
    }

    static let notificationTypes: Set<String> = [
        "CONSUMPTION_REQUEST", "DID_CHANGE_RENEWAL_PREF", "DID_CHANGE_RENEWAL_STATUS", "DID_FAIL_TO_RENEW", "DID_RENEW",
        "EXPIRED", "EXTERNAL_PURCHASE_TOKEN", "GRACE_PERIOD_EXPIRED", "METADATA_UPDATE", "MIGRATION", "OFFER_REDEEMED",
        "ONE_TIME_CHARGE", "PRICE_CHANGE", "PRICE_INCREASE", "REFUND", "REFUND_DECLINED", "REFUND_REVERSED",
        "RENEWAL_EXTENDED", "RENEWAL_EXTENSION", "RESCIND_CONSENT", "REVOKE", "SUBSCRIBED", "TEST",
    ]

    static let notificationSubtypes: Set<String> = [
        "ACCEPTED", "AUTO_RENEW_DISABLED", "AUTO_RENEW_ENABLED", "BILLING_RECOVERY", "BILLING_RETRY", "DOWNGRADE",
        "FAILURE", "GRACE_PERIOD", "INITIAL_BUY", "PENDING", "PRICE_INCREASE", "PRODUCT_NOT_FOR_SALE", "RESUBSCRIBE",
        "SUMMARY", "UNREPORTED", "UPGRADE", "VOLUNTARY",
    ]
}
