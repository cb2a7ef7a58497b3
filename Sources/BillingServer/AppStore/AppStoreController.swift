import AppStoreAPI
import BillingCore
import BillingStore
import Foundation
import Hummingbird
import Logging

/// The App Store endpoints of the service API, for the app's backend:
///
/// - `POST /v1/users/{user}/appstore/transactions` `{"signed_transaction": JWS}`: a StoreKit 2
///   purchase (`Transaction.jwsRepresentation`) verified, recorded, tied to the user and applied;
///   answers the user's subscription view in the transaction's mode.
/// - `POST /v1/users/{user}/appstore/restore` `{"transactions": [JWS, …]}` (at most 100): the same
///   for each; answers `restored_count`, `not_restored` and the view.
/// - `POST /v1/users/{user}/appstore/receipts` `{"receipt_data": base64}`: a StoreKit 1 app
///   receipt; its transaction id is looked up with Get Transaction History, whose verified
///   transactions are recorded for the user — only if Apple signed the receipt; an unverified
///   one restores only purchases already the user's; answers like a restore.
/// - `GET /v1/users/{user}/appstore/account-token`: the user's `appAccountToken`.
/// - `PUT /v1/users/{user}/appstore/consumption-consent` `{"consented": bool}` and `GET` of it:
///   whether the user agreed to share consumption data with Apple when they ask Apple for a
///   refund; billingd answers Apple's refund requests only for users who did.
/// - the offer signatures of ``AppStoreOfferController``.
public struct AppStoreController: Sendable {
    /// What the endpoints need besides the ledger.
    public struct Configuration: Sendable {
        /// Nil when App Store support is off (`APPSTORE_BUNDLE_ID` unset): the write endpoints
        /// then answer 503 `appstore_not_configured`.
        public var verifier: AppStoreVerifier?
        public var ownership: AppStoreOwnershipRule
        public var users: UserController.Configuration
        /// App Store Server API clients by environment; without one, a reported transaction is
        /// recorded alone (no history) and legacy receipts answer 503.
        public var clients: [AppStoreEnvironment: AppStoreClient]
        /// Checks that Apple signed a legacy receipt (`APPSTORE_RECEIPT_ROOT_CERTIFICATES`); one
        /// with no root verifies none, and unverified receipts claim nothing.
        public var receiptVerifier: AppStoreReceiptVerifier
        /// Signs promotional offers and introductory-offer eligibility; nil answers those
        /// endpoints 503 `offer_signing_not_configured`.
        public var offerSigner: AppStoreOfferSigner?

        public init(
            verifier: AppStoreVerifier?, ownership: AppStoreOwnershipRule = .keep, users: UserController.Configuration = .init(),
            clients: [AppStoreEnvironment: AppStoreClient] = [:], receiptVerifier: AppStoreReceiptVerifier = AppStoreReceiptVerifier(),
            offerSigner: AppStoreOfferSigner? = nil
        ) {
            self.verifier = verifier
            self.ownership = ownership
            self.users = users
            self.clients = clients
            self.receiptVerifier = receiptVerifier
            self.offerSigner = offerSigner
        }
    }

    static let maximumBodySize = 1 << 20
    static let maximumRestore = 100
    /// Where a user manages (and cancels) an App Store subscription: only they can.
    public static let manageSubscriptionsURL = "https://apps.apple.com/account/subscriptions"

    let ledger: any AppStoreLedgerStore
    let users: any UserLedgerStore
    let consumption: any AppStoreConsumptionStore
    let configuration: Configuration
    let offers: AppStoreOfferController

    public init(store: any LedgerStore, configuration: Configuration) {
        ledger = store.appStore
        users = store.users
        consumption = store.appStoreConsumption
        self.configuration = configuration
        offers = AppStoreOfferController(store: store, configuration: configuration)
    }

    public func addRoutes<Methods: RouterMethods>(to router: Methods) {
        offers.addRoutes(to: router)
        router.post("users/:user/appstore/transactions") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.users.scope)
            let body = try await Body(request, members: ["signed_transaction"])
            let jws = try body.string("signed_transaction", hint: "the JWS of Transaction.jwsRepresentation (StoreKit 2)")
            let report = try await verify(jws, for: user.user, position: nil)
            let outcome = try await ledger.record([report], receivedAt: nowMilliseconds)[0]
            if case .ownedByOtherUser(let original) = outcome {
                throw APIError(
                    .conflict, code: "transaction_owned_by_other_user",
                    message: "The App Store purchase \(original) belongs to another app user. Restores move purchases between users only with APPSTORE_OWNERSHIP=transfer.")
            }
            await recordHistory(of: report, logger: context.logger)
            return try await view(of: user.user, environment: report.transaction.environment).response()
        }
        router.post("users/:user/appstore/restore") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.users.scope)
            let body = try await Body(request, members: ["transactions"])
            let list = try body.strings("transactions", limit: Self.maximumRestore)
            var reports: [AppStoreAppTransaction] = []
            for (index, jws) in list.enumerated() { reports.append(try await verify(jws, for: user.user, position: index)) }
            let outcomes = try await ledger.record(reports, receivedAt: nowMilliseconds)
            return try await restoreResponse(user.user, outcomes: outcomes, environment: reports.last?.transaction.environment)
        }
        router.post("users/:user/appstore/receipts") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.users.scope)
            let body = try await Body(request, members: ["receipt_data"])
            let text = try body.string("receipt_data", hint: "the base64 of the app's receipt file (Bundle.main.appStoreReceiptURL)")
            return try await restore(receipt: text, for: user.user, logger: context.logger)
        }
        router.get("users/:user/appstore/account-token") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.users.scope)
            let token = try await ledger.accountToken(for: user.user)
            var json = JSONBytesWriter()
            json.beginObject()
            json.field("user", user.user)
            json.field("app_account_token", token)
            json.endObject()
            return UserJSONResponse.response(json.bytes)
        }
        router.put("users/:user/appstore/consumption-consent") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.users.scope)
            let body = try await Body(request, members: ["consented"])
            let consented = try body.boolean(
                "consented",
                hint: "true when the user agreed to share consumption data with Apple for their refund requests, false when they declined or withdrew")
            let consent = try await consumption.setConsent(
                of: user.user, consented: consented, now: Int64(configuration.users.now().timeIntervalSince1970))
            context.logger.info("consumption consent recorded", metadata: ["consented": "\(consented)"])
            return Self.consentResponse(consent)
        }
        router.get("users/:user/appstore/consumption-consent") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.users.scope)
            return Self.consentResponse(try await consumption.consent(of: user.user))
        }
    }

    /// `{"consented", "updated_at"}`; never recorded: `false` and `null`.
    static func consentResponse(_ consent: ConsumptionConsent?) -> Response {
        var json = JSONBytesWriter()
        json.beginObject()
        json.field("consented", consent?.consented ?? false)
        json.field("updated_at", consent?.updatedAt)
        json.endObject()
        return UserJSONResponse.response(json.bytes)
    }

    /// A legacy receipt restored: read for its purchases, whose whole history is fetched from the
    /// App Store Server API (Production first, unless the receipt says sandbox), verified, and
    /// recorded for the user. Only a receipt Apple signed (``AppStoreReceiptVerifier``) may tie
    /// a purchase to the user or move it from another; an unverified one restores only what is
    /// already the user's. Every cheap check — the receipt's form, its bundle id, its purchases'
    /// ids, Xcode — comes before any call, so a bogus receipt costs no share of the API's rate.
    func restore(receipt text: String, for user: String, logger: Logger) async throws -> Response {
        guard configuration.verifier != nil else { throw Self.notConfigured }
        let read: AppStoreVerifiedReceipt
        do {
            read = try await configuration.receiptVerifier.read(base64: text)
        } catch {
            let status: HTTPResponse.Status = error.code == .receiptTooLarge ? .contentTooLarge : .badRequest
            throw APIError(status, code: error.code.rawValue, message: error.message)
        }
        if let problem = read.problem {
            logger.notice("legacy receipt not verified: it restores only purchases already the user's", metadata: ["reason": "\(problem.code.rawValue)"])
        }
        let receipt = read.receipt
        let bundleID = configuration.verifier?.configuration.bundleID
        if let named = receipt.bundleID, let bundleID, named != bundleID {
            throw APIError(
                .badRequest, code: "invalid_receipt",
                message: "The receipt is for the app \(UserRequest.printable(named)), not \(bundleID) (APPSTORE_BUNDLE_ID).")
        }
        let originals = Self.originalTransactionIDs(of: receipt)
        if let malformed = originals.first(where: { !AppStoreTransactionID.isWellFormed($0) }) {
            throw APIError(
                .badRequest, code: "invalid_receipt",
                message: "The receipt names the transaction \(UserRequest.printable(String(malformed.prefix(40)))), which is not an App Store transaction id (digits).")
        }
        let likeliest = Self.environments(for: receipt).filter(acceptedEnvironments.contains)
        guard !originals.isEmpty else {
            // Nothing bought in the app: the view as it stands.
            return try await restoreResponse(user, outcomes: [], environment: likeliest.first?.rawValue, receipt: read)
        }
        if receipt.receiptType == AppStoreEnvironment.xcode.rawValue {
            throw APIError(
                .badRequest, code: "invalid_receipt",
                message: "The receipt was made by Xcode's StoreKit testing, whose purchases the App Store Server API does not know. Test receipts with a sandbox account instead.")
        }
        let environments = likeliest.filter { configuration.clients[$0] != nil }
        guard !environments.isEmpty else {
            throw APIError(
                .serviceUnavailable, code: "appstore_api_not_configured",
                message: "Legacy receipts are looked up with the App Store Server API: set APPSTORE_ISSUER_ID, APPSTORE_KEY_ID and APPSTORE_PRIVATE_KEY (an In-App Purchase key from App Store Connect) and restart billingd.")
        }
        for environment in environments {
            // A verified receipt looks its first purchase up; an unverified one only a purchase
            // already tied to this user, so strangers' ids cost no call.
            let owned = read.isVerified ? [] : try await ledger.originalTransactionIDs(originals, ownedBy: user, environment: environment.rawValue)
            guard let transactionID = read.isVerified ? originals.first : originals.first(where: owned.contains) else { continue }
            let history: [AppStoreSignedTransaction]
            do {
                history = try await configuration.clients[environment]!.completeTransactionHistory(transactionID: transactionID)
            } catch where error.kind == .notFound || error.kind == .invalidRequest {
                continue  // a purchase of the other environment, or an id Apple never issued
            } catch {
                logger.warning(
                    "legacy receipt not looked up", metadata: ["environment": "\(environment.rawValue)", "error": "\(error)"])
                throw Self.unavailable(error)
            }
            guard !history.isEmpty else { continue }
            if read.isVerified {
                let reports = history.map {
                    AppStoreAppTransaction(user: user, ownership: configuration.ownership, signedTransaction: $0.jws, transaction: $0.transaction)
                }
                let outcomes = try await ledger.record(reports, receivedAt: nowMilliseconds)
                return try await restoreResponse(user, outcomes: outcomes, environment: environment.rawValue, receipt: read)
            }
            // Unverified: only what is already this user's, and under `keep`, so that a purchase
            // moved to another user meanwhile stays theirs.
            let mine = try await ledger.originalTransactionIDs(history.map(\.transaction.originalTransactionID), ownedBy: user, environment: environment.rawValue)
            let reports = history.filter { mine.contains($0.transaction.originalTransactionID) }.map {
                AppStoreAppTransaction(user: user, ownership: .keep, signedTransaction: $0.jws, transaction: $0.transaction)
            }
            let outcomes = try await ledger.record(reports, receivedAt: nowMilliseconds)
            let others = originals + history.map(\.transaction.originalTransactionID)
            return try await restoreResponse(
                user, outcomes: outcomes, environment: environment.rawValue, receipt: read, unverified: others.filter { !mine.contains($0) })
        }
        if !read.isVerified {
            // None of the receipt's purchases is this user's, or Apple has no history of the one
            // that is: nothing restored, nothing claimed, every purchase named as not restored.
            return try await restoreResponse(user, outcomes: [], environment: likeliest.first?.rawValue, receipt: read, unverified: originals)
        }
        let transactionID = originals[0]
        throw APIError(
            .badRequest, code: "receipt_transaction_not_found",
            message: "The App Store has no transaction \(UserRequest.printable(transactionID)) for this app in \(environments.map(\.rawValue).joined(separator: " or ")); the receipt is not from this app's store purchases.")
    }

    /// The original transaction ids a receipt names (a purchase's transaction id when it has
    /// none), each once, in the receipt's order: the first is the one Apple's `ReceiptUtility`
    /// would look up (``AppStoreReceipt/transactionIDForLookup``).
    static func originalTransactionIDs(of receipt: AppStoreReceipt) -> [String] {
        var seen = Set<String>()
        return receipt.inAppPurchases.map { $0.originalTransactionID ?? $0.transactionID }.filter { seen.insert($0).inserted }
    }

    /// The environments this billingd accepts data from (`APPSTORE_ENVIRONMENTS`).
    var acceptedEnvironments: Set<AppStoreEnvironment> {
        configuration.verifier?.configuration.environments ?? [.production, .sandbox]
    }

    /// The environments to ask about a receipt, the likelier first: its receipt type is a hint.
    static func environments(for receipt: AppStoreReceipt) -> [AppStoreEnvironment] {
        receipt.receiptType?.contains("Sandbox") == true ? [.sandbox, .production] : [.production, .sandbox]
    }

    /// A failed App Store Server API call as the client sees it: the operator's problem (502)
    /// or a passing one (503 with Retry-After). Never carries the key or a token.
    static func unavailable(_ error: AppStoreAPIError) -> APIError {
        switch error.kind {
        case .authentication, .signing:
            return APIError(
                .badGateway, code: "appstore_auth_failed",
                message: "The App Store Server API did not accept billingd's key (HTTP \(error.status.map(String.init) ?? "?")). This is an operator problem: check APPSTORE_ISSUER_ID, APPSTORE_KEY_ID, APPSTORE_PRIVATE_KEY and APPSTORE_BUNDLE_ID.")
        case .verification, .decoding:
            return APIError(
                .badGateway, code: "appstore_bad_answer", message: "The App Store Server API's answer could not be trusted or read: \(error.message)")
        case .notFound, .invalidRequest, .rateLimited, .server, .transport, .cancelled:
            return APIError(
                .serviceUnavailable, code: "appstore_unavailable",
                message: "The App Store Server API could not be reached or was overloaded, after \(error.attempts) attempt(s). Try again in a few seconds.",
                retryAfter: APIError.stripeRetryAfter)
        }
    }

    /// A restore's answer: the view, how many purchases were restored, and which were not —
    /// another user's (`transaction_owned_by_other_user`), or named by a receipt Apple's
    /// signature does not vouch for (`receipt_not_verified`). A receipt's answer says whether it
    /// verified (`receipt_verified`) and, if not, why (`receipt_problem`).
    func restoreResponse(
        _ user: String, outcomes: [AppStoreReportOutcome], environment: String?, receipt: AppStoreVerifiedReceipt? = nil,
        unverified: [String] = []
    ) async throws -> Response {
        var restored = Set<String>()
        var refused: [String] = []
        for outcome in outcomes {
            switch outcome {
            case .recorded(let original, _): restored.insert(original)
            case .ownedByOtherUser(let original): refused.append(original)
            }
        }
        let owned = Set(refused).subtracting(restored)
        let view = try await view(of: user, environment: environment)
        return UserJSONResponse.response(view.jsonBytes { json in
            json.field("restored_count", Int64(restored.count))
            json.key("not_restored")
            json.beginArray()
            for original in owned.sorted() {
                json.beginObject()
                json.field("original_transaction_id", original)
                json.field("code", "transaction_owned_by_other_user")
                json.endObject()
            }
            for original in Set(unverified).subtracting(restored).subtracting(owned).sorted() {
                json.beginObject()
                json.field("original_transaction_id", original)
                json.field("code", "receipt_not_verified")
                json.endObject()
            }
            json.endArray()
            if let receipt {
                json.field("receipt_verified", receipt.isVerified)
                if let problem = receipt.problem {
                    json.key("receipt_problem")
                    json.beginObject()
                    json.field("code", problem.code.rawValue)
                    json.field("message", problem.message)
                    json.endObject()
                }
            }
        })
    }

    static let notConfigured = APIError(
        .serviceUnavailable, code: "appstore_not_configured",
        message: "App Store support is off: set APPSTORE_BUNDLE_ID (and APPSTORE_APP_APPLE_ID for Production) to accept StoreKit transactions.")

    /// Restore by history: the app reported one transaction, so fetch its purchase's whole
    /// history (every period and product change) and record it for the same user. The reported
    /// transaction is already recorded; if Apple cannot be reached, reconcile fills the rest in.
    func recordHistory(of report: AppStoreAppTransaction, logger: Logger) async {
        let environment = AppStoreEnvironment(rawValue: report.transaction.environment ?? "Production")
        guard let client = configuration.clients[environment] else { return }
        do {
            let history = try await client.completeTransactionHistory(transactionID: report.transaction.originalTransactionID)
            let reports = history.map {
                AppStoreAppTransaction(user: report.user, ownership: report.ownership, signedTransaction: $0.jws, transaction: $0.transaction)
            }
            _ = try await ledger.record(reports, receivedAt: nowMilliseconds)
        } catch {
            logger.warning(
                "transaction history not fetched; reconcile will repair the subscription",
                metadata: ["original_transaction_id": "\(report.transaction.originalTransactionID)", "error": "\(error)"])
        }
    }

    var nowMilliseconds: Int64 { Int64(configuration.users.now().timeIntervalSince1970 * 1000) }

    /// Verifies a forwarded JWS; `position` names it in a restore's list.
    func verify(_ jws: String, for user: String, position: Int?) async throws -> AppStoreAppTransaction {
        guard let verifier = configuration.verifier else { throw Self.notConfigured }
        let place = position.map { "transactions[\($0)]: " } ?? ""
        let verified: VerifiedSignedData
        do {
            verified = try await verifier.verifyTransaction(jws)
        } catch {
            throw APIError(.badRequest, code: error.code.rawValue, message: place + error.message)
        }
        do {
            return AppStoreAppTransaction(
                user: user, ownership: configuration.ownership, signedTransaction: jws,
                transaction: try AppStoreTransaction(json: verified.payload))
        } catch {
            throw APIError(.badRequest, code: "invalid_payload", message: place + "the transaction is genuine but cannot be read: \(error.message).")
        }
    }

    /// The user's subscription view in the mode of an App Store environment (Production is live);
    /// without one (an empty restore), in the mode of the accepted environments: live only if
    /// Production is accepted, so a Sandbox-only billingd answers in test mode.
    func view(of user: String, environment: String?) async throws -> SubscriptionView {
        let livemode = environment.map { AppStoreEnvironment(rawValue: $0).isLive } ?? acceptedEnvironments.contains(.production)
        let scope = ServiceScope(livemode: livemode)
        let billing = try await users.billing(of: user, in: scope, stripeEntitlements: false)
        return SubscriptionView(billing: billing, catalog: configuration.users.catalog, now: Int64(configuration.users.now().timeIntervalSince1970))
    }

    /// A JSON object body with known members only.
    struct Body {
        let members: [String: Value]

        enum Value: Decodable {
            case string(String)
            case strings([String])
            case boolean(Bool)
            case other(String)

            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                if let text = try? container.decode(String.self) {
                    self = .string(text)
                } else if let list = try? container.decode([String].self) {
                    self = .strings(list)
                } else if let flag = try? container.decode(Bool.self) {
                    self = .boolean(flag)
                } else if container.decodeNil() {
                    self = .other("null")
                } else {
                    self = .other("not a string")
                }
            }
        }

        init(_ request: Request, members allowed: [String]) async throws {
            let bytes = try await RequestBody.collect(request, limit: AppStoreController.maximumBodySize)
            try RequestBody.requireJSON(request, body: bytes)
            try RequestBody.refuseDuplicateMembers(bytes)
            guard let members = try? JSONDecoder().decode([String: Value].self, fromUntrusted: bytes) else {
                throw APIError(.badRequest, code: "invalid_body", message: "The body is not a JSON object; send {\"\(allowed[0])\": …}.")
            }
            for name in members.keys where !allowed.contains(name) {
                throw APIError(
                    .badRequest, code: "unknown_field",
                    message: "Unknown field \"\(UserRequest.printable(name))\"; this endpoint takes \(allowed.joined(separator: ", ")).")
            }
            self.members = members
        }

        func string(_ name: String, hint: String) throws -> String {
            guard case .string(let text) = members[name], !text.isEmpty else {
                throw APIError(.badRequest, code: "missing_field", message: "\(name) is required: \(hint).")
            }
            return text
        }

        /// A required JSON boolean: 400 `missing_field` when absent, `invalid_field` when not `true` or `false`.
        func boolean(_ name: String, hint: String) throws -> Bool {
            switch members[name] {
            case .boolean(let flag)?: return flag
            case nil: throw APIError(.badRequest, code: "missing_field", message: "\(name) is required: \(hint).")
            default: throw APIError(.badRequest, code: "invalid_field", message: "\(name) must be true or false (a JSON boolean): \(hint).")
            }
        }

        func strings(_ name: String, limit: Int) throws -> [String] {
            guard case .strings(let list) = members[name] else {
                throw APIError(.badRequest, code: "missing_field", message: "\(name) is required: a list of JWS strings (Transaction.jwsRepresentation), at most \(limit).")
            }
            guard list.count <= limit else {
                throw APIError(.badRequest, code: "too_many_transactions", message: "\(name) holds \(list.count) transactions; send at most \(limit) per request.")
            }
            return list
        }
    }
}
