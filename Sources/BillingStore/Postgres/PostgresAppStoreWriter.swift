import BillingCore
import Logging
import PostgresNIO

/// Writes App Store deliveries into the PostgreSQL App Store ledger, inside the caller's
/// transaction: the twin of SQLite/SQLiteAppStoreWriter.swift. The statements, their values and the
/// merge of a transaction with the held one come from ``AppStoreLedgerRows``; this type runs
/// them, under the purchase's lock (``PostgresObjectLock``) so that replicas applying
/// deliveries of one purchase see a serial history.
enum PostgresAppStoreWriter {
    /// Applies one delivery; `sourceID` is its inbox event id (the tie-breaker of equal dates),
    /// `receivedAt` (Unix ms) when it is applied.
    static func apply(
        _ delivery: AppStoreDelivery, environment: String, sourceID: String, receivedAt: Int64, connection: PostgresConnection,
        logger: Logger
    ) async throws -> ApplyEffect {
        guard let plan = AppStoreApplyPlan(delivery) else { return .recorded }
        let original = plan.originalTransactionID
        let writer = Statements(environment: environment, sourceID: sourceID, connection: connection, logger: logger)
        try await PostgresObjectLock.lock(
            [PostgresObjectLock.key(appStoreEnvironment: environment, originalTransactionID: original)], connection, logger)
        var changed = false
        for step in plan.steps {
            switch step {
            case .transaction(let transaction, let reversal):
                changed = try await writer.upsert(transaction, reversal: reversal) || changed
            case .renewal(let renewal):
                changed = try await writer.upsert(renewal) || changed
            case .notification(let notification):
                changed = try await writer.record(notification, original: original) || changed
            case .refreshSubscription:
                try await writer.refreshSubscription(original: original)
            case .tie(let user, let rule):
                _ = try await writer.tie(original: original, user: user, rule: rule)
            case .tieByAccountToken:
                try await writer.run(AppStoreLedgerRows.tieByAccountTokenSQL, [.text(environment), .text(original)])
            case .consumptionRequest(let notification, let transaction):
                try await PostgresAppStoreConsumption.insert(
                    notification, transaction: transaction, environment: environment, receivedAt: receivedAt, connection: connection,
                    logger: logger)
            }
        }
        return AppStoreApplyPlan.effect(changed: changed)
    }

    /// The statements of one delivery's application.
    struct Statements {
        let environment: String
        let sourceID: String
        let connection: PostgresConnection
        let logger: Logger

        @discardableResult
        func run(_ sql: String, _ values: [LedgerValue]) async throws -> PostgresRows {
            try await connection.run(sql, values, logger: logger)
        }

        /// Whether a statement changed (returned) a row.
        func changes(_ sql: String, _ values: [LedgerValue]) async throws -> Bool {
            for try await _ in try await run(sql + " RETURNING 1", values) { return true }
            return false
        }

        /// Merges one transaction snapshot; returns whether the ledger changed.
        func upsert(_ transaction: AppStoreTransaction, reversal: Bool) async throws -> Bool {
            var held: AppStoreLedgerRows.HeldTransaction?
            let rows = try await run(AppStoreLedgerRows.heldTransactionSQL, [.text(environment), .text(transaction.transactionID)])
            for try await (signedDate, heldSource, revoked, reversed, upgraded) in rows.decode((Int64, String, Int64?, Int64?, Bool).self) {
                held = .init(
                    signedDate: signedDate, sourceID: heldSource,
                    revocation: AppStoreRevocation(revokedSignedDate: revoked, reversedSignedDate: reversed), isUpgraded: upgraded)
            }
            switch AppStoreLedgerRows.plan(transaction, held: held, environment: environment, sourceID: sourceID, reversal: reversal) {
            case .unchanged: return false
            case .sticky(let values): try await run(AppStoreLedgerRows.stickySQL, values)
            case .upsert(let values): try await run(AppStoreLedgerRows.upsertTransactionSQL, values)
            }
            return true
        }

        func ensureSubscription(_ original: String) async throws {
            try await run(AppStoreLedgerRows.ensureSubscriptionSQL, [.text(environment), .text(original)])
        }

        /// Takes the renewal info if it is the newest; returns whether it was.
        func upsert(_ renewal: AppStoreRenewalInfo) async throws -> Bool {
            try await ensureSubscription(renewal.originalTransactionID)
            return try await changes(
                AppStoreLedgerRows.renewalSQL, AppStoreLedgerRows.renewalValues(renewal, environment: environment, sourceID: sourceID))
        }

        /// Takes the notification's type, subtype and status if it is the newest; returns whether it was.
        func record(_ notification: AppStoreNotification, original: String) async throws -> Bool {
            try await ensureSubscription(original)
            return try await changes(
                AppStoreLedgerRows.notificationSQL,
                AppStoreLedgerRows.notificationValues(notification, original: original, environment: environment))
        }

        /// Recomputes the subscription's transaction-derived columns and its status.
        func refreshSubscription(original: String) async throws {
            try await ensureSubscription(original)
            let key: [LedgerValue] = [.text(environment), .text(original)]
            guard let current = try await firstRow(AppStoreLedgerRows.currentTransactionSQL, key) else { return }
            let token = try await firstRow(AppStoreLedgerRows.accountTokenSQL, key)?.first ?? .null
            try await run(AppStoreLedgerRows.refreshSQL, current + [token] + key)
            guard
                let row = try await firstRow(
                    "SELECT \(AppStoreLedgerRows.recordColumns) FROM appStoreSubscription s WHERE s.environment = ? AND s.originalTransactionID = ?",
                    key),
                let record = AppStoreLedgerRows.record(from: PostgresRowValues(values: row))
            else { return }
            var asOf: Int64 = 0
            let latest = try await run(
                """
                SELECT GREATEST(COALESCE((SELECT MAX(vSignedDate) FROM appStoreTransaction WHERE environment = ?1 AND originalTransactionID = ?2), 0),
                    COALESCE(renewalSignedDate, 0), COALESCE(lastNotificationSignedDate, 0))
                FROM appStoreSubscription WHERE environment = ?1 AND originalTransactionID = ?2
                """, key)
            for try await value in latest.decode(Int64.self) { asOf = value }
            try await run(AppStoreLedgerRows.statusSQL, [.text(record.status(now: asOf).rawValue)] + key)
        }

        /// Ties an original transaction to the user who reported it, under `rule` when another
        /// user owns it already.
        func tie(original: String, user: String, rule: AppStoreOwnershipRule) async throws -> AppStoreTie {
            if case .text(let owner)? = try await firstRow(AppStoreLedgerRows.ownerSQL, [.text(environment), .text(original)])?.first {
                if owner == user { return .owned }
                guard rule == .transfer else { return .ownedByOther(owner) }
            }
            try await run(AppStoreLedgerRows.tieSQL, [.text(environment), .text(original), .text(user), .text(sourceID)])
            return .owned
        }

        /// The first row a query returns, as values.
        func firstRow(_ sql: String, _ values: [LedgerValue]) async throws -> [LedgerValue]? {
            for try await row in try await run(sql, values) { return try row.map(LedgerValue.init) }
            return nil
        }
    }
}

/// One row PostgreSQL returned, read by position like SQLite's row reader (SQLite/SQLiteColumns.swift).
struct PostgresRowValues: LedgerColumnReading {
    let values: [LedgerValue]

    func string(_ index: CInt) -> String? {
        if case .text(let text) = values[Int(index)] { text } else { nil }
    }

    func int64(_ index: CInt) -> Int64? {
        switch values[Int(index)] {
        case .integer(let number): number
        case .boolean(let flag): flag ? 1 : 0
        default: nil
        }
    }

    func bool(_ index: CInt) -> Bool {
        switch values[Int(index)] {
        case .boolean(let flag): flag
        case .integer(let number): number != 0
        default: false
        }
    }
}
