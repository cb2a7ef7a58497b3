import BillingCore
import Foundation
import Logging
import PostgresNIO

/// The App Store side of the PostgreSQL ledger as the service API and App Store reconcile use it:
/// the twin of SQLite/SQLiteAppStore.swift. A report or a fetched
/// transaction becomes an inbox row (so that replay rebuilds it) applied in the same transaction
/// through ``PostgresAppStoreWriter``, under the locks of its event id and its purchase, so that a
/// report reaching two replicas at once is applied by one and found stored by the other.
struct PostgresAppStore: AppStoreLedgerStore, AppStoreReconciliationStore {
    let client: PostgresClient
    let logger: Logger
    let outbox: OutboxPolicy?

    private static var nowMilliseconds: Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    // MARK: AppStoreLedgerStore

    func record(_ reports: [AppStoreAppTransaction], receivedAt: Int64) async throws -> [AppStoreReportOutcome] {
        try await client.transaction(logger: logger) { connection in
            var outcomes: [AppStoreReportOutcome] = []
            var touches = OutboxTouches()
            for report in reports {
                let transaction = report.transaction
                let environment = transaction.environment ?? AppStoreEnvironment.production.rawValue
                let original = transaction.originalTransactionID
                let delivery = InboxDelivery.appStoreReport(report, environment: environment, receivedAt: receivedAt)
                try await lock(delivery, environment: environment, original: original, connection: connection)
                if report.ownership == .keep, let owner = try await owner(environment: environment, original: original, connection),
                    owner != report.user
                {
                    outcomes.append(.ownedByOtherUser(originalTransactionID: original))
                    continue
                }
                switch try await storeApplying(delivery, .app(report), environment: environment, sourceID: report.eventID, connection) {
                case .some:
                    touches.add(.app(report), environment: environment)
                    outcomes.append(.recorded(originalTransactionID: original, duplicate: false))
                case nil:
                    outcomes.append(.recorded(originalTransactionID: original, duplicate: true))
                }
            }
            if let outbox {
                try await PostgresOutbox.announce(touches, policy: outbox, now: Self.nowMilliseconds, connection: connection, logger: logger)
            }
            return outcomes
        }
    }

    func accountToken(for user: String) async throws -> String {
        try await client.transaction(logger: logger) { connection in
            // Two replicas asked at once for the first token agree on one namespace.
            try await connection.query(
                "SELECT pg_advisory_xact_lock(hashtextextended(\(AppAccountToken.namespaceKey), 0))", logger: logger)
            var namespace = try await connection.single(
                "SELECT value FROM meta WHERE key = \(AppAccountToken.namespaceKey)", as: String.self, logger: logger)
            if namespace == nil {
                var generator = SystemRandomNumberGenerator()
                let fresh = AppAccountToken.format((0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) })
                try await connection.query(
                    "INSERT INTO meta (key, value) VALUES (\(AppAccountToken.namespaceKey), \(fresh))", logger: logger)
                namespace = fresh
            }
            let token = AppAccountToken.derive(user: user, namespace: AppAccountToken.uuidBytes(namespace!))
            let remembered = try await connection.single(
                """
                INSERT INTO appStoreAccountToken (token, appUserID) VALUES (\(token), \(user)) ON CONFLICT DO NOTHING RETURNING 1
                """, as: Int.self, logger: logger) != nil
            guard remembered else { return token }
            var tied = false
            for try await _ in try await connection.query(
                """
                INSERT INTO appStoreOwner (environment, originalTransactionID, appUserID, source, sourceID)
                SELECT environment, originalTransactionID, \(user), 'account_token', appAccountToken
                FROM appStoreSubscription WHERE appAccountToken = \(token)
                ON CONFLICT DO NOTHING RETURNING 1
                """, logger: logger)
            {
                tied = true
            }
            // Purchases tied just now may change the user's view, in either mode.
            if tied, let outbox {
                var touches = OutboxTouches()
                touches.users = [.init(scope: .test, user: user), .init(scope: ServiceScope(livemode: true), user: user)]
                try await PostgresOutbox.announce(touches, policy: outbox, now: Self.nowMilliseconds, connection: connection, logger: logger)
            }
            return token
        }
    }

    func subscription(environment: String, originalTransactionID: String) async throws -> (AppStoreSubscriptionRecord, owner: String?)? {
        try await client.withConnection { connection in
            guard let record = try await record(environment: environment, original: originalTransactionID, connection) else { return nil }
            return (record, try await owner(environment: environment, original: originalTransactionID, connection))
        }
    }

    func originalTransactionIDs(_ originalTransactionIDs: [String], ownedBy user: String, environment: String) async throws -> Set<String> {
        try await client.withConnection { connection in
            var owned = Set<String>()
            for try await row in try await connection.run(AppStoreLedgerRows.ownedOriginalsSQL, [.text(user), .text(environment)], logger: logger) {
                if case .text(let original)? = try row.map(LedgerValue.init).first { owned.insert(original) }
            }
            return owned.intersection(originalTransactionIDs)
        }
    }

    func introductoryOffers(of user: String, livemode: Bool) async throws -> [AppStoreIntroductoryOffer] {
        try await client.withConnection { connection in
            var offers: [AppStoreIntroductoryOffer] = []
            for try await row in try await connection.run(AppStoreLedgerRows.introductoryOffersSQL(livemode: livemode), [.text(user)], logger: logger) {
                if let offer = AppStoreLedgerRows.introductoryOffer(from: PostgresRowValues(values: try row.map(LedgerValue.init))) { offers.append(offer) }
            }
            return offers
        }
    }

    // MARK: AppStoreReconciliationStore

    func staleSubscriptions(environment: String, now: Int64, after: String?, limit: Int) async throws
        -> [(originalTransactionID: String, reason: AppStoreStaleReason)]
    {
        let unapplied = InboxStatus.sqlList(InboxStatus.unapplied)
        let rows = try await client.query(
            """
            SELECT originalTransactionID, reason FROM (
                SELECT s.originalTransactionID,
                    CASE
                        WHEN EXISTS (SELECT 1 FROM inboxEvent e WHERE e.account = '\(unescaped: InboxAccount.appStorePrefix)' || s.environment
                            AND e.objectID = s.originalTransactionID AND e.status IN (\(unescaped: unapplied))) THEN 'failed_delivery'
                        WHEN s.status = 'active' AND s.expiresDate IS NOT NULL AND s.expiresDate < \(now)
                            AND NOT s.revoked THEN 'expired_while_active'
                        WHEN s.status IN ('billing_retry', 'grace_period') OR (s.isInBillingRetryPeriod AND NOT s.revoked)
                            THEN 'billing_retry'
                        WHEN EXISTS (SELECT 1 FROM appStoreTransaction t WHERE t.environment = s.environment
                            AND t.originalTransactionID = s.originalTransactionID AND t.vSourceID LIKE 'appstore\\_app\\_%'
                            AND t.vSignedDate > COALESCE(s.lastNotificationSignedDate, 0)) THEN 'reported_without_notification'
                    END AS reason
                FROM appStoreSubscription s
                WHERE s.environment = \(environment) AND s.originalTransactionID > \(after ?? "") COLLATE "C") AS candidates
            WHERE reason IS NOT NULL
            ORDER BY originalTransactionID COLLATE "C"
            LIMIT \(limit)
            """, logger: logger)
        var stale: [(originalTransactionID: String, reason: AppStoreStaleReason)] = []
        for try await (original, reason) in rows.decode((String, String).self) {
            if let reason = AppStoreStaleReason(rawValue: reason) { stale.append((original, reason)) }
        }
        return stale
    }

    func record(environment: String, originalTransactionID: String) async throws -> AppStoreSubscriptionRecord? {
        try await client.withConnection { connection in
            try await record(environment: environment, original: originalTransactionID, connection)
        }
    }

    func recordFetched(_ snapshots: [AppStoreServerSnapshot], environment: AppStoreEnvironment, receivedAt: Int64) async throws
        -> [ApplyEffect]
    {
        try await client.transaction(logger: logger) { connection in
            var effects: [ApplyEffect] = []
            var touches = OutboxTouches()
            for snapshot in snapshots {
                let original = snapshot.transaction.originalTransactionID
                let delivery = InboxDelivery.appStoreFetched(snapshot, environment: environment, receivedAt: receivedAt)
                try await lock(delivery, environment: environment.rawValue, original: original, connection: connection)
                let effect = try await storeApplying(
                    delivery, .server(snapshot), environment: environment.rawValue, sourceID: snapshot.eventID, connection, now: receivedAt)
                if let effect, effect != .stale { touches.add(.server(snapshot), environment: environment.rawValue) }
                effects.append(effect ?? .unchanged)
            }
            if let outbox { try await PostgresOutbox.announce(touches, policy: outbox, now: receivedAt, connection: connection, logger: logger) }
            return effects
        }
    }

    // MARK: Statements

    /// Takes the locks of a delivery's event id and purchase for the rest of the transaction.
    private func lock(_ delivery: InboxDelivery, environment: String, original: String, connection: PostgresConnection) async throws {
        try await PostgresObjectLock.lock(
            [PostgresInbox.lockKey(delivery),
             PostgresObjectLock.key(appStoreEnvironment: environment, originalTransactionID: original)], connection, logger)
    }

    /// Applies a delivery and stores it applied, unless it is stored already; the effect, nil
    /// for a duplicate.
    private func storeApplying(
        _ delivery: InboxDelivery, _ appStore: AppStoreDelivery, environment: String, sourceID: String, _ connection: PostgresConnection,
        now: Int64 = nowMilliseconds
    ) async throws -> ApplyEffect? {
        if try await PostgresInbox.contains(delivery, connection: connection, logger: logger) { return nil }
        let effect = try await PostgresAppStoreWriter.apply(
            appStore, environment: environment, sourceID: sourceID, receivedAt: now, connection: connection, logger: logger)
        guard
            try await PostgresInbox.insertFinal(
                delivery, status: .applied, effect: effect, processedAt: now, connection: connection, logger: logger) != nil
        else { throw PostgresApplier.StoredMeanwhile() }
        return effect
    }

    private func owner(environment: String, original: String, _ connection: PostgresConnection) async throws -> String? {
        try await connection.single(
            "SELECT appUserID FROM appStoreOwner WHERE environment = \(environment) AND originalTransactionID = \(original)",
            as: String.self, logger: logger)
    }

    private func record(environment: String, original: String, _ connection: PostgresConnection) async throws -> AppStoreSubscriptionRecord? {
        for try await row in try await connection.run(
            "SELECT \(AppStoreLedgerRows.recordColumns) FROM appStoreSubscription s WHERE s.environment = ? AND s.originalTransactionID = ?",
            [.text(environment), .text(original)], logger: logger)
        {
            return AppStoreLedgerRows.record(from: PostgresRowValues(values: try row.map(LedgerValue.init)))
        }
        return nil
    }
}
