import GRDB

extension LedgerMigrations {
    /// The App Store ledger. Keys carry the environment (`Production` is live mode; `Sandbox`,
    /// `Xcode` and `LocalTesting` are test mode), so the environments never mix (invariant 4).
    ///
    /// In the inbox an App Store row is keyed by (`notificationUUID`, account, livemode) with
    /// account `appstore:<environment>`: Stripe accounts are '' or `acct_…`, so the two stores'
    /// keys never collide, and the unique key that deduplicates Stripe's redeliveries
    /// deduplicates Apple's as well.
    static func registerAppStoreMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v4-appstore") { db in
            try db.execute(sql: """
                ALTER TABLE inboxEvent ADD COLUMN subtype TEXT;

                -- Every transaction seen, keyed by its id. Fields come from the snapshot with the
                -- greatest signedDate (vSignedDate, then vSourceID); a revocation is sticky
                -- (revokedSignedDate) unless a later REFUND_REVERSED (reversedSignedDate)
                -- reinstated it: see BillingCore's AppStoreVersion.
                CREATE TABLE appStoreTransaction (
                    environment TEXT NOT NULL, transactionID TEXT NOT NULL,
                    originalTransactionID TEXT NOT NULL, webOrderLineItemID TEXT, productID TEXT NOT NULL,
                    subscriptionGroupIdentifier TEXT, type TEXT, purchaseDate INTEGER, originalPurchaseDate INTEGER,
                    expiresDate INTEGER, quantity INTEGER, isUpgraded BOOLEAN NOT NULL,
                    revoked BOOLEAN NOT NULL, revocationDate INTEGER, revocationReason INTEGER,
                    revokedSignedDate INTEGER, reversedSignedDate INTEGER,
                    offerType INTEGER, offerIdentifier TEXT, inAppOwnershipType TEXT, appAccountToken TEXT,
                    transactionReason TEXT, storefront TEXT, price INTEGER, currency TEXT,
                    vSignedDate INTEGER NOT NULL, vSourceID TEXT NOT NULL,
                    raw BLOB NOT NULL,
                    PRIMARY KEY (environment, transactionID)
                );
                CREATE INDEX appStoreTransaction_original ON appStoreTransaction(environment, originalTransactionID);

                -- One row per original transaction: the current transaction's product and period
                -- (derived from appStoreTransaction), the latest renewal info, the latest
                -- notification. `status` is Apple's view at the latest data; the service API
                -- judges by dates at read time.
                CREATE TABLE appStoreSubscription (
                    environment TEXT NOT NULL, originalTransactionID TEXT NOT NULL,
                    transactionID TEXT, productID TEXT, type TEXT, subscriptionGroupIdentifier TEXT,
                    purchaseDate INTEGER, originalPurchaseDate INTEGER, expiresDate INTEGER,
                    revoked BOOLEAN NOT NULL DEFAULT 0, revocationDate INTEGER, offerType INTEGER, price INTEGER,
                    currency TEXT, inAppOwnershipType TEXT, appAccountToken TEXT, status TEXT,
                    autoRenewStatus BOOLEAN, autoRenewProductID TEXT, expirationIntent INTEGER,
                    isInBillingRetryPeriod BOOLEAN NOT NULL DEFAULT 0, gracePeriodExpiresDate INTEGER, renewalDate INTEGER,
                    renewalSignedDate INTEGER, renewalSourceID TEXT, renewalRaw BLOB,
                    lastNotificationType TEXT, lastNotificationSubtype TEXT, lastNotificationStatus INTEGER,
                    lastNotificationSignedDate INTEGER, lastNotificationUUID TEXT,
                    PRIMARY KEY (environment, originalTransactionID)
                );

                -- Which app user owns an original transaction: reported by the app, or found
                -- through the appAccountToken billingd handed the user.
                CREATE TABLE appStoreOwner (
                    environment TEXT NOT NULL, originalTransactionID TEXT NOT NULL, appUserID TEXT NOT NULL,
                    source TEXT NOT NULL, sourceID TEXT NOT NULL,
                    PRIMARY KEY (environment, originalTransactionID)
                ) WITHOUT ROWID;
                CREATE INDEX appStoreOwner_user ON appStoreOwner(appUserID, environment, originalTransactionID);

                -- The appAccountToken handed to each user. Not a ledger table: replay keeps it,
                -- and re-derives ownership from it.
                CREATE TABLE appStoreAccountToken (
                    token TEXT PRIMARY KEY NOT NULL,
                    appUserID TEXT NOT NULL
                ) WITHOUT ROWID;
                CREATE INDEX appStoreAccountToken_user ON appStoreAccountToken(appUserID);
                """)
        }
    }

    static let appStoreLedgerTables = ["appStoreTransaction", "appStoreSubscription", "appStoreOwner"]
}
