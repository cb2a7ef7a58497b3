import GRDB

extension LedgerMigrations {
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

    /// The tables that `replay` empties and rebuilds from the inbox.
    static let ledgerTables = [
        "customer", "subscription", "subscriptionItem", "invoice", "invoiceLine", "paymentMethod", "price", "product",
        "checkoutSession", "entitlementSummary", "activeEntitlement", "invoicePayment", "userLink",
    ] + appStoreLedgerTables
}
