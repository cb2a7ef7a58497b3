import BillingCore
import Foundation
import GRDB

/// Writes App Store data into the App Store ledger under the rules of BillingCore's
/// ``AppStoreVersion``: every method runs inside the caller's transaction, and each rule is a
/// maximum over what was received, so the ledger does not depend on the order of delivery.
enum SQLiteAppStoreWriter {
    /// Applies one delivery; `sourceID` is its inbox event id (the tie-breaker of equal dates),
    /// `receivedAt` (Unix ms) when it is applied.
    static func apply(
        _ delivery: AppStoreDelivery, environment: String, sourceID: String, receivedAt: Int64, db: Database
    ) throws -> ApplyEffect {
        guard let plan = AppStoreApplyPlan(delivery) else { return .recorded }
        let original = plan.originalTransactionID
        var changed = false
        for step in plan.steps {
            switch step {
            case .transaction(let transaction, let reversal):
                changed = try upsert(transaction, environment: environment, sourceID: sourceID, reversal: reversal, db: db) || changed
            case .renewal(let renewal):
                changed = try upsert(renewal, environment: environment, sourceID: sourceID, db: db) || changed
            case .notification(let notification):
                changed = try record(notification, original: original, environment: environment, db: db) || changed
            case .refreshSubscription:
                try refreshSubscription(environment: environment, original: original, db: db)
            case .tie(let user, let rule):
                _ = try tie(environment: environment, original: original, user: user, rule: rule, sourceID: sourceID, db: db)
            case .tieByAccountToken:
                try tieByAccountToken(environment: environment, original: original, db: db)
            case .consumptionRequest(let notification, let transaction):
                try SQLiteAppStoreConsumption.insert(
                    notification, transaction: transaction, environment: environment, receivedAt: receivedAt, db: db)
            }
        }
        return AppStoreApplyPlan.effect(changed: changed)
    }

    // MARK: - Transactions (rules 1 to 3)

    /// Merges one transaction snapshot (``AppStoreLedgerRows/plan(_:held:environment:sourceID:reversal:)``);
    /// returns whether the ledger changed.
    static func upsert(_ transaction: AppStoreTransaction, environment: String, sourceID: String, reversal: Bool, db: Database) throws -> Bool {
        let held = try Row.fetchOne(
            db.cachedStatement(sql: AppStoreLedgerRows.heldTransactionSQL), arguments: [environment, transaction.transactionID]
        ).map { row in
            AppStoreLedgerRows.HeldTransaction(
                signedDate: row[0], sourceID: row[1], revocation: AppStoreRevocation(revokedSignedDate: row[2], reversedSignedDate: row[3]),
                isUpgraded: (row[4] as Bool?) ?? false)
        }
        switch AppStoreLedgerRows.plan(transaction, held: held, environment: environment, sourceID: sourceID, reversal: reversal) {
        case .unchanged:
            return false
        case .sticky(let values):
            try db.cachedStatement(sql: AppStoreLedgerRows.stickySQL).execute(arguments: arguments(values))
        case .upsert(let values):
            try db.cachedStatement(sql: AppStoreLedgerRows.upsertTransactionSQL).execute(arguments: arguments(values))
        }
        return true
    }

    private static func arguments(_ values: [LedgerValue]) -> StatementArguments {
        StatementArguments(values.map(\.databaseValue))
    }

    // MARK: - Renewal info (rule 4) and notifications (rule 6)

    static func ensureSubscription(environment: String, original: String, db: Database) throws {
        try db.cachedStatement(sql: AppStoreLedgerRows.ensureSubscriptionSQL).execute(arguments: [environment, original])
    }

    /// Takes the renewal info if it is the newest; returns whether it was.
    static func upsert(_ renewal: AppStoreRenewalInfo, environment: String, sourceID: String, db: Database) throws -> Bool {
        try ensureSubscription(environment: environment, original: renewal.originalTransactionID, db: db)
        try db.cachedStatement(sql: AppStoreLedgerRows.renewalSQL)
            .execute(arguments: arguments(AppStoreLedgerRows.renewalValues(renewal, environment: environment, sourceID: sourceID)))
        return db.changesCount > 0
    }

    /// Takes the notification's type, subtype and status if it is the newest; returns whether it was.
    static func record(_ notification: AppStoreNotification, original: String, environment: String, db: Database) throws -> Bool {
        try ensureSubscription(environment: environment, original: original, db: db)
        try db.cachedStatement(sql: AppStoreLedgerRows.notificationSQL)
            .execute(arguments: arguments(AppStoreLedgerRows.notificationValues(notification, original: original, environment: environment)))
        return db.changesCount > 0
    }

    // MARK: - The subscription (rule 5)

    /// Recomputes the subscription's transaction-derived columns and its status from the set of
    /// its transactions and its latest renewal info.
    static func refreshSubscription(environment: String, original: String, db: Database) throws {
        try ensureSubscription(environment: environment, original: original, db: db)
        guard
            let current = try Row.fetchOne(
                db.cachedStatement(sql: AppStoreLedgerRows.currentTransactionSQL), arguments: [environment, original])
        else { return }
        let token = try String.fetchOne(db.cachedStatement(sql: AppStoreLedgerRows.accountTokenSQL), arguments: [environment, original])
        try db.cachedStatement(sql: AppStoreLedgerRows.refreshSQL).execute(
            arguments: StatementArguments(Array(current.databaseValues)) + [token, environment, original])
        // Apple's status as of the latest signed data billingd holds: deterministic, so that a
        // replay gives the same row. The service API judges by the dates at read time.
        guard let record = try SQLiteAppStore.record(environment: environment, original: original, db: db) else { return }
        let asOf = try Int64.fetchOne(
            db.cachedStatement(sql: """
                SELECT MAX(COALESCE((SELECT MAX(vSignedDate) FROM appStoreTransaction WHERE environment = ?1 AND originalTransactionID = ?2), 0),
                    COALESCE(renewalSignedDate, 0), COALESCE(lastNotificationSignedDate, 0))
                FROM appStoreSubscription WHERE environment = ?1 AND originalTransactionID = ?2
                """),
            arguments: [environment, original]) ?? 0
        try db.cachedStatement(sql: AppStoreLedgerRows.statusSQL)
            .execute(arguments: [record.status(now: asOf).rawValue, environment, original])
    }

    // MARK: - Owners

    /// Ties an original transaction to the user who reported it, under `rule` when another user
    /// owns it already.
    static func tie(
        environment: String, original: String, user: String, rule: AppStoreOwnershipRule, sourceID: String, db: Database
    ) throws -> AppStoreTie {
        if let owner = try owner(environment: environment, original: original, db: db) {
            if owner == user { return .owned }
            guard rule == .transfer else { return .ownedByOther(owner) }
        }
        try db.cachedStatement(sql: AppStoreLedgerRows.tieSQL).execute(arguments: [environment, original, user, sourceID])
        return .owned
    }

    static func owner(environment: String, original: String, db: Database) throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: AppStoreLedgerRows.ownerSQL), arguments: [environment, original])
    }

    /// Ties an original transaction nobody owns yet to the user whose appAccountToken it carries.
    static func tieByAccountToken(environment: String, original: String, db: Database) throws {
        try db.cachedStatement(sql: AppStoreLedgerRows.tieByAccountTokenSQL).execute(arguments: [environment, original])
    }
}
