import BillingCore

/// What the revenue metrics keep of the ledger's changes, the same on every backend: the row of
/// a Stripe subscription snapshot's fact, the row of a refund, and the statements that write
/// them (both dialects read them alike). The SQLite and PostgreSQL writers only run them.
///
/// A subscription's facts are insert-only and keyed by the event (or reconcile fetch) that
/// carried the snapshot, whether or not it won the version guard: a late, older event is still
/// what the subscription was at its time. So every delivery order, with duplicates, gives the
/// same facts, and ``SubscriptionHistory/stripe(id:plan:snapshots:paidInvoices:)`` orders them.
enum MetricsFactRows {
    static let subscriptionFactTable = "stripeSubscriptionFact"

    /// The statement replay runs before it applies the inbox again: the facts of events go (the
    /// events give them back), those of reconcile's fetches stay (no event in the inbox holds them),
    /// and so do those of events whose body was pruned (``BodyRetentionStore``): replay does not
    /// apply them again, and their facts are still what the subscription was at their time.
    static let replayDeleteSQL = """
        DELETE FROM stripeSubscriptionFact WHERE vEventID NOT LIKE 'fetch:%'
            AND NOT EXISTS (
                SELECT 1 FROM inboxEvent e
                WHERE e.eventID = stripeSubscriptionFact.vEventID AND e.account = stripeSubscriptionFact.account
                    AND e.livemode = stripeSubscriptionFact.livemode
                    AND NOT EXISTS (SELECT 1 FROM inboxBody b WHERE b.seq = e.seq))
        """

    /// The columns of `stripeSubscriptionFact`, in the order ``subscriptionFact(_:account:livemode:)`` gives them.
    static let subscriptionFactColumns = [
        "account", "livemode", "subscription", "vEventID", "vDeleted", "vTerminal", "vCreated", "vTransition", "vRank",
        "status", "currency", "monthlyCurrency", "monthlyNumerator", "monthlyDenominator", "trialStart", "trialEnd", "price",
        "lookupKey", "product",
    ]

    /// The statement inserting one fact, with `?` placeholders; a fact already kept is left as it is.
    static let insertSubscriptionFactSQL =
        "INSERT INTO stripeSubscriptionFact (\(subscriptionFactColumns.joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: subscriptionFactColumns.count).joined(separator: ", "))) ON CONFLICT DO NOTHING"

    /// The fact a subscription snapshot makes, nil for a snapshot of another kind: its version,
    /// status, currency, monthly amount (exact: numerator and denominator of minor units, with
    /// the coupons that last forever), trial, and the price of its first licensed item with that
    /// price's lookup key and product (the plan catalog may name a tier by any of the three).
    static func subscriptionFact(_ snapshot: LedgerSnapshot, account: String, livemode: Bool) -> [LedgerValue]? {
        guard case .subscription(let subscription) = snapshot.object else { return nil }
        let monthly = subscription.monthlyAmount(discounts: snapshot.subscriptionDiscounts ?? SubscriptionDiscounts(forever: []))
        let (numerator, denominator) = monthly.map { storable($0.amount) } ?? (nil, nil)
        let version = snapshot.version
        let price = firstLicensedPrice(of: subscription)
        return [
            .text(account), .boolean(livemode), .text(subscription.id), .text(version.eventID), .boolean(version.deleted),
            .boolean(version.terminal), .integer(version.eventCreated), .integer(version.transitionAt), .integer(Int64(version.statusRank)),
            .text(subscription.status.rawValue), subscription.currency.ledgerValue, monthly?.currency.ledgerValue ?? .null,
            numerator.ledgerValue, denominator.ledgerValue, subscription.trialStart.ledgerValue, subscription.trialEnd.ledgerValue,
            price?.id.ledgerValue ?? .null, price?.lookupKey.ledgerValue ?? .null, price?.product?.id.ledgerValue ?? .null,
        ]
    }

    /// The price the plan catalog keys a subscription by: its first licensed recurring item's.
    static func firstLicensedPrice(of subscription: Subscription) -> Price? {
        subscription.items.first { $0.price?.recurring != nil && $0.price?.recurring?.usageType != "metered" }?.price
            ?? subscription.items.first?.price
    }

    /// An exact amount as two 64-bit integers. One that does not fit (an absurd quantity times a
    /// price) is kept as its per-subscription rounding over 1, which is the only figure the
    /// metrics take of it.
    static func storable(_ amount: ExactAmount) -> (Int64, Int64) {
        if let numerator = Int64(exactly: amount.numerator), let denominator = Int64(exactly: amount.denominator) {
            return (numerator, denominator)
        }
        return (amount.roundedHalfEven, 1)
    }

    /// The statement keeping the fact of a tombstone reconcile wrote (Stripe answered 404): a
    /// deleted snapshot at the fetch, with `?` placeholders for the fetch id, the fetch time,
    /// account, livemode and subscription id. Its other columns come from the ledger's row.
    static let goneSubscriptionFactSQL = """
        INSERT INTO stripeSubscriptionFact (\(subscriptionFactColumns.joined(separator: ", ")))
        SELECT account, livemode, id, ?, true, vTerminal, ?, vTransition, vRank, status, currency, NULL, NULL, NULL,
            trialStart, trialEnd, NULL, NULL, NULL
        FROM subscription WHERE account = ? AND livemode = ? AND id = ?
        ON CONFLICT DO NOTHING
        """

    // MARK: Refunds

    /// The columns of `stripeRefund`, in the order ``refundRow(_:account:livemode:)`` gives them.
    static let refundColumns = [
        "account", "livemode", "id", "amount", "currency", "charge", "paymentIntent", "status", "created", "vCreated", "vRank", "vEventID",
    ]

    /// The upsert of a refund's row under its version guard: a snapshot replaces the held one only
    /// when it is newer (by the event's time, then how far the refund got, then the event id), so
    /// the newest snapshot wins in every delivery order. `byteOrder` makes the event ids compare
    /// byte by byte, as SQLite's do: ` COLLATE "C"` on PostgreSQL, whose default collation is the
    /// locale's, so that both backends keep the same winner.
    static func upsertRefundSQL(byteOrder: String) -> String {
        """
        INSERT INTO stripeRefund (\(refundColumns.joined(separator: ", "))) VALUES (\(Array(repeating: "?", count: refundColumns.count).joined(separator: ", ")))
        ON CONFLICT (account, livemode, id) DO UPDATE SET \(refundColumns.dropFirst(3).map { "\($0) = excluded.\($0)" }.joined(separator: ", "))
        WHERE (excluded.vCreated, excluded.vRank, excluded.vEventID\(byteOrder)) > (stripeRefund.vCreated, stripeRefund.vRank, stripeRefund.vEventID\(byteOrder))
        """
    }

    /// A refund's row.
    static func refundRow(_ refund: RefundSnapshot, account: String, livemode: Bool) -> [LedgerValue] {
        let object = refund.refund
        return [
            .text(account), .boolean(livemode), .text(object.id), .integer(object.amount), .text(object.currency.lowercased()),
            object.charge?.id.ledgerValue ?? .null, object.paymentIntent?.id.ledgerValue ?? .null, object.status.ledgerValue,
            object.created.ledgerValue, .integer(refund.eventCreated), .integer(Int64(object.statusRank)), .text(refund.eventID),
        ]
    }
}

/// A refund as one event carried it, with the event's time and id (the refund's version).
struct RefundSnapshot: Sendable {
    let refund: Refund
    let eventCreated: Int64
    let eventID: String
}

extension MetricsFactRows {
    /// How a ledger from before the metrics gains its subscription facts, the same on both
    /// backends: every applied subscription event still in the inbox gives its fact as the
    /// applier would have written it, and a subscription whose row a reconcile fetch last wrote
    /// (no event in the inbox carried it) gives that fetch's fact from its row.
    enum Backfill {
        /// The applied inbox events of the types that carry a subscription, with `?` for the
        /// `applied` status and the type prefix: event id, account, livemode, type, created, body.
        /// It runs in a migration older than the bodies' compression (SQLite v19, PostgreSQL
        /// v17), so every body it reads is verbatim.
        static let eventsSQL = """
            SELECT e.eventID, e.account, e.livemode, e.type, e.created, b.body
            FROM inboxEvent e JOIN inboxBody b ON b.seq = e.seq
            WHERE e.status = ? AND e.type LIKE ?
            ORDER BY e.seq
            """
        static let eventTypePattern = "customer.subscription.%"

        /// The subscriptions whose row a reconcile fetch wrote: account, livemode, raw and version.
        static let fetchedRowsSQL = """
            SELECT account, livemode, raw, \(LedgerRows.versionColumns) FROM subscription WHERE vEventID LIKE 'fetch:%'
            """

        /// The fact of one stored event, nil when it carries no subscription the applier took.
        static func fact(eventID: String, account: String, livemode: Bool, type: String, created: Int64, body: [UInt8]) -> [LedgerValue]? {
            guard case .snapshot(.subscription) = EventRoute(eventType: type), let object = RawObjectLocator.object(in: body),
                let snapshot = try? LedgerSnapshot.decode(
                    kind: .subscription, deletion: false, eventType: type, eventID: eventID, eventCreated: created, objectJSON: object)
            else { return nil }
            return subscriptionFact(snapshot, account: account, livemode: livemode)
        }

        /// The fact of a row a reconcile fetch wrote, with the row's own version (a tombstone's too).
        static func fact(account: String, livemode: Bool, raw: [UInt8], version: SnapshotVersion) -> [LedgerValue]? {
            guard var fact = (try? LedgerSnapshot.decode(
                kind: .subscription, deletion: version.deleted, eventType: nil, eventID: version.eventID, eventCreated: version.eventCreated,
                objectJSON: (try? StoredJSON.decode(raw))?[...] ?? [])).flatMap({ subscriptionFact($0, account: account, livemode: livemode) })
            else { return nil }
            fact[4...8] = [
                .boolean(version.deleted), .boolean(version.terminal), .integer(version.eventCreated), .integer(version.transitionAt),
                .integer(Int64(version.statusRank)),
            ]
            return fact
        }
    }
}
