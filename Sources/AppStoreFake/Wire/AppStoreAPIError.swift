import HTTPTypes
import Hummingbird

extension AppStoreFake {
    /// An error answer of the App Store Server API: its HTTP status and, except for 401, the JSON
    /// body `{"errorCode": 4040010, "errorMessage": "Transaction id not found."}`, with Apple's codes.
    public struct APIError: Error, HTTPResponseError, Sendable, Hashable, CustomStringConvertible {
        public let status: HTTPResponse.Status
        /// Apple's seven-digit code; nil for an answer without a body (401).
        public let errorCode: Int?
        public let errorMessage: String?
        /// `Retry-After` in seconds, for 429.
        public var retryAfter: Int?

        public init(status: HTTPResponse.Status, errorCode: Int?, errorMessage: String?, retryAfter: Int? = nil) {
            self.status = status
            self.errorCode = errorCode
            self.errorMessage = errorMessage
            self.retryAfter = retryAfter
        }

        private static func bad(_ code: Int, _ message: String) -> APIError {
            APIError(status: .badRequest, errorCode: code, errorMessage: message)
        }

        private static func notFound(_ code: Int, _ message: String) -> APIError {
            APIError(status: .notFound, errorCode: code, errorMessage: message)
        }

        /// 401 with an empty body: what Apple answers for any problem with the bearer token.
        public static let unauthorized = APIError(status: .unauthorized, errorCode: nil, errorMessage: nil)

        public static let generalBadRequest = bad(4_000_000, "Bad request.")
        public static let invalidAppIdentifier = bad(4_000_002, "Invalid request app identifier.")
        public static let invalidRequestRevision = bad(4_000_005, "Invalid request revision.")
        public static let invalidTransactionID = bad(4_000_006, "Invalid transaction id.")
        public static let startDateTooFarInPast = bad(4_000_012, "Invalid request. The start date is earlier than the allowed start date.")
        public static let startDateAfterEndDate = bad(4_000_013, "Invalid request. The end date precedes the start date or the dates are the same.")
        public static let invalidPaginationToken = bad(4_000_014, "Invalid request. The pagination token is invalid.")
        public static let invalidStartDate = bad(4_000_015, "Invalid request. The start date is not a timestamp value represented in milliseconds.")
        public static let invalidEndDate = bad(4_000_016, "Invalid request. The end date is not a timestamp value represented in milliseconds.")
        public static let paginationTokenExpired = bad(4_000_017, "Invalid request. The pagination token is expired.")
        public static let invalidNotificationType = bad(4_000_018, "Invalid request. The notification type or subtype is invalid.")
        public static let multipleFiltersSupplied = bad(4_000_019, "Invalid request. Only one of notificationType or transactionId may be supplied.")
        public static let invalidTestNotificationToken = bad(4_000_020, "Invalid request. The test notification token is invalid.")
        public static let invalidSort = bad(4_000_021, "Invalid request. The sort parameter is invalid.")
        public static let invalidProductType = bad(4_000_022, "Invalid request. The product type parameter is invalid.")
        public static let invalidRevoked = bad(4_000_030, "Invalid request. The revoked parameter is invalid.")
        public static let invalidStatus = bad(4_000_031, "Invalid request. The status parameter is invalid.")

        // Send Consumption Information's refusals, with the codes and messages Apple documents.
        public static let invalidCustomerConsented = bad(
            4_000_035, "Invalid request. The customer consented field is required and must indicate the customer consented.")
        public static let invalidDeliveryStatus = bad(4_000_036, "Invalid request. The delivery status field is invalid.")
        public static let invalidSampleContentProvided = bad(4_000_041, "Invalid request. The sample content provided field is invalid.")
        public static let invalidRefundPreference = bad(4_000_044, "Invalid request. The refund preference field is invalid.")
        public static let consumptionPercentageAutoRenewableSubscription = bad(
            4_000_209, "Invalid request. The consumption percentage field is not supported for auto-renewable subscription transactions.")
        /// `ConsumptionPercentageOutOfRangeError`: Apple's pages checked (2026-11) name it but do
        /// not give its number, so the fake answers it as a general bad request that names it.
        public static let consumptionPercentageOutOfRange = bad(
            4_000_000, "Invalid request. ConsumptionPercentageOutOfRangeError: the consumption percentage is outside the valid range.")
        /// `UndeliveredConsumptionPercentageNonZeroError`, numbered as ``consumptionPercentageOutOfRange``.
        public static let undeliveredConsumptionPercentageNonZero = bad(
            4_000_000,
            "Invalid request. UndeliveredConsumptionPercentageNonZeroError: the consumption percentage must be zero for the provided delivery status.")

        public static let accountNotFound = notFound(4_040_001, "Account not found.")
        public static let accountNotFoundRetryable = notFound(4_040_002, "Account not found. Please try again.")
        public static let appNotFound = notFound(4_040_003, "App not found.")
        public static let appNotFoundRetryable = notFound(4_040_004, "App not found. Please try again.")
        public static let originalTransactionIDNotFound = notFound(4_040_005, "Original transaction id not found.")
        public static let originalTransactionIDNotFoundRetryable = notFound(
            4_040_006, "Original transaction id not found. Please try again.")
        public static let serverNotificationURLNotFound = notFound(
            4_040_007,
            "No App Store Server Notification URL found for provided app. Check that a URL is configured in App Store Connect for this environment.")
        public static let testNotificationNotFound = notFound(
            4_040_008, "Either the test notification token is expired or the notification and status are not yet available.")
        public static let transactionIDNotFound = notFound(4_040_010, "Transaction id not found.")

        /// Not Apple's: the trigger helper of billingd's local mode cannot act out this
        /// notification in the subscription's state (409, with what to do instead).
        public static func cannotTrigger(_ message: String) -> APIError {
            APIError(status: .conflict, errorCode: 4_090_000, errorMessage: message)
        }

        /// Not Apple's: the trigger helper does not act out this notification type or subtype.
        public static func unsupportedTrigger(_ message: String) -> APIError {
            bad(4_000_018, message)
        }

        /// 429, with `Retry-After` when given.
        public static func rateLimitExceeded(retryAfter: Int? = nil) -> APIError {
            APIError(status: .tooManyRequests, errorCode: 4_290_000, errorMessage: "Rate limit exceeded.", retryAfter: retryAfter)
        }

        public static let generalInternal = APIError(
            status: .internalServerError, errorCode: 5_000_000, errorMessage: "An unknown error occurred.")
        public static let generalInternalRetryable = APIError(
            status: .internalServerError, errorCode: 5_000_001, errorMessage: "An unknown error occurred. Please try again.")

        /// The answer Apple gives with `status` when nothing more specific applies: 401 empty,
        /// 429 rate limit, 5xx internal, 404 transaction not found, else a general bad request.
        public static func forStatus(_ status: Int, retryAfter: Int? = nil) -> APIError {
            var error: APIError
            switch status {
            case 401: error = .unauthorized
            case 429: error = .rateLimitExceeded(retryAfter: retryAfter)
            case 404: error = .transactionIDNotFound
            case 500: error = .generalInternal
            case 501...: error = APIError(
                status: .init(code: status), errorCode: 5_000_001, errorMessage: "An unknown error occurred. Please try again.")
            case 400: error = .generalBadRequest
            default: error = APIError(status: .init(code: status), errorCode: status * 10_000, errorMessage: "Injected fault.")
            }
            error.retryAfter = retryAfter
            return error
        }

        public func response(from request: Request, context: some RequestContext) throws -> Response {
            var headers: HTTPFields = [:]
            if let retryAfter { headers[.retryAfter] = String(retryAfter) }
            guard let errorCode else {
                return Response(status: status, headers: headers, body: .init())
            }
            var response = WireJSON.response(ErrorBody(errorCode: errorCode, errorMessage: errorMessage ?? ""), status: status)
            response.headers.append(contentsOf: headers)
            return response
        }

        private struct ErrorBody: Encodable {
            let errorCode: Int
            let errorMessage: String
        }

        public var description: String {
            "\(status.code)\(errorCode.map { " \($0)" } ?? "")\(errorMessage.map { " \($0)" } ?? "")"
        }
    }
}
