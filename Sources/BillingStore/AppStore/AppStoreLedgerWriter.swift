import BillingCore
import Foundation
import GRDB

/// Writes App Store data into the App Store ledger under the rules of BillingCore's
/// ``AppStoreVersion``: every method runs inside the caller's transaction, and each rule is a
/// maximum over what was received, so the ledger does not depend on the order of delivery.
enum AppStoreLedgerWriter {
    /// The inbox account of an App Store environment (see `registerAppStoreMigrations`).
    static func inboxAccount(_ environment: String) -> String { "appstore:" + environment }

    /// The environment of an App Store inbox row's account.
    static func environment(inboxAccount account: String) -> String {
        account.hasPrefix("appstore:") ? String(account.dropFirst("appstore:".count)) : account
    }

    /// What happened to an app user's claim on a purchase.
    enum Tie: Equatable {
        /// The user owns it now (or already did).
        case owned
        /// Another user owns it and the rule keeps it with them.
        case ownedByOther(String)
    }

    /// Applies one delivery; `sourceID` is its inbox event id (the tie-breaker of equal dates).
    static func apply(_ delivery: AppStoreDelivery, environment: String, sourceID: String, db: Database) throws -> ApplyEffect {
        switch delivery {
        case .notification(let notification):
            guard let original = notification.originalTransactionID else { return .recorded }
            var changed = false
            if let transaction = notification.transaction {
                changed = try upsert(transaction, environment: environment, sourceID: sourceID, reversal: notification.notificationType == "REFUND_REVERSED", db: db) || changed
            }
            if let renewal = notification.renewalInfo {
                changed = try upsert(renewal, environment: environment, sourceID: sourceID, db: db) || changed
            }
            changed = try record(notification, original: original, environment: environment, db: db) || changed
            try refreshSubscription(environment: environment, original: original, db: db)
            try tieByAccountToken(environment: environment, original: original, db: db)
            return changed ? .applied : .stale
        case .app(let report):
            let transaction = report.transaction
            let changed = try upsert(transaction, environment: environment, sourceID: sourceID, reversal: false, db: db)
            try refreshSubscription(environment: environment, original: transaction.originalTransactionID, db: db)
            _ = try tie(
                environment: environment, original: transaction.originalTransactionID, user: report.user, rule: report.ownership,
                sourceID: sourceID, db: db)
            return changed ? .applied : .stale
        case .server(let snapshot):
            let original = snapshot.transaction.originalTransactionID
            var changed = try upsert(snapshot.transaction, environment: environment, sourceID: sourceID, reversal: false, db: db)
            if let renewal = snapshot.renewalInfo {
                changed = try upsert(renewal, environment: environment, sourceID: sourceID, db: db) || changed
            }
            try refreshSubscription(environment: environment, original: original, db: db)
            try tieByAccountToken(environment: environment, original: original, db: db)
            return changed ? .applied : .stale
        }
    }

    // MARK: - Transactions (rules 1 to 3)

    /// Merges one transaction snapshot; returns whether the ledger changed.
    static func upsert(_ transaction: AppStoreTransaction, environment: String, sourceID: String, reversal: Bool, db: Database) throws -> Bool {
        let key: StatementArguments = [environment, transaction.transactionID]
        let held = try Row.fetchOne(
            db.cachedStatement(sql: """
                SELECT vSignedDate, vSourceID, revokedSignedDate, reversedSignedDate, isUpgraded
                FROM appStoreTransaction WHERE environment = ? AND transactionID = ?
                """),
            arguments: key)
        let incoming = AppStoreVersion(signedDate: transaction.signedDate, sourceID: sourceID)
        let heldRevocation = AppStoreRevocation(revokedSignedDate: held?[2], reversedSignedDate: held?[3])
        let revocation = heldRevocation.merging(transaction, reversal: reversal)
        let heldUpgraded: Bool = held?[4] ?? false
        let upgraded = heldUpgraded || transaction.isUpgraded
        let takesRevocationFields = transaction.isRevoked && revocation.revokedSignedDate == transaction.signedDate
            && revocation != heldRevocation

        if let held, AppStoreVersion(signedDate: held[0], sourceID: held[1]) >= incoming {
            // An older snapshot: only the sticky facts (rules 2 and 3) may still move.
            guard revocation != heldRevocation || upgraded != heldUpgraded else { return false }
            try db.cachedStatement(sql: """
                UPDATE appStoreTransaction SET revokedSignedDate = ?, reversedSignedDate = ?, revoked = ?, isUpgraded = ?,
                    revocationDate = CASE WHEN ? THEN ? ELSE revocationDate END,
                    revocationReason = CASE WHEN ? THEN ? ELSE revocationReason END
                WHERE environment = ? AND transactionID = ?
                """).execute(arguments: [
                    revocation.revokedSignedDate, revocation.reversedSignedDate, revocation.isRevoked, upgraded,
                    takesRevocationFields, transaction.revocationDate, takesRevocationFields, transaction.revocationReason,
                ] + key)
            return true
        }
        // The newest snapshot: its fields, with the sticky facts merged. Its own revocation fields
        // stand when it carries one; otherwise the held ones stay (a later copy without the
        // revocation does not erase when and why it happened).
        try db.cachedStatement(sql: """
            INSERT INTO appStoreTransaction (environment, transactionID, originalTransactionID, webOrderLineItemID, productID,
                subscriptionGroupIdentifier, type, purchaseDate, originalPurchaseDate, expiresDate, quantity, isUpgraded,
                revoked, revocationDate, revocationReason, revokedSignedDate, reversedSignedDate, offerType, offerIdentifier,
                inAppOwnershipType, appAccountToken, transactionReason, storefront, price, currency, vSignedDate, vSourceID, raw)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (environment, transactionID) DO UPDATE SET
                originalTransactionID = excluded.originalTransactionID, webOrderLineItemID = excluded.webOrderLineItemID,
                productID = excluded.productID, subscriptionGroupIdentifier = excluded.subscriptionGroupIdentifier,
                type = excluded.type, purchaseDate = excluded.purchaseDate, originalPurchaseDate = excluded.originalPurchaseDate,
                expiresDate = excluded.expiresDate, quantity = excluded.quantity, isUpgraded = excluded.isUpgraded,
                revoked = excluded.revoked,
                revocationDate = COALESCE(excluded.revocationDate, appStoreTransaction.revocationDate),
                revocationReason = COALESCE(excluded.revocationReason, appStoreTransaction.revocationReason),
                revokedSignedDate = excluded.revokedSignedDate, reversedSignedDate = excluded.reversedSignedDate,
                offerType = excluded.offerType, offerIdentifier = excluded.offerIdentifier,
                inAppOwnershipType = excluded.inAppOwnershipType,
                appAccountToken = COALESCE(excluded.appAccountToken, appStoreTransaction.appAccountToken),
                transactionReason = excluded.transactionReason, storefront = excluded.storefront, price = excluded.price,
                currency = excluded.currency, vSignedDate = excluded.vSignedDate, vSourceID = excluded.vSourceID, raw = excluded.raw
            """).execute(arguments: [
                environment, transaction.transactionID, transaction.originalTransactionID, transaction.webOrderLineItemID,
                transaction.productID, transaction.subscriptionGroupIdentifier, transaction.type, transaction.purchaseDate,
                transaction.originalPurchaseDate, transaction.expiresDate, transaction.quantity, upgraded, revocation.isRevoked,
                takesRevocationFields || held == nil ? transaction.revocationDate : nil,
                takesRevocationFields || held == nil ? transaction.revocationReason : nil,
                revocation.revokedSignedDate, revocation.reversedSignedDate, transaction.offerType, transaction.offerIdentifier,
                transaction.inAppOwnershipType, transaction.appAccountToken, transaction.transactionReason, transaction.storefront,
                transaction.price, transaction.currency, transaction.signedDate, sourceID, Data(transaction.json),
            ])
        return true
    }

    // MARK: - Renewal info (rule 4) and notifications (rule 6)

    static func ensureSubscription(environment: String, original: String, db: Database) throws {
        try db.cachedStatement(sql: "INSERT OR IGNORE INTO appStoreSubscription (environment, originalTransactionID) VALUES (?, ?)")
            .execute(arguments: [environment, original])
    }

    /// Takes the renewal info if it is the newest; returns whether it was.
    static func upsert(_ renewal: AppStoreRenewalInfo, environment: String, sourceID: String, db: Database) throws -> Bool {
        try ensureSubscription(environment: environment, original: renewal.originalTransactionID, db: db)
        try db.cachedStatement(sql: """
            UPDATE appStoreSubscription SET autoRenewStatus = ?, autoRenewProductID = ?, expirationIntent = ?,
                isInBillingRetryPeriod = ?, gracePeriodExpiresDate = ?, renewalDate = ?, renewalSignedDate = ?,
                renewalSourceID = ?, renewalRaw = ?
            WHERE environment = ? AND originalTransactionID = ?
                AND (renewalSignedDate IS NULL OR renewalSignedDate < ? OR (renewalSignedDate = ? AND renewalSourceID < ?))
            """).execute(arguments: [
                renewal.autoRenewStatus, renewal.autoRenewProductID, renewal.expirationIntent,
                renewal.isInBillingRetryPeriod ?? false, renewal.gracePeriodExpiresDate, renewal.renewalDate, renewal.signedDate,
                sourceID, Data(renewal.json), environment, renewal.originalTransactionID, renewal.signedDate, renewal.signedDate,
                sourceID,
            ])
        return db.changesCount > 0
    }

    /// Takes the notification's type, subtype and status if it is the newest; returns whether it was.
    static func record(_ notification: AppStoreNotification, original: String, environment: String, db: Database) throws -> Bool {
        try ensureSubscription(environment: environment, original: original, db: db)
        try db.cachedStatement(sql: """
            UPDATE appStoreSubscription SET lastNotificationType = ?, lastNotificationSubtype = ?, lastNotificationStatus = ?,
                lastNotificationSignedDate = ?, lastNotificationUUID = ?
            WHERE environment = ? AND originalTransactionID = ?
                AND (lastNotificationSignedDate IS NULL OR lastNotificationSignedDate < ?
                    OR (lastNotificationSignedDate = ? AND lastNotificationUUID < ?))
            """).execute(arguments: [
                notification.notificationType, notification.subtype, notification.status, notification.signedDate,
                notification.notificationUUID, environment, original, notification.signedDate, notification.signedDate,
                notification.notificationUUID,
            ])
        return db.changesCount > 0
    }

    // MARK: - The subscription (rule 5)

    /// The current transaction: the latest-expiring one that is neither revoked nor upgraded
    /// away; if every one is, the latest of them (so a refunded purchase shows as revoked).
    static let currentTransactionSQL = """
        SELECT transactionID, productID, type, subscriptionGroupIdentifier, purchaseDate, originalPurchaseDate, expiresDate,
            revoked, revocationDate, offerType, price, currency, inAppOwnershipType
        FROM appStoreTransaction WHERE environment = ? AND originalTransactionID = ?
        ORDER BY (revoked OR isUpgraded), COALESCE(expiresDate, purchaseDate, 0) DESC, COALESCE(purchaseDate, 0) DESC,
            transactionID DESC
        LIMIT 1
        """

    /// Recomputes the subscription's transaction-derived columns and its status from the set of
    /// its transactions and its latest renewal info.
    static func refreshSubscription(environment: String, original: String, db: Database) throws {
        try ensureSubscription(environment: environment, original: original, db: db)
        guard let current = try Row.fetchOne(db.cachedStatement(sql: currentTransactionSQL), arguments: [environment, original]) else {
            return
        }
        let token = try String.fetchOne(
            db.cachedStatement(sql: """
                SELECT appAccountToken FROM appStoreTransaction
                WHERE environment = ? AND originalTransactionID = ? AND appAccountToken IS NOT NULL
                ORDER BY vSignedDate DESC, vSourceID DESC LIMIT 1
                """),
            arguments: [environment, original])
        try db.cachedStatement(sql: """
            UPDATE appStoreSubscription SET transactionID = ?, productID = ?, type = ?, subscriptionGroupIdentifier = ?,
                purchaseDate = ?, originalPurchaseDate = ?, expiresDate = ?, revoked = ?, revocationDate = ?, offerType = ?,
                price = ?, currency = ?, inAppOwnershipType = ?, appAccountToken = ?
            WHERE environment = ? AND originalTransactionID = ?
            """).execute(arguments: [
                current[0] as String, current[1] as String, current[2] as String?, current[3] as String?, current[4] as Int64?,
                current[5] as Int64?, current[6] as Int64?, current[7] as Bool, current[8] as Int64?, current[9] as Int64?,
                current[10] as Int64?, current[11] as String?, current[12] as String?, token, environment, original,
            ])
        // Apple's status as of the latest signed data billingd holds: deterministic, so that a
        // replay gives the same row. The service API judges by the dates at read time.
        guard let record = try AppStoreLedgerReads.record(environment: environment, original: original, db: db) else { return }
        let asOf = try Int64.fetchOne(
            db.cachedStatement(sql: """
                SELECT MAX(COALESCE((SELECT MAX(vSignedDate) FROM appStoreTransaction WHERE environment = ?1 AND originalTransactionID = ?2), 0),
                    COALESCE(renewalSignedDate, 0), COALESCE(lastNotificationSignedDate, 0))
                FROM appStoreSubscription WHERE environment = ?1 AND originalTransactionID = ?2
                """),
            arguments: [environment, original]) ?? 0
        try db.cachedStatement(sql: "UPDATE appStoreSubscription SET status = ? WHERE environment = ? AND originalTransactionID = ?")
            .execute(arguments: [record.status(now: asOf).rawValue, environment, original])
    }

    // MARK: - Owners

    /// Ties an original transaction to the user who reported it, under `rule` when another user
    /// owns it already.
    static func tie(
        environment: String, original: String, user: String, rule: AppStoreOwnershipRule, sourceID: String, db: Database
    ) throws -> Tie {
        if let owner = try owner(environment: environment, original: original, db: db) {
            if owner == user { return .owned }
            guard rule == .transfer else { return .ownedByOther(owner) }
        }
        try db.cachedStatement(sql: """
            INSERT INTO appStoreOwner (environment, originalTransactionID, appUserID, source, sourceID) VALUES (?, ?, ?, 'app', ?)
            ON CONFLICT (environment, originalTransactionID) DO UPDATE SET appUserID = excluded.appUserID,
                source = excluded.source, sourceID = excluded.sourceID
            """).execute(arguments: [environment, original, user, sourceID])
        return .owned
    }

    static func owner(environment: String, original: String, db: Database) throws -> String? {
        try String.fetchOne(
            db.cachedStatement(sql: "SELECT appUserID FROM appStoreOwner WHERE environment = ? AND originalTransactionID = ?"),
            arguments: [environment, original])
    }

    /// Ties an original transaction nobody owns yet to the user whose appAccountToken it carries
    /// (the token is the tie's source id: the same whichever notification made it).
    static func tieByAccountToken(environment: String, original: String, db: Database) throws {
        try db.cachedStatement(sql: """
            INSERT OR IGNORE INTO appStoreOwner (environment, originalTransactionID, appUserID, source, sourceID)
            SELECT s.environment, s.originalTransactionID, t.appUserID, 'account_token', t.token
            FROM appStoreSubscription s JOIN appStoreAccountToken t ON t.token = s.appAccountToken
            WHERE s.environment = ? AND s.originalTransactionID = ?
            """).execute(arguments: [environment, original])
    }
}
