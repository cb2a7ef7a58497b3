import BillingCore
import Foundation

/// Refund requests: the fake sends `CONSUMPTION_REQUEST` for a transaction, and takes the
/// developer's answer (Send Consumption Information v2) under Apple's rules, refusing what Apple
/// refuses with its error, and keeping what it accepts.
extension AppStoreFake {
    /// An answer to a refund request the fake accepted (202), as received.
    public struct ConsumptionAnswer: Sendable, Hashable {
        /// The transaction of the path.
        public let transactionID: String
        public let customerConsented: Bool
        public let deliveryStatus: String
        public let sampleContentProvided: Bool
        public let refundPreference: String?
        public let consumptionPercentage: Int64?
        /// The body exactly as sent.
        public let body: [UInt8]
        /// The fake's clock when it arrived, Unix ms.
        public let receivedAt: Int64
    }

    /// Sends `CONSUMPTION_REQUEST` for `transactionID`, as Apple does when its customer asks for
    /// a refund (`reason`: Apple's `consumptionRequestReason`); returns the notification's UUID.
    @discardableResult
    public func requestConsumption(transactionID: String, reason: String = "UNINTENDED_PURCHASE") async throws(StateError) -> String {
        try await store.run { store throws(StateError) in try store.requestConsumption(transactionID, reason: reason) }
    }

    /// Every answer accepted, oldest first.
    public var consumptionAnswers: [ConsumptionAnswer] { get async { await store.consumptionAnswers } }
}

extension FakeAppStore {
    /// Records a `CONSUMPTION_REQUEST` about a transaction, with its subscription's renewal info
    /// for an auto-renewable one, and queues it for delivery.
    func requestConsumption(_ transactionID: String, reason: String?) throws(AppStoreFake.StateError) -> String {
        catchUp()
        guard let transaction = transactions[transactionID] else { throw .unknownTransaction(transactionID) }
        return notify(
            "CONSUMPTION_REQUEST", transaction: transaction, subscription: subscriptions[transaction.originalTransactionID], at: clock.now,
            consumptionRequestReason: reason)
    }

    /// The buyer's latest transaction of `productID` (a subscription's latest period, a one-time
    /// purchase), for `appstore trigger CONSUMPTION_REQUEST`.
    func latestTransaction(appAccountToken: String?, productID: String) -> TransactionRecord? {
        transactions.values
            .filter { $0.appAccountToken == appAccountToken && $0.productID == productID }
            .max { ($0.purchaseDate, $0.revision) < ($1.purchaseDate, $1.revision) }
    }

    // MARK: - Send Consumption Information (v2)

    /// `PUT /inApps/v2/transactions/consumption/{transactionId}`: checks the body as Apple does and
    /// keeps it; the route answers 202 with no body.
    func sendConsumptionInformation(_ id: String, body: [UInt8]) throws(APIError) {
        catchUp()
        let transaction = try existingTransaction(id)
        let answer = try Self.consumptionAnswer(body, transactionID: id, transactionType: transaction.type, now: clock.now)
        consumptionAnswers.append(answer)
    }

    /// One JSON value of the request, typed as sent: a boolean is not a number here, as at Apple.
    enum WireValue: Decodable {
        case null
        case bool(Bool)
        case integer(Int64)
        case number(Double)
        case string(String)
        case other

        init(from decoder: any Decoder) throws {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() {
                self = .null
            } else if let flag = try? single.decode(Bool.self) {
                self = .bool(flag)
            } else if let integer = try? single.decode(Int64.self) {
                self = .integer(integer)
            } else if let number = try? single.decode(Double.self) {
                self = .number(number)
            } else if let text = try? single.decode(String.self) {
                self = .string(text)
            } else {
                self = .other
            }
        }
    }

    static let deliveryStatuses: Set<String> = [
        "DELIVERED", "UNDELIVERED_QUALITY_ISSUE", "UNDELIVERED_WRONG_ITEM", "UNDELIVERED_SERVER_OUTAGE", "UNDELIVERED_OTHER",
    ]
    static let refundPreferences: Set<String> = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]

    /// Apple's checks of a `ConsumptionRequest`, in the order of its fields' documentation; the
    /// first that fails is the answer.
    static func consumptionAnswer(_ body: [UInt8], transactionID: String, transactionType: String, now: Int64) throws(APIError) -> AppStoreFake.ConsumptionAnswer {
        guard let members = try? JSONDecoder().decode([String: WireValue].self, from: Data(body)) else { throw .generalBadRequest }
        func present(_ name: String) -> WireValue? {
            switch members[name] {
            case nil, .null?: nil
            case let value?: value
            }
        }
        guard case .bool(true)? = present("customerConsented") else { throw .invalidCustomerConsented }
        guard case .string(let delivery)? = present("deliveryStatus"), deliveryStatuses.contains(delivery) else {
            throw .invalidDeliveryStatus
        }
        guard case .bool(let sample)? = present("sampleContentProvided") else { throw .invalidSampleContentProvided }
        var preference: String?
        if let value = present("refundPreference") {
            guard case .string(let text) = value, refundPreferences.contains(text) else { throw .invalidRefundPreference }
            preference = text
        }
        var percentage: Int64?
        if let value = present("consumptionPercentage") {
            guard transactionType != "Auto-Renewable Subscription" else { throw .consumptionPercentageAutoRenewableSubscription }
            guard case .integer(let number) = value, (0...100_000).contains(number) else { throw .consumptionPercentageOutOfRange }
            guard delivery == "DELIVERED" || number == 0 else { throw .undeliveredConsumptionPercentageNonZero }
            if preference == "GRANT_PRORATED", !(1..<100_000).contains(number) { throw .consumptionPercentageOutOfRange }
            percentage = number
        }
        return AppStoreFake.ConsumptionAnswer(
            transactionID: transactionID, customerConsented: true, deliveryStatus: delivery, sampleContentProvided: sample,
            refundPreference: preference, consumptionPercentage: percentage, body: body, receivedAt: now)
    }
}
