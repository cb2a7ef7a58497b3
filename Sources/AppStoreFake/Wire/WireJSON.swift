import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// JSON in and out of the API: response bodies in Apple's member names, request bodies read leniently.
enum WireJSON {
    private static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return encoder
    }()

    /// A `200 application/json` (or `status`) answer with `body` encoded.
    static func response(_ body: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        // The bodies are plain structs of strings, numbers and arrays: encoding them cannot fail.
        let bytes = (try? encoder.encode(body)) ?? Data("{}".utf8)
        return Response(
            status: status, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

/// `StatusResponse` of Get All Subscription Statuses.
struct StatusResponse: Encodable {
    struct Group: Encodable {
        let subscriptionGroupIdentifier: String
        let lastTransactions: [LastTransaction]
    }

    struct LastTransaction: Encodable {
        let originalTransactionId: String
        let status: Int
        let signedTransactionInfo: String
        let signedRenewalInfo: String
    }

    let environment: String
    let bundleId: String
    let appAppleId: Int64?
    let data: [Group]
}

/// `HistoryResponse` of Get Transaction History.
struct HistoryResponse: Encodable {
    let revision: String
    let hasMore: Bool
    let bundleId: String
    let appAppleId: Int64?
    let environment: String
    let signedTransactions: [String]
}

/// `TransactionInfoResponse` of Get Transaction Info.
struct TransactionInfoResponse: Encodable {
    let signedTransactionInfo: String
}

/// `OrderLookupResponse`: status 0 valid, 1 invalid order id.
struct OrderLookupResponse: Encodable {
    let status: Int
    let signedTransactions: [String]
}

/// `RefundHistoryResponse` of Get Refund History.
struct RefundHistoryResponse: Encodable {
    let signedTransactions: [String]
    let revision: String
    let hasMore: Bool
}

/// `sendAttemptItem`.
struct SendAttemptItem: Encodable {
    let attemptDate: Int64
    let sendAttemptResult: String

    init(_ attempt: AppStoreFake.SendAttempt) {
        attemptDate = attempt.attemptDate
        sendAttemptResult = attempt.result.rawValue
    }
}

/// `NotificationHistoryResponse` of Get Notification History.
struct NotificationHistoryResponse: Encodable {
    struct Item: Encodable {
        let signedPayload: String
        let sendAttempts: [SendAttemptItem]
    }

    let notificationHistory: [Item]
    let hasMore: Bool
    let paginationToken: String?
}

/// `SendTestNotificationResponse`.
struct SendTestNotificationResponse: Encodable {
    let testNotificationToken: String
}

/// `CheckTestNotificationResponse` of Get Test Notification Status.
struct CheckTestNotificationResponse: Encodable {
    let signedPayload: String
    let sendAttempts: [SendAttemptItem]
}

/// `NotificationHistoryRequest`: the body of Get Notification History.
struct NotificationHistoryRequest: Decodable {
    let startDate: Int64?
    let endDate: Int64?
    let notificationType: String?
    let notificationSubtype: String?
    let transactionId: String?
    let onlyFailures: Bool?
}
