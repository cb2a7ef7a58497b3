import APITransport
import BillingCore
import Foundation

extension AppStoreClient {
    // MARK: - Transactions and subscriptions

    /// Get All Subscription Statuses: the latest transaction and renewal info of every
    /// subscription in the customer's purchase family, found from any of its transaction ids.
    public func subscriptionStatuses(transactionID: String, priority: RequestPriority = .interactive) async throws(AppStoreAPIError)
        -> [AppStoreLastTransaction]
    {
        let route = "/inApps/v1/subscriptions/{transactionId}"
        let id = try Self.transactionSegment(transactionID, route: route)
        let body = try await send(.get, path: "/inApps/v1/subscriptions/\(id)", route: route, priority: priority)
        let answer = try decode(StatusResponse.self, body, route: route)
        var result: [AppStoreLastTransaction] = []
        for group in answer.data ?? [] {
            for last in group.lastTransactions ?? [] {
                guard let signedTransaction = last.signedTransactionInfo else { continue }
                let transaction = try await verifiedTransaction(signedTransaction, route: route)
                let renewal: AppStoreSignedRenewalInfo? =
                    if let signedRenewal = last.signedRenewalInfo { try await verifiedRenewalInfo(signedRenewal, route: route) } else { nil }
                result.append(AppStoreLastTransaction(
                    originalTransactionID: last.originalTransactionId ?? transaction.transaction.originalTransactionID,
                    status: last.status ?? 0, transaction: transaction, renewalInfo: renewal))
            }
        }
        return result
    }

    /// Get Transaction History (v2), one page in ascending order from `revision`.
    public func transactionHistory(
        transactionID: String, revision: String? = nil, priority: RequestPriority = .interactive
    ) async throws(AppStoreAPIError) -> AppStoreTransactionPage {
        let route = "/inApps/v2/history/{transactionId}"
        let id = try Self.transactionSegment(transactionID, route: route)
        var query = "sort=ASCENDING"
        if let revision { query += "&revision=" + Self.queryValue(revision) }
        let body = try await send(.get, path: "/inApps/v2/history/\(id)", route: route, query: query, priority: priority)
        return try await page(decode(TransactionsResponse.self, body, route: route), route: route)
    }

    /// Every transaction of the purchase `transactionID` belongs to: each period, upgrade,
    /// downgrade and refund, walking every page.
    public func completeTransactionHistory(transactionID: String, priority: RequestPriority = .interactive)
        async throws(AppStoreAPIError) -> [AppStoreSignedTransaction]
    {
        var all: [AppStoreSignedTransaction] = []
        var revision: String?
        repeat {
            let page = try await transactionHistory(transactionID: transactionID, revision: revision, priority: priority)
            all += page.transactions
            guard page.hasMore, let next = page.revision, next != revision else { break }
            revision = next
        } while true
        return all
    }

    /// Get Transaction Info: one transaction by its id.
    public func transactionInfo(transactionID: String, priority: RequestPriority = .interactive) async throws(AppStoreAPIError)
        -> AppStoreSignedTransaction
    {
        let route = "/inApps/v1/transactions/{transactionId}"
        let id = try Self.transactionSegment(transactionID, route: route)
        let body = try await send(.get, path: "/inApps/v1/transactions/\(id)", route: route, priority: priority)
        guard let jws = try decode(TransactionInfoResponse.self, body, route: route).signedTransactionInfo else {
            throw AppStoreAPIError(kind: .decoding, message: "the answer has no signedTransactionInfo", route: route)
        }
        return try await verifiedTransaction(jws, route: route)
    }

    /// Get Refund History, one page from `revision`.
    public func refundHistory(transactionID: String, revision: String? = nil, priority: RequestPriority = .interactive)
        async throws(AppStoreAPIError) -> AppStoreTransactionPage
    {
        let route = "/inApps/v2/refund/lookup/{transactionId}"
        let id = try Self.transactionSegment(transactionID, route: route)
        let query = revision.map { "revision=" + Self.queryValue($0) } ?? ""
        let body = try await send(.get, path: "/inApps/v2/refund/lookup/\(id)", route: route, query: query, priority: priority)
        return try await page(decode(TransactionsResponse.self, body, route: route), route: route)
    }

    /// Look Up Order ID: the transactions of the order id on the customer's e-mail receipt.
    public func lookUpOrder(orderID: String, priority: RequestPriority = .interactive) async throws(AppStoreAPIError) -> AppStoreOrderLookup {
        let route = "/inApps/v1/lookup/{orderId}"
        let id = try Self.segment(orderID, route: route)
        let body = try await send(.get, path: "/inApps/v1/lookup/\(id)", route: route, priority: priority)
        let answer = try decode(OrderLookupResponse.self, body, route: route)
        var transactions: [AppStoreSignedTransaction] = []
        for jws in answer.signedTransactions ?? [] {
            transactions.append(try await verifiedTransaction(jws, route: route))
        }
        return AppStoreOrderLookup(isValid: answer.status == 0, transactions: transactions)
    }

    // MARK: - Refund requests

    /// Send Consumption Information (v2): billingd's answer to a `CONSUMPTION_REQUEST` about
    /// `transactionID`. Apple answers 202 with no body; the status is returned. Retried on
    /// network errors, 429 and 5xx like every call; a 400 names the member Apple refused
    /// (`errorCode` 4000035 customerConsented, 4000036 deliveryStatus, 4000041
    /// sampleContentProvided, 4000044 refundPreference, 4000209 a percentage for an
    /// auto-renewable subscription).
    @discardableResult
    public func sendConsumptionInformation(
        transactionID: String, body: ConsumptionInformation, priority: RequestPriority = .interactive
    ) async throws(AppStoreAPIError) -> Int {
        let route = "/inApps/v2/transactions/consumption/{transactionId}"
        let id = try Self.transactionSegment(transactionID, route: route)
        return try await exchange(
            .put, path: "/inApps/v2/transactions/consumption/\(id)", route: route, json: body.json(), priority: priority
        ).status
    }

    // MARK: - Notifications

    /// Get Notification History, one page: notifications Apple sent (or tried to) between the
    /// two dates, Unix milliseconds. Apple keeps 180 days.
    public func notificationHistory(
        startDate: Int64, endDate: Int64, paginationToken: String? = nil, priority: RequestPriority = .bulk
    ) async throws(AppStoreAPIError) -> AppStoreNotificationPage {
        let route = "/inApps/v1/notifications/history"
        let request = NotificationHistoryRequest(startDate: startDate, endDate: endDate)
        let json = (try? JSONEncoder().encode(request)).map(Array.init) ?? []
        let query = paginationToken.map { "paginationToken=" + Self.queryValue($0) } ?? ""
        let body = try await send(.post, path: route, route: route, query: query, json: json, priority: priority)
        let answer = try decode(NotificationHistoryResponse.self, body, route: route)
        var notifications: [AppStoreHistoricalNotification] = []
        for item in answer.notificationHistory ?? [] {
            guard let signedPayload = item.signedPayload else { continue }
            notifications.append(try await verifiedNotification(signedPayload, sendAttempts: item.sendAttempts ?? [], route: route))
        }
        return AppStoreNotificationPage(notifications: notifications, paginationToken: answer.paginationToken, hasMore: answer.hasMore ?? false)
    }

    /// Request a Test Notification: Apple sends a `TEST` notification to the server URL; the
    /// token asks how that went.
    public func requestTestNotification() async throws(AppStoreAPIError) -> String {
        let route = "/inApps/v1/notifications/test"
        let body = try await send(.post, path: route, route: route, priority: .interactive)
        guard let token = try decode(TestNotificationResponse.self, body, route: route).testNotificationToken else {
            throw AppStoreAPIError(kind: .decoding, message: "the answer has no testNotificationToken", route: route)
        }
        return token
    }

    /// Get Test Notification Status: the test notification and Apple's attempts to deliver it.
    public func testNotificationStatus(token: String) async throws(AppStoreAPIError) -> AppStoreHistoricalNotification {
        let route = "/inApps/v1/notifications/test/{testNotificationToken}"
        let id = try Self.segment(token, route: route)
        let body = try await send(.get, path: "/inApps/v1/notifications/test/\(id)", route: route, priority: .interactive)
        let item = try decode(NotificationHistoryItem.self, body, route: route)
        guard let signedPayload = item.signedPayload else {
            throw AppStoreAPIError(kind: .decoding, message: "the answer has no signedPayload", route: route)
        }
        return try await verifiedNotification(signedPayload, sendAttempts: item.sendAttempts ?? [], route: route)
    }

    // MARK: - Verification

    func verifiedTransaction(_ jws: String, route: String) async throws(AppStoreAPIError) -> AppStoreSignedTransaction {
        do {
            let verified = try await verifier.verifyTransaction(jws)
            try checkEnvironment(verified.environment, route: route)
            return AppStoreSignedTransaction(jws: jws, transaction: try AppStoreTransaction(json: verified.payload))
        } catch let error as AppStoreAPIError {
            throw error
        } catch {
            throw AppStoreAPIError(kind: .verification, message: "a signed transaction did not verify: \(error)", route: route)
        }
    }

    func verifiedRenewalInfo(_ jws: String, route: String) async throws(AppStoreAPIError) -> AppStoreSignedRenewalInfo {
        do {
            let verified = try await verifier.verifyRenewalInfo(jws)
            try checkEnvironment(verified.environment, route: route)
            return AppStoreSignedRenewalInfo(jws: jws, renewalInfo: try AppStoreRenewalInfo(json: verified.payload))
        } catch let error as AppStoreAPIError {
            throw error
        } catch {
            throw AppStoreAPIError(kind: .verification, message: "signed renewal info did not verify: \(error)", route: route)
        }
    }

    func verifiedNotification(
        _ signedPayload: String, sendAttempts: [AppStoreHistoricalNotification.SendAttempt], route: String
    ) async throws(AppStoreAPIError) -> AppStoreHistoricalNotification {
        do {
            let verified = try await verifier.verifyNotification(signedPayload)
            try checkEnvironment(verified.environment, route: route)
            let notification = try AppStoreNotification(
                json: verified.payload, transaction: verified.transaction?.payload, renewalInfo: verified.renewalInfo?.payload)
            return AppStoreHistoricalNotification(
                signedPayload: signedPayload, verified: verified, notification: notification, sendAttempts: sendAttempts)
        } catch let error as AppStoreAPIError {
            throw error
        } catch {
            throw AppStoreAPIError(kind: .verification, message: "a notification did not verify: \(error)", route: route)
        }
    }

    /// An answer signed for another environment than the one asked is refused: Sandbox and
    /// Production never mix.
    private func checkEnvironment(_ environment: AppStoreEnvironment, route: String) throws(AppStoreAPIError) {
        guard environment == configuration.environment else {
            throw AppStoreAPIError(
                kind: .verification, message: "an answer from the \(configuration.environment) API is signed for \(environment)", route: route)
        }
    }

    private func page(_ answer: TransactionsResponse, route: String) async throws(AppStoreAPIError) -> AppStoreTransactionPage {
        var transactions: [AppStoreSignedTransaction] = []
        for jws in answer.signedTransactions ?? [] {
            transactions.append(try await verifiedTransaction(jws, route: route))
        }
        return AppStoreTransactionPage(transactions: transactions, revision: answer.revision, hasMore: answer.hasMore ?? false)
    }

    static func queryValue(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }

    // MARK: - Apple's shapes

    private struct StatusResponse: Decodable {
        struct Group: Decodable {
            let subscriptionGroupIdentifier: String?
            let lastTransactions: [Last]?
        }
        struct Last: Decodable {
            let originalTransactionId: String?
            let status: Int?
            let signedTransactionInfo: String?
            let signedRenewalInfo: String?
        }
        let data: [Group]?
    }

    private struct TransactionsResponse: Decodable {
        let signedTransactions: [String]?
        let revision: String?
        let hasMore: Bool?
    }

    private struct TransactionInfoResponse: Decodable {
        let signedTransactionInfo: String?
    }

    private struct OrderLookupResponse: Decodable {
        let status: Int?
        let signedTransactions: [String]?
    }

    private struct NotificationHistoryRequest: Encodable {
        let startDate: Int64
        let endDate: Int64
    }

    private struct NotificationHistoryItem: Decodable {
        let signedPayload: String?
        let sendAttempts: [AppStoreHistoricalNotification.SendAttempt]?
    }

    private struct NotificationHistoryResponse: Decodable {
        let notificationHistory: [NotificationHistoryItem]?
        let paginationToken: String?
        let hasMore: Bool?
    }

    private struct TestNotificationResponse: Decodable {
        let testNotificationToken: String?
    }
}
