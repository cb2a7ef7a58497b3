import APITransport
import BillingCore
import BillingStore
import HTTPTypes
import Logging
import StripeAPI

/// Finds an app user's Stripe customer, or creates it, once.
///
/// The ledger answers first: a customer carrying `metadata.app_user_id` (created by billingd or
/// elsewhere) or tied by a completed Checkout session counts, preferred as ``UserBilling``
/// orders them (by metadata, then the newest). Otherwise billingd creates one with
/// `metadata[app_user_id]` (and the e-mail, when given) and writes Stripe's answer to the ledger
/// before answering, so the next request finds it there.
///
/// Lookups and creations are serialised per (scope, user) inside the process: concurrent
/// requests for one new user share one creation and make one `POST /v1/customers`. Across
/// processes, the creation's idempotency key is derived from scope and user, so Stripe answers
/// a racing second creation with the first one's customer.
public actor CustomerDirectory {
    /// A user's customer, and whether this call created it.
    public struct Found: Sendable, Equatable {
        public let id: String
        public let created: Bool
    }

    private struct Key: Hashable {
        let scope: ServiceScope
        let user: String
    }

    private let ledger: any UserLedgerStore
    private let reconciliation: any LedgerReconciliationStore
    private let client: StripeClient
    /// The lookup (and maybe creation) running for each user; removed when it ends.
    private var running: [Key: Task<Found, any Error>] = [:]

    public init(store: any LedgerStore, client: StripeClient) {
        ledger = store.users
        reconciliation = store.reconciliation
        self.client = client
    }

    /// The user's customer in `scope`, created in Stripe when the ledger knows none.
    /// - Parameter email: set on the customer only when it is created here.
    public func customer(of user: String, in scope: ServiceScope, email: String?, logger: Logger) async throws -> Found {
        let key = Key(scope: scope, user: user)
        let task: Task<Found, any Error>
        if let current = running[key] {
            task = current
        } else {
            task = Task { [ledger, reconciliation, client] in
                try await Self.findOrCreate(
                    user: user, scope: scope, email: email, ledger: ledger, reconciliation: reconciliation, client: client,
                    logger: logger)
            }
            running[key] = task
        }
        let result = await task.result
        // Several callers may get here for one task; only the first clears it, and never a newer one.
        if running[key] == task { running[key] = nil }
        return try result.get()
    }

    /// Inside the per-user section: the ledger, then Stripe.
    private static func findOrCreate(
        user: String, scope: ServiceScope, email: String?, ledger: any UserLedgerStore, reconciliation: any LedgerReconciliationStore,
        client: StripeClient, logger: Logger
    ) async throws -> Found {
        if let existing = try await ledger.customers(of: user, in: scope).first {
            return Found(id: existing.id, created: false)
        }
        var parameters: StripeParameters = [:]
        if let email { parameters["email"] = .string(email) }
        parameters["metadata"] = ["app_user_id": .string(user)]
        let response: StripeResponse
        do {
            response = try await client.send(
                .post, "/v1/customers", parameters: parameters, account: scope.account.isEmpty ? nil : scope.account,
                idempotencyKey: StripeIdempotencyKeys.customer(user: user, scope: scope))
        } catch {
            if error.kind == .idempotency {
                // Another process created this user's customer with other details (another
                // e-mail) under the same key; its answer reaches the ledger by webhook.
                if let existing = try await ledger.customers(of: user, in: scope).first {
                    return Found(id: existing.id, created: false)
                }
                throw APIError(
                    .conflict, code: "customer_creation_conflict",
                    message: "Another request is creating the Stripe customer of this user with other details (such as another e-mail) right now. Try again in a few seconds.",
                    retryAfter: 2, stripeRequestID: error.requestID)
            }
            throw APIError.stripe(error, doing: "create the user's customer")
        }
        let snapshot: LedgerSnapshot
        do {
            snapshot = try APISnapshot.decode(.customer, response: response)
        } catch {
            throw APIError(
                .badGateway, code: "stripe_bad_answer",
                message: "Stripe created the customer but its answer could not be read: \(error)", stripeRequestID: response.requestID)
        }
        do {
            try await reconciliation.applyFetched(snapshot, account: scope.account, livemode: scope.livemode)
        } catch {
            // The customer exists in Stripe; its customer.created event will bring it to the ledger.
            logger.warning(
                "created a Stripe customer but could not write it to the ledger yet",
                metadata: ["customer": "\(snapshot.objectID)", "error": "\(error)"])
        }
        logger.info("created Stripe customer for app user", metadata: ["customer": "\(snapshot.objectID)", "scope": "\(scope)"])
        return Found(id: snapshot.objectID, created: true)
    }
}
