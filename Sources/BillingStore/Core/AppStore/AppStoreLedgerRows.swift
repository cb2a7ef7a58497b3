import BillingCore

/// What App Store data makes of the App Store ledger's rows, the same on every backend: the
/// statements (spelled with `?` placeholders in SQL both dialects read alike, except where noted),
/// the values they bind, and the merge of a transaction snapshot with the held one under the
/// rules of BillingCore's ``AppStoreVersion``. The SQLite and PostgreSQL writers only run them.
enum AppStoreLedgerRows {
    /// What the held row of a transaction says about the versions it merged.
    struct HeldTransaction {
        let signedDate: Int64
        let sourceID: String
        let revocation: AppStoreRevocation
        let isUpgraded: Bool
    }

    static let heldTransactionSQL = """
        SELECT vSignedDate, vSourceID, revokedSignedDate, reversedSignedDate, isUpgraded
        FROM appStoreTransaction WHERE environment = ? AND transactionID = ?
        """

    /// What to write for one transaction snapshot.
    enum TransactionPlan: Equatable {
        /// Nothing changes.
        case unchanged
        /// An older snapshot moved only the sticky facts (rules 2 and 3): ``stickySQL`` with these values.
        case sticky([LedgerValue])
        /// The newest snapshot: ``upsertTransactionSQL`` with these values.
        case upsert([LedgerValue])
    }

    /// Merges a transaction snapshot with the held row (rules 1 to 3).
    static func plan(
        _ transaction: AppStoreTransaction, held: HeldTransaction?, environment: String, sourceID: String, reversal: Bool
    ) -> TransactionPlan {
        let incoming = AppStoreVersion(signedDate: transaction.signedDate, sourceID: sourceID)
        let heldRevocation = held?.revocation ?? AppStoreRevocation()
        let revocation = heldRevocation.merging(transaction, reversal: reversal)
        let heldUpgraded = held?.isUpgraded ?? false
        let upgraded = heldUpgraded || transaction.isUpgraded
        let takesRevocationFields = transaction.isRevoked && revocation.revokedSignedDate == transaction.signedDate
            && revocation != heldRevocation
        let key: [LedgerValue] = [.text(environment), .text(transaction.transactionID)]

        if let held, AppStoreVersion(signedDate: held.signedDate, sourceID: held.sourceID) >= incoming {
            guard revocation != heldRevocation || upgraded != heldUpgraded else { return .unchanged }
            return .sticky([
                revocation.revokedSignedDate.ledgerValue, revocation.reversedSignedDate.ledgerValue, .boolean(revocation.isRevoked),
                .boolean(upgraded), .boolean(takesRevocationFields), transaction.revocationDate.ledgerValue,
                .boolean(takesRevocationFields), transaction.revocationReason.ledgerValue,
            ] + key)
        }
        // The newest snapshot: its fields, with the sticky facts merged. Its own revocation fields
        // stand when it carries one; otherwise the held ones stay (a later copy without the
        // revocation does not erase when and why it happened).
        let ownRevocation = takesRevocationFields || held == nil
        return .upsert(key + [
            .text(transaction.originalTransactionID), transaction.webOrderLineItemID.ledgerValue, .text(transaction.productID),
            transaction.subscriptionGroupIdentifier.ledgerValue, transaction.type.ledgerValue, transaction.purchaseDate.ledgerValue,
            transaction.originalPurchaseDate.ledgerValue, transaction.expiresDate.ledgerValue, transaction.quantity.ledgerValue,
            .boolean(upgraded), .boolean(revocation.isRevoked),
            ownRevocation ? transaction.revocationDate.ledgerValue : .null,
            ownRevocation ? transaction.revocationReason.ledgerValue : .null,
            revocation.revokedSignedDate.ledgerValue, revocation.reversedSignedDate.ledgerValue, transaction.offerType.ledgerValue,
            transaction.offerIdentifier.ledgerValue, transaction.inAppOwnershipType.ledgerValue, transaction.appAccountToken.ledgerValue,
            transaction.transactionReason.ledgerValue, transaction.storefront.ledgerValue, transaction.price.ledgerValue,
            transaction.currency.ledgerValue, .integer(transaction.signedDate), .text(sourceID), .blob(StoredJSON.encode(transaction.json)[...]),
        ])
    }

    static let stickySQL = """
        UPDATE appStoreTransaction SET revokedSignedDate = ?, reversedSignedDate = ?, revoked = ?, isUpgraded = ?,
            revocationDate = CASE WHEN ? THEN ? ELSE revocationDate END,
            revocationReason = CASE WHEN ? THEN ? ELSE revocationReason END
        WHERE environment = ? AND transactionID = ?
        """

    static let upsertTransactionSQL = """
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
        """

    // MARK: - Renewal info (rule 4) and notifications (rule 6)

    static let ensureSubscriptionSQL =
        "INSERT INTO appStoreSubscription (environment, originalTransactionID) VALUES (?, ?) ON CONFLICT DO NOTHING"

    /// Takes the renewal info if it is the newest; it changed a row exactly when it was.
    static let renewalSQL = """
        UPDATE appStoreSubscription SET autoRenewStatus = ?, autoRenewProductID = ?, expirationIntent = ?,
            isInBillingRetryPeriod = ?, gracePeriodExpiresDate = ?, renewalDate = ?, renewalSignedDate = ?,
            renewalSourceID = ?, renewalRaw = ?
        WHERE environment = ? AND originalTransactionID = ?
            AND (renewalSignedDate IS NULL OR renewalSignedDate < ? OR (renewalSignedDate = ? AND renewalSourceID < ?))
        """

    static func renewalValues(_ renewal: AppStoreRenewalInfo, environment: String, sourceID: String) -> [LedgerValue] {
        [
            renewal.autoRenewStatus.ledgerValue, renewal.autoRenewProductID.ledgerValue, renewal.expirationIntent.ledgerValue,
            .boolean(renewal.isInBillingRetryPeriod ?? false), renewal.gracePeriodExpiresDate.ledgerValue,
            renewal.renewalDate.ledgerValue, .integer(renewal.signedDate), .text(sourceID), .blob(StoredJSON.encode(renewal.json)[...]),
            .text(environment), .text(renewal.originalTransactionID), .integer(renewal.signedDate), .integer(renewal.signedDate),
            .text(sourceID),
        ]
    }

    /// Takes the notification's type, subtype and status if it is the newest; it changed a row
    /// exactly when it was.
    static let notificationSQL = """
        UPDATE appStoreSubscription SET lastNotificationType = ?, lastNotificationSubtype = ?, lastNotificationStatus = ?,
            lastNotificationSignedDate = ?, lastNotificationUUID = ?
        WHERE environment = ? AND originalTransactionID = ?
            AND (lastNotificationSignedDate IS NULL OR lastNotificationSignedDate < ?
                OR (lastNotificationSignedDate = ? AND lastNotificationUUID < ?))
        """

    static func notificationValues(_ notification: AppStoreNotification, original: String, environment: String) -> [LedgerValue] {
        [
            .text(notification.notificationType.rawValue), notification.subtype.map(\.rawValue).ledgerValue, notification.status.ledgerValue,
            .integer(notification.signedDate), .text(notification.notificationUUID), .text(environment), .text(original),
            .integer(notification.signedDate), .integer(notification.signedDate), .text(notification.notificationUUID),
        ]
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

    /// The appAccountToken of the latest transaction that carries one.
    static let accountTokenSQL = """
        SELECT appAccountToken FROM appStoreTransaction
        WHERE environment = ? AND originalTransactionID = ? AND appAccountToken IS NOT NULL
        ORDER BY vSignedDate DESC, vSourceID DESC LIMIT 1
        """

    /// Copies the current transaction's columns (the 13 of ``currentTransactionSQL``, then the
    /// token) into the subscription.
    static let refreshSQL = """
        UPDATE appStoreSubscription SET transactionID = ?, productID = ?, type = ?, subscriptionGroupIdentifier = ?,
            purchaseDate = ?, originalPurchaseDate = ?, expiresDate = ?, revoked = ?, revocationDate = ?, offerType = ?,
            price = ?, currency = ?, inAppOwnershipType = ?, appAccountToken = ?
        WHERE environment = ? AND originalTransactionID = ?
        """

    static let statusSQL = "UPDATE appStoreSubscription SET status = ? WHERE environment = ? AND originalTransactionID = ?"

    // MARK: - Owners

    static let ownerSQL = "SELECT appUserID FROM appStoreOwner WHERE environment = ? AND originalTransactionID = ?"
    /// The original transactions tied to a user in an environment (the `appStoreOwner_user` index).
    static let ownedOriginalsSQL = "SELECT originalTransactionID FROM appStoreOwner WHERE appUserID = ? AND environment = ?"

    static let tieSQL = """
        INSERT INTO appStoreOwner (environment, originalTransactionID, appUserID, source, sourceID) VALUES (?, ?, ?, 'app', ?)
        ON CONFLICT (environment, originalTransactionID) DO UPDATE SET appUserID = excluded.appUserID,
            source = excluded.source, sourceID = excluded.sourceID
        """

    /// Ties an original transaction nobody owns yet to the user whose appAccountToken it carries
    /// (the token is the tie's source id: the same whichever notification made it).
    static let tieByAccountTokenSQL = """
        INSERT INTO appStoreOwner (environment, originalTransactionID, appUserID, source, sourceID)
        SELECT s.environment, s.originalTransactionID, t.appUserID, 'account_token', t.token
        FROM appStoreSubscription s JOIN appStoreAccountToken t ON t.token = s.appAccountToken
        WHERE s.environment = ? AND s.originalTransactionID = ?
        ON CONFLICT DO NOTHING
        """
}

/// What happened to an app user's claim on a purchase.
enum AppStoreTie: Equatable {
    /// The user owns it now (or already did).
    case owned
    /// Another user owns it and the rule keeps it with them.
    case ownedByOther(String)
}

/// Reads of the App Store ledger that both backends run: the columns of a subscription record,
/// its decoding, and the statement of a user's purchases.
extension AppStoreLedgerRows {
    /// The columns of an ``AppStoreSubscriptionRecord``, in the order ``record(from:)`` reads them.
    static let recordColumns = """
        s.originalTransactionID, s.environment, s.transactionID, s.productID, s.type, s.subscriptionGroupIdentifier,
        s.purchaseDate, s.originalPurchaseDate, s.expiresDate, s.revoked, s.revocationDate, s.autoRenewStatus,
        s.autoRenewProductID, s.expirationIntent, s.isInBillingRetryPeriod, s.gracePeriodExpiresDate, s.offerType, s.price,
        s.currency, s.inAppOwnershipType
        """

    static func record(from row: some LedgerColumnReading) -> AppStoreSubscriptionRecord? {
        guard let original = row.string(0), let environment = row.string(1), let transaction = row.string(2),
            let product = row.string(3)
        else { return nil }
        return AppStoreSubscriptionRecord(
            originalTransactionID: original, environment: environment, transactionID: transaction, productID: product,
            type: row.string(4), subscriptionGroupIdentifier: row.string(5), purchaseDate: row.int64(6),
            originalPurchaseDate: row.int64(7), expiresDate: row.int64(8), revoked: row.bool(9), revocationDate: row.int64(10),
            autoRenewStatus: row.int64(11).map { $0 != 0 }, autoRenewProductID: row.string(12), expirationIntent: row.int64(13),
            isInBillingRetryPeriod: row.bool(14), gracePeriodExpiresDate: row.int64(15), offerType: row.int64(16),
            price: row.int64(17), currency: row.string(18), inAppOwnershipType: row.string(19))
    }

    /// The environments of a mode: Production is live; the others are test.
    static func environmentsSQL(livemode: Bool) -> String {
        livemode ? "s.environment = 'Production'" : "s.environment <> 'Production'"
    }

    /// Every App Store purchase tied to a user (the one binding) in one mode.
    static func subscriptionsSQL(livemode: Bool) -> String {
        """
        SELECT \(recordColumns) FROM appStoreOwner o
        JOIN appStoreSubscription s ON s.environment = o.environment AND s.originalTransactionID = o.originalTransactionID
        WHERE o.appUserID = ? AND \(environmentsSQL(livemode: livemode)) AND s.transactionID IS NOT NULL
        ORDER BY s.environment, s.originalTransactionID
        """
    }
}

extension AppStoreLedgerRows {
    /// Every transaction of a user's purchases in one mode that was bought with an introductory
    /// offer (`offerType` 1), oldest first: what introductory-offer eligibility reads.
    static func introductoryOffersSQL(livemode: Bool) -> String {
        """
        SELECT s.environment, s.originalTransactionID, s.transactionID, s.productID, s.subscriptionGroupIdentifier, s.purchaseDate
        FROM appStoreOwner o
        JOIN appStoreTransaction s ON s.environment = o.environment AND s.originalTransactionID = o.originalTransactionID
        WHERE o.appUserID = ? AND \(environmentsSQL(livemode: livemode)) AND s.offerType = 1
        ORDER BY s.purchaseDate, s.environment, s.transactionID
        """
    }

    static func introductoryOffer(from row: some LedgerColumnReading) -> AppStoreIntroductoryOffer? {
        guard let environment = row.string(0), let original = row.string(1), let transaction = row.string(2), let product = row.string(3)
        else { return nil }
        return AppStoreIntroductoryOffer(
            environment: environment, originalTransactionID: original, transactionID: transaction, productID: product,
            subscriptionGroupIdentifier: row.string(4), purchaseDate: row.int64(5))
    }
}

extension AppAccountToken {
    /// The `meta` key under which a database keeps the namespace its account tokens derive from.
    static let namespaceKey = "appstore_account_token_namespace"

    /// The 16 bytes of a UUID spelled in hex.
    static func uuidBytes(_ text: String) -> [UInt8] {
        let hex = Array(text.utf8.filter { $0 != UInt8(ascii: "-") })
        return stride(from: 0, to: hex.count - 1, by: 2).map { index in
            UInt8(String(decoding: hex[index...index + 1], as: UTF8.self), radix: 16) ?? 0
        }
    }
}
