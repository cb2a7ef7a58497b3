import GRDB

extension SQLiteMigrations {
    /// The columns every ledger object carries: its key (account '' = platform, livemode, id),
    /// the version of the snapshot it holds (see BillingCore's SnapshotVersion) and whether
    /// reconcile should re-fetch it.
    static let versionColumns = """
        vDeleted BOOLEAN NOT NULL DEFAULT 0,
        vTerminal BOOLEAN NOT NULL DEFAULT 0,
        vCreated INTEGER NOT NULL,
        vTransition INTEGER NOT NULL DEFAULT 0,
        vRank INTEGER NOT NULL DEFAULT 0,
        vEventID TEXT NOT NULL,
        needsRefetch BOOLEAN NOT NULL DEFAULT 0
        """

    /// The ledger tables. Typed columns for what the service API, reconcile and finance read;
    /// `raw` keeps the latest object JSON exactly as Stripe sent it (none for payment methods:
    /// of a card only brand, last 4, expiry and fingerprint are kept). Money is INTEGER minor
    /// units beside its currency. Tables with `raw` are rowid tables (the primary key becomes a
    /// unique index): in a WITHOUT ROWID table every key seek and scan would walk the 5 KB
    /// records themselves; only the small child tables are WITHOUT ROWID.
    static func registerLedgerMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v2-ledger") { db in
            try db.execute(sql: """
                CREATE TABLE customer (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, id TEXT NOT NULL,
                    email TEXT, name TEXT, appUserID TEXT, currency TEXT, delinquent BOOLEAN,
                    defaultPaymentMethod TEXT, defaultSource TEXT, created INTEGER,
                    raw BLOB NOT NULL,
                    \(versionColumns),
                    PRIMARY KEY (account, livemode, id)
                );
                CREATE INDEX customer_appUser ON customer(appUserID) WHERE appUserID IS NOT NULL;

                CREATE TABLE subscription (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, id TEXT NOT NULL,
                    customer TEXT NOT NULL, status TEXT NOT NULL, currency TEXT,
                    cancelAtPeriodEnd BOOLEAN NOT NULL, cancelAt INTEGER, canceledAt INTEGER, endedAt INTEGER,
                    trialStart INTEGER, trialEnd INTEGER, currentPeriodStart INTEGER, currentPeriodEnd INTEGER,
                    startDate INTEGER, collectionMethod TEXT, defaultPaymentMethod TEXT, latestInvoice TEXT,
                    cancellationReason TEXT, pauseBehavior TEXT, created INTEGER,
                    raw BLOB NOT NULL,
                    \(versionColumns),
                    PRIMARY KEY (account, livemode, id)
                );
                CREATE INDEX subscription_customer ON subscription(account, livemode, customer);

                CREATE TABLE subscriptionItem (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, subscription TEXT NOT NULL, id TEXT NOT NULL,
                    price TEXT, product TEXT, lookupKey TEXT, quantity INTEGER, unitAmount INTEGER, currency TEXT,
                    interval TEXT, intervalCount INTEGER, currentPeriodStart INTEGER, currentPeriodEnd INTEGER,
                    PRIMARY KEY (account, livemode, subscription, id)
                ) WITHOUT ROWID;

                CREATE TABLE invoice (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, id TEXT NOT NULL,
                    number TEXT, customer TEXT, customerEmail TEXT, customerName TEXT, subscription TEXT,
                    status TEXT, currency TEXT NOT NULL,
                    subtotal INTEGER NOT NULL, discount INTEGER NOT NULL, tax INTEGER NOT NULL, total INTEGER NOT NULL,
                    amountDue INTEGER NOT NULL, amountPaid INTEGER NOT NULL, amountRemaining INTEGER NOT NULL,
                    created INTEGER, finalizedAt INTEGER, paidAt INTEGER, voidedAt INTEGER, markedUncollectibleAt INTEGER,
                    periodStart INTEGER, periodEnd INTEGER, dueDate INTEGER, billingReason TEXT, collectionMethod TEXT,
                    hostedInvoiceURL TEXT, invoicePDF TEXT, attemptCount INTEGER,
                    raw BLOB NOT NULL,
                    \(versionColumns),
                    PRIMARY KEY (account, livemode, id)
                );
                CREATE INDEX invoice_customer ON invoice(account, livemode, customer, created);
                CREATE INDEX invoice_created ON invoice(created, id);

                CREATE TABLE invoiceLine (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, invoice TEXT NOT NULL, position INTEGER NOT NULL,
                    id TEXT NOT NULL, amount INTEGER NOT NULL, currency TEXT NOT NULL, description TEXT,
                    quantity INTEGER, periodStart INTEGER, periodEnd INTEGER, price TEXT, subscription TEXT,
                    proration BOOLEAN NOT NULL,
                    PRIMARY KEY (account, livemode, invoice, position)
                ) WITHOUT ROWID;

                CREATE TABLE paymentMethod (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, id TEXT NOT NULL,
                    customer TEXT, type TEXT NOT NULL, brand TEXT, last4 TEXT, expMonth INTEGER, expYear INTEGER,
                    fingerprint TEXT, funding TEXT, country TEXT, created INTEGER,
                    \(versionColumns),
                    PRIMARY KEY (account, livemode, id)
                ) WITHOUT ROWID;
                CREATE INDEX paymentMethod_customer ON paymentMethod(account, livemode, customer);

                CREATE TABLE price (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, id TEXT NOT NULL,
                    product TEXT, active BOOLEAN, currency TEXT, unitAmount INTEGER, lookupKey TEXT, nickname TEXT,
                    type TEXT, interval TEXT, intervalCount INTEGER, created INTEGER,
                    raw BLOB NOT NULL,
                    \(versionColumns),
                    PRIMARY KEY (account, livemode, id)
                );

                CREATE TABLE product (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, id TEXT NOT NULL,
                    name TEXT, active BOOLEAN, description TEXT, defaultPrice TEXT, created INTEGER, updated INTEGER,
                    raw BLOB NOT NULL,
                    \(versionColumns),
                    PRIMARY KEY (account, livemode, id)
                );

                CREATE TABLE checkoutSession (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, id TEXT NOT NULL,
                    customer TEXT, clientReferenceID TEXT, status TEXT, mode TEXT, paymentStatus TEXT,
                    subscription TEXT, invoice TEXT, amountSubtotal INTEGER, amountTotal INTEGER, currency TEXT,
                    created INTEGER, expiresAt INTEGER, url TEXT,
                    raw BLOB NOT NULL,
                    \(versionColumns),
                    PRIMARY KEY (account, livemode, id)
                );

                CREATE TABLE entitlementSummary (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, id TEXT NOT NULL,
                    raw BLOB NOT NULL,
                    \(versionColumns),
                    PRIMARY KEY (account, livemode, id)
                );

                CREATE TABLE activeEntitlement (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, customer TEXT NOT NULL, lookupKey TEXT NOT NULL,
                    id TEXT NOT NULL, feature TEXT,
                    PRIMARY KEY (account, livemode, customer, lookupKey)
                ) WITHOUT ROWID;

                CREATE TABLE invoicePayment (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, id TEXT NOT NULL,
                    invoice TEXT, amountPaid INTEGER, amountRequested INTEGER, currency TEXT, status TEXT,
                    paidAt INTEGER, isDefault BOOLEAN, created INTEGER,
                    raw BLOB NOT NULL,
                    \(versionColumns),
                    PRIMARY KEY (account, livemode, id)
                );

                -- App users tied to Stripe customers, from customer.metadata.app_user_id and from
                -- checkout.session.client_reference_id. Links are only ever added.
                CREATE TABLE userLink (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, appUserID TEXT NOT NULL, customer TEXT NOT NULL,
                    source TEXT NOT NULL,
                    PRIMARY KEY (account, livemode, appUserID, customer)
                ) WITHOUT ROWID;
                CREATE INDEX userLink_customer ON userLink(account, livemode, customer);
                """)
        }
    }
}

extension SQLiteMigrations {
    /// Reconcile's own state: one row per run, the lease that keeps two runs (a cron job and the
    /// scheduler in `serve`, or two replicas) from overlapping, and the `/v1/events` cursor.
    static func registerReconcileMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v3-reconcile") { db in
            try db.execute(sql: """
                CREATE TABLE reconcileRun (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    mode TEXT NOT NULL,            -- 'full' or 'events'
                    holder TEXT NOT NULL,          -- host:pid that ran it
                    startedAt INTEGER NOT NULL,    -- unix seconds
                    finishedAt INTEGER,
                    outcome TEXT NOT NULL,         -- running, completed, failed, interrupted
                    dryRun BOOLEAN NOT NULL,
                    drift INTEGER NOT NULL DEFAULT 0,
                    repaired INTEGER NOT NULL DEFAULT 0,
                    recoveredEvents INTEGER NOT NULL DEFAULT 0,
                    objects INTEGER NOT NULL DEFAULT 0,
                    error TEXT,
                    report BLOB                    -- the JSON report of `reconcile --json`
                );
                CREATE INDEX reconcileRun_finished ON reconcileRun(mode, outcome, finishedAt);

                CREATE TABLE lease (
                    name TEXT PRIMARY KEY NOT NULL,
                    holder TEXT NOT NULL,
                    acquiredAt INTEGER NOT NULL,
                    expiresAt INTEGER NOT NULL
                );

                -- How far `/v1/events` has been walked, per account ('' = platform) and mode.
                CREATE TABLE eventCursor (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL,
                    created INTEGER NOT NULL,       -- newest event.created seen by a completed walk
                    walkedAt INTEGER NOT NULL,      -- when that walk completed
                    PRIMARY KEY (account, livemode)
                ) WITHOUT ROWID;
                """)
        }
    }
}

extension SQLiteMigrations {
    /// Covering indexes for the service API's status reads (`SQLiteUsers.billing`): a user's
    /// customers and their subscriptions are found without reading the rows themselves, which
    /// carry the objects' raw JSON (about 5 KB for a subscription). Halves the pages a status
    /// read touches (scripts/bench-api). The new subscription index starts with the columns of
    /// `subscription_customer`, which it replaces.
    static func registerServiceAPIMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v3-service-api") { db in
            try db.execute(sql: """
                CREATE INDEX customer_appUser_scope
                    ON customer(account, livemode, appUserID, id, vDeleted, created, defaultPaymentMethod)
                    WHERE appUserID IS NOT NULL;
                CREATE INDEX subscription_customer_status
                    ON subscription(account, livemode, customer, id, status, currency, cancelAtPeriodEnd, cancelAt,
                        canceledAt, endedAt, trialStart, trialEnd, currentPeriodStart, currentPeriodEnd, created,
                        latestInvoice, defaultPaymentMethod);
                DROP INDEX subscription_customer;
                """)
        }
    }
}

extension SQLiteMigrations {
    /// The App Store ledger. Keys carry the environment (`Production` is live mode; `Sandbox`,
    /// `Xcode` and `LocalTesting` are test mode), so the environments never mix (invariant 4).
    ///
    /// In the inbox an App Store row is keyed by (`notificationUUID`, account, livemode) with
    /// account `appstore:<environment>` (``InboxAccount``): Stripe accounts are '' or `acct_…`,
    /// so the two stores' keys never collide, and the unique key that deduplicates Stripe's
    /// redeliveries deduplicates Apple's as well.
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
}

extension SQLiteMigrations {
    /// Usage metering: every usage record (kept for idempotency, the Stripe report and
    /// reconcile), the running total of each counter's current period, and gauges.
    static func registerUsageMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v5-usage") { db in
            try db.execute(sql: """
                -- One row per accepted usage record. `seq` is billingd's id of the record (the
                -- Stripe meter event's identifier). `reportState` is NULL for meters that report
                -- nowhere, else pending, reported, failed or skipped (no Stripe customer).
                CREATE TABLE usageRecord (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, user TEXT NOT NULL, meter TEXT NOT NULL,
                    quantity INTEGER NOT NULL,
                    timestamp INTEGER NOT NULL,
                    idempotencyKey TEXT NOT NULL,
                    source TEXT NOT NULL,
                    recordedAt INTEGER NOT NULL,
                    stripeMeter TEXT,
                    reportState TEXT,
                    reportAttempts INTEGER NOT NULL DEFAULT 0,
                    reportNextAt INTEGER,
                    reportError TEXT,
                    reportedAt INTEGER,
                    stripeCustomer TEXT,
                    UNIQUE (account, livemode, user, meter, idempotencyKey)
                );
                CREATE INDEX usageRecord_time ON usageRecord(account, livemode, user, meter, timestamp, quantity);
                CREATE INDEX usageRecord_report ON usageRecord(reportState, seq) WHERE reportState IN ('pending', 'failed');

                -- The total of each counter over the period it was last used in, so that a
                -- consume reads one row instead of adding up the period's records. A request in
                -- another period recomputes it from usageRecord.
                CREATE TABLE usageTotal (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, user TEXT NOT NULL, meter TEXT NOT NULL,
                    periodStart INTEGER NOT NULL, periodEnd INTEGER NOT NULL, used INTEGER NOT NULL,
                    PRIMARY KEY (account, livemode, user, meter)
                ) WITHOUT ROWID;

                CREATE TABLE usageGauge (
                    account TEXT NOT NULL, livemode BOOLEAN NOT NULL, user TEXT NOT NULL, meter TEXT NOT NULL,
                    value INTEGER NOT NULL, updatedAt INTEGER NOT NULL,
                    PRIMARY KEY (account, livemode, user, meter)
                ) WITHOUT ROWID;
                """)
        }

        migrator.registerMigration("v6-usage-report") { db in
            try db.execute(sql: """
                -- The report to Stripe Billing Meters. Its times are Unix seconds, like `timestamp`
                -- and Stripe's: reportNextAt (when the record is due; set for every pending or
                -- retrying record, empty once reported or given up), reportedAt, and
                -- reportInFlightSince: the earliest attempt whose answer is unknown (a timeout, a
                -- 5xx, a crash), so that a resend is never made once Stripe's 24-hour identifier
                -- window may have passed. A record's meter event identifier is
                -- billingd-<namespace>-<seq>-<fingerprint> (MeterEventIdentifier; the namespace is in
                -- meta), not the bare seq: a restored backup hands seqs out again.
                ALTER TABLE usageRecord ADD COLUMN reportInFlightSince INTEGER;
                UPDATE usageRecord SET reportNextAt = recordedAt / 1000 WHERE reportState = 'pending' AND reportNextAt IS NULL;

                -- What is due, in order: the reporter walks it by (reportNextAt, seq). Records given
                -- up (failed, no reportNextAt) stay out of the range scan.
                DROP INDEX usageRecord_report;
                CREATE INDEX usageRecord_due ON usageRecord(reportNextAt, seq) WHERE reportState IN ('pending', 'failed');

                -- Records tied to a Stripe customer by time: reconcile compares them with Stripe's
                -- event summaries.
                CREATE INDEX usageRecord_customer ON usageRecord(livemode, timestamp) WHERE stripeCustomer IS NOT NULL;
                """)
        }
    }
}

extension SQLiteMigrations {
    /// The outbox: events for the app's backend, one row per event and endpoint, and the last
    /// view announced per user. Not ledger tables: `billingd replay` keeps both.
    static func registerOutboxMigrations(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v6-outbox") { db in
            try db.execute(sql: """
                -- `id` is the webhook-id (one per event, shared by its endpoints' rows); `userKey`
                -- orders a user's events per endpoint (mode, account, user).
                CREATE TABLE outboxEvent (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    id TEXT NOT NULL,
                    endpoint TEXT NOT NULL,
                    type TEXT NOT NULL,
                    account TEXT NOT NULL,
                    livemode BOOLEAN NOT NULL,
                    user TEXT NOT NULL,
                    userKey TEXT NOT NULL,
                    createdAt INTEGER NOT NULL,
                    payload BLOB NOT NULL,
                    status TEXT NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0,
                    nextAttemptAt INTEGER,
                    lastError TEXT,
                    deliveredAt INTEGER,
                    UNIQUE (id, endpoint)
                );
                CREATE INDEX outboxEvent_work ON outboxEvent(nextAttemptAt, seq) WHERE status IN ('pending', 'failed');
                CREATE INDEX outboxEvent_user ON outboxEvent(endpoint, userKey, seq) WHERE status IN ('pending', 'failed');
                CREATE INDEX outboxEvent_status ON outboxEvent(status, seq);

                -- The last state of each user's view the outbox diffed against (JSON of
                -- UserAccessState).
                CREATE TABLE outboxUserState (
                    account TEXT NOT NULL,
                    livemode BOOLEAN NOT NULL,
                    user TEXT NOT NULL,
                    state TEXT NOT NULL,
                    updatedAt INTEGER NOT NULL,
                    PRIMARY KEY (account, livemode, user)
                ) WITHOUT ROWID;

                -- The meters whose limit was announced reached, per period (0 for a gauge, cleared
                -- when it goes back under), so that usage.limit_reached goes out once.
                CREATE TABLE outboxUsageLimit (
                    account TEXT NOT NULL,
                    livemode BOOLEAN NOT NULL,
                    user TEXT NOT NULL,
                    meter TEXT NOT NULL,
                    periodStart INTEGER NOT NULL,
                    reachedAt INTEGER NOT NULL,
                    PRIMARY KEY (account, livemode, user, meter, periodStart)
                ) WITHOUT ROWID;

                -- Endpoints that answered 410 Gone, until `billingd outbox enable`.
                CREATE TABLE outboxEndpoint (
                    url TEXT PRIMARY KEY NOT NULL,
                    disabledAt INTEGER NOT NULL,
                    reason TEXT NOT NULL
                );
                """)
        }
        migrator.registerMigration("v7-outbox-review") { db in
            try db.execute(sql: """
                -- When time alone may next change the user's view (Unix ms): the end of what grants
                -- access; NULL when only a ledger change can. Views announced before this column
                -- existed are looked at once, at the first review.
                ALTER TABLE outboxUserState ADD COLUMN reviewAt INTEGER;
                UPDATE outboxUserState SET reviewAt = 0 WHERE json_extract(state, '$.entitled');
                CREATE INDEX outboxUserState_review ON outboxUserState(reviewAt) WHERE reviewAt IS NOT NULL;
                """)
        }
        migrator.registerMigration("v8-outbox-due") { db in
            try db.execute(sql: """
                -- The sender's work, per endpoint in the order it is due: a pass reads only what it
                -- sends, whatever the backlog, and a disabled endpoint's backlog is never walked.
                CREATE INDEX outboxEvent_due ON outboxEvent(endpoint, nextAttemptAt, seq) WHERE status IN ('pending', 'failed');
                DROP INDEX outboxEvent_work;
                """)
        }
    }
}
