import BillingCore

/// A user's timeline, written once for both backends: the statement of each source (spelled
/// with `?` placeholders, which PostgreSQL numbers), its row decoding, and the paging that
/// merges the sources. A backend only runs statements (``TimelineRows/Fetch``).
///
/// Every source is read by user through an index, in descending order of its own time column,
/// bounded by the cursor: a page costs a few index range reads per source whatever the user's
/// history or the ledger's size.
package enum TimelineRows {
    /// Runs one source's statement with its arguments and decodes each row.
    typealias Fetch = @Sendable (_ sql: String, _ arguments: [LedgerValue], _ item: @escaping @Sendable (any LedgerColumnReading) -> TimelineItem?)
        async throws -> [TimelineItem]

    /// One source of items. Its statement ends in `col >= ? AND col < ? ORDER BY col DESC … LIMIT ?`
    /// over its time column, in units of `scale` per second.
    struct Source: Sendable {
        var sql: String
        var arguments: [LedgerValue]
        var scale: Int64
        var item: @Sendable (any LedgerColumnReading) -> TimelineItem?
    }

    /// The page of `limit` items after `cursor`. Each source is read for the items of the
    /// cursor's second that follow it, and then `limit + 1` older ones; when a source fills that,
    /// its oldest second is read whole, so no item of a second a page ends in is passed over.
    static func page(
        of user: String, in scope: ServiceScope, limit: Int, after cursor: TimelineCursor?, now: Int64, fetch: Fetch
    ) async throws -> TimelinePage {
        precondition(limit > 0)
        var items: [TimelineItem] = []
        for source in sources(of: user, in: scope, now: now) {
            items += try await read(source, limit: limit + 1, after: cursor, fetch: fetch)
        }
        items.sort { $0.position > $1.position }
        guard items.count > limit else { return TimelinePage(items: items, nextCursor: nil) }
        let page = Array(items.prefix(limit))
        return TimelinePage(items: page, nextCursor: page.last?.position)
    }

    static func read(_ source: Source, limit: Int, after cursor: TimelineCursor?, fetch: Fetch) async throws -> [TimelineItem] {
        let everything = Int64(Int32.max)
        func rows(from lower: Int64?, to upper: Int64?, limit: Int64) async throws -> [TimelineItem] {
            let bounds: [LedgerValue] = [
                .integer(lower.map { $0 * source.scale } ?? .min), .integer(upper.map { $0 * source.scale } ?? .max), .integer(limit),
            ]
            return try await fetch(source.sql, source.arguments + bounds, source.item)
        }
        var items: [TimelineItem] = []
        if let cursor {
            items += try await rows(from: cursor.at, to: cursor.at + 1, limit: everything).filter { $0.position < cursor }
        }
        let older = try await rows(from: nil, to: cursor?.at, limit: Int64(limit))
        guard older.count >= limit, let oldest = older.map(\.at).min() else { return items + older }
        return items + older.filter { $0.at > oldest } + (try await rows(from: oldest, to: oldest + 1, limit: everything))
    }

    // MARK: - The sources

    static func sources(of user: String, in scope: ServiceScope, now: Int64) -> [Source] {
        let key: [LedgerValue] = [.text(scope.account), .boolean(scope.livemode)]
        let userKey = key + [.text(user)]
        let customers: [LedgerValue] = [.text(user)] + key + key + [.text(user)]
        var sources = [
            Source(sql: stripeEventsSQL, arguments: customers + key + key + key + key + userKey + key, scale: 1, item: stripeEvent),
            Source(sql: repairsSQL, arguments: customers + key, scale: 1, item: repair),
            Source(sql: grantsCreatedSQL, arguments: userKey, scale: 1, item: grantCreated),
            Source(sql: grantsRevokedSQL, arguments: userKey, scale: 1, item: grantRevoked),
            Source(sql: grantsExpiredSQL, arguments: userKey + [.integer(now)], scale: 1, item: grantExpired),
            Source(sql: usageMarksSQL, arguments: userKey, scale: 1, item: usageMark),
            Source(sql: deliveriesSQL, arguments: userKey, scale: 1000, item: delivery),
            Source(sql: entitlementChangesSQL, arguments: userKey, scale: 1000, item: entitlementChange),
        ]
        // App Store purchases belong to the platform account, as the service API's views hold them.
        if scope.account.isEmpty {
            sources.append(Source(sql: appStoreEventsSQL(livemode: scope.livemode), arguments: [.text(user)], scale: 1, item: appStoreEvent))
            sources.append(Source(sql: consumptionRequestsSQL(livemode: scope.livemode), arguments: [.text(user)], scale: 1000, item: consumptionRequest))
        }
        return sources
    }

    /// The user's Stripe customers: by metadata and by Checkout link. Arguments: user, account,
    /// livemode, account, livemode, user.
    static let customersCTE = """
        WITH customers (id) AS (
            SELECT id FROM customer WHERE appUserID = ? AND account = ? AND livemode = ?
            UNION SELECT customer FROM userLink WHERE account = ? AND livemode = ? AND appUserID = ?
        )
        """

    /// Events of the user's customers, their subscriptions, invoices and payment methods, and
    /// their Checkout sessions — of their customers, or opened for them (`client_reference_id`)
    /// before a customer existed (`inboxEvent_objectCreated`). Payment methods are those ever seen
    /// attached to the customers (`paymentMethodCustomer`), so a detached one's events stay.
    static let stripeEventsSQL = """
        \(customersCTE), objects (id) AS (
            SELECT id FROM customers
            UNION SELECT id FROM subscription WHERE account = ? AND livemode = ? AND customer IN (SELECT id FROM customers)
            UNION SELECT id FROM invoice WHERE account = ? AND livemode = ? AND customer IN (SELECT id FROM customers)
            UNION SELECT paymentMethod FROM paymentMethodCustomer WHERE account = ? AND livemode = ? AND customer IN (SELECT id FROM customers)
            UNION SELECT id FROM checkoutSession WHERE account = ? AND livemode = ? AND customer IN (SELECT id FROM customers)
            UNION SELECT id FROM checkoutSession WHERE account = ? AND livemode = ? AND clientReferenceID = ?
        )
        SELECT created, eventID, type, objectID, status, source, lastError, seq FROM inboxEvent
        WHERE account = ? AND livemode = ? AND objectID IN (SELECT id FROM objects) AND created >= ? AND created < ?
        ORDER BY created DESC, seq DESC LIMIT ?
        """

    /// What reconcile runs repaired of the user's customers' objects, from the repair log
    /// (`reconcileRepair_customer`).
    static let repairsSQL = """
        \(customersCTE)
        SELECT at, id, run, objectID, summary FROM reconcileRepair
        WHERE account = ? AND livemode = ? AND customer IN (SELECT id FROM customers) AND at >= ? AND at < ?
        ORDER BY at DESC, id DESC LIMIT ?
        """

    /// Notifications, forwarded transactions and fetched snapshots of the user's original
    /// transactions in the mode's environments (`appStoreOwner_user`, then `inboxEvent_objectCreated`).
    static func appStoreEventsSQL(livemode: Bool) -> String {
        """
        SELECT i.created, i.eventID, i.type, i.subtype, i.objectID, i.status, i.source, i.lastError, i.seq
        FROM appStoreOwner o JOIN inboxEvent i ON i.objectID = o.originalTransactionID AND i.account = 'appstore:' || o.environment
        WHERE o.appUserID = ? AND \(livemode ? "o.environment = 'Production'" : "o.environment <> 'Production'")
            AND i.created >= ? AND i.created < ?
        ORDER BY i.created DESC, i.seq DESC LIMIT ?
        """
    }

    /// Apple's refund requests about the user's purchases in the mode's environments, and what
    /// billingd answered (`appStoreConsumptionRequest_user`).
    static func consumptionRequestsSQL(livemode: Bool) -> String {
        """
        SELECT signedDate, notificationUUID, transactionID, status, body, lastError, reason, attempts, appleStatus, sentAt
        FROM appStoreConsumptionRequest
        WHERE appUserID = ? AND \(livemode ? "environment = 'Production'" : "environment <> 'Production'")
            AND signedDate >= ? AND signedDate < ?
        ORDER BY signedDate DESC, notificationUUID DESC LIMIT ?
        """
    }

    static let grantColumns = "startsAt, id, tier, expiresAt, reason, createdBy, revokedAt, revokedBy"
    static let grantsCreatedSQL = """
        SELECT \(grantColumns) FROM promotionalGrant WHERE account = ? AND livemode = ? AND appUserID = ?
            AND startsAt >= ? AND startsAt < ? ORDER BY startsAt DESC LIMIT ?
        """
    static let grantsRevokedSQL = """
        SELECT \(grantColumns) FROM promotionalGrant WHERE account = ? AND livemode = ? AND appUserID = ?
            AND revokedAt >= ? AND revokedAt < ? ORDER BY revokedAt DESC LIMIT ?
        """
    /// Grants that ran out at their expiry (`now`, the fourth argument, is past it) before any revocation.
    static let grantsExpiredSQL = """
        SELECT \(grantColumns) FROM promotionalGrant WHERE account = ? AND livemode = ? AND appUserID = ?
            AND expiresAt <= ? AND (revokedAt IS NULL OR revokedAt > expiresAt)
            AND expiresAt >= ? AND expiresAt < ? ORDER BY expiresAt DESC LIMIT ?
        """
    static let usageMarksSQL = """
        SELECT at, kind, meter, day, count, lastAt, used, limitCount, periodStart, periodEnd FROM usageMark
        WHERE account = ? AND livemode = ? AND "user" = ? AND at >= ? AND at < ? ORDER BY at DESC LIMIT ?
        """
    static let deliveriesSQL = """
        SELECT createdAt, id, endpoint, type, status, attempts, lastError, deliveredAt, nextAttemptAt, seq FROM outboxEvent
        WHERE account = ? AND livemode = ? AND "user" = ? AND createdAt >= ? AND createdAt < ? ORDER BY createdAt DESC, seq DESC LIMIT ?
        """
    static let entitlementChangesSQL = """
        SELECT at, tier, entitled, source, validUntil, why, ref FROM entitlementChange
        WHERE account = ? AND livemode = ? AND "user" = ? AND at >= ? AND at < ? ORDER BY at DESC LIMIT ?
        """

    // MARK: - Rows to items

    /// A number as a tiebreak that sorts as the number does.
    static func padded(_ number: Int64) -> String {
        let digits = String(number)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits
    }

    /// An error or reason kept for a person, cut to one short line.
    static func short(_ text: String) -> String {
        let line = text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        return line.count > 200 ? String(line.prefix(199)) + "…" : line
    }

    static func inboxNote(status: String?, source: String?, lastError: String?) -> String {
        var note = ""
        switch status.flatMap(InboxStatus.init(rawValue:)) {
        case .applied, nil: break
        case .ignored: note += " (a type billingd keeps but does not model)"
        case .pending: note += " (not applied yet)"
        case .failed: note += " (failed, retrying: \(short(lastError ?? "no error kept")))"
        case .dead: note += " (failed for good, waiting for `billingd events retry`: \(short(lastError ?? "no error kept")))"
        }
        if source == InboxSource.api.rawValue || source == InboxSource.appStoreHistory.rawValue { note += ", recovered by reconcile" }
        return note
    }

    @Sendable static func stripeEvent(_ row: any LedgerColumnReading) -> TimelineItem? {
        guard let at = row.int64(0), let id = row.string(1), let type = row.string(2), let seq = row.int64(7) else { return nil }
        let object = row.string(3).map { " on \($0)" } ?? ""
        return TimelineItem(
            kind: .stripeEvent, at: at, source: "stripe",
            summary: "\(type)\(object)\(inboxNote(status: row.string(4), source: row.string(5), lastError: row.string(6)))", ref: id,
            tiebreak: padded(seq))
    }

    @Sendable static func appStoreEvent(_ row: any LedgerColumnReading) -> TimelineItem? {
        guard let at = row.int64(0), let id = row.string(1), let type = row.string(2), let seq = row.int64(8) else { return nil }
        let original = row.string(4) ?? ""
        let source = row.string(6)
        let note = inboxNote(status: row.string(5), source: source, lastError: row.string(7))
        switch source.flatMap(InboxSource.init(rawValue:)) {
        case .appStoreApp:
            return TimelineItem(
                kind: .appStoreTransaction, at: at, source: "app_store",
                summary: "The app forwarded a transaction of original transaction \(original)\(note)", ref: id, tiebreak: padded(seq))
        case .appStoreAPI:
            return TimelineItem(
                kind: .reconcileRepair, at: at, source: "app_store",
                summary: "Original transaction \(original) repaired from the App Store Server API\(note)", ref: id, tiebreak: padded(seq))
        default:
            let subtype = row.string(3).map { " (\($0))" } ?? ""
            return TimelineItem(
                kind: .appStoreNotification, at: at, source: "app_store", summary: "\(type)\(subtype) for original transaction \(original)\(note)",
                ref: id, tiebreak: padded(seq))
        }
    }

    @Sendable static func consumptionRequest(_ row: any LedgerColumnReading) -> TimelineItem? {
        guard let signedDate = row.int64(0), let uuid = row.string(1), let transaction = row.string(2) else { return nil }
        let reason = row.string(6).map { " (\($0))" } ?? ""
        let attempts = row.int64(7) ?? 0
        let tries = attempts == 1 ? "1 attempt" : "\(attempts) attempts"
        let error = short(row.string(5) ?? "no error kept")
        let answer = row.string(4).flatMap { ConsumptionInformation(json: Array($0.utf8)) }
        let outcome: String
        switch row.string(3).flatMap(AppStoreConsumptionStatus.init(rawValue:)) {
        case .sent:
            let when = row.int64(9).map { " at \(UTCTimestamp.string($0 / 1000))" } ?? ""
            outcome = "answered Apple\(when): \(answer?.summary ?? "answer not kept")"
        case .pending:
            outcome = attempts == 0 ? "waiting to be answered" : "not answered yet after \(tries), retrying: \(error)"
        case .noConsent:
            outcome = "not answered: the user had not consented to share consumption data with Apple"
        case .expired:
            outcome = "not answered within Apple's 12 hours" + (attempts > 0 ? " (\(tries), the last: \(error))" : "")
        case .failed:
            let status = row.int64(8).map { "HTTP \($0) " } ?? ""
            outcome = "Apple refused the answer (\(status)\(error)): \(answer?.summary ?? "answer not kept")"
        case nil:
            outcome = row.string(3) ?? "unknown"
        }
        return TimelineItem(
            kind: .appStoreConsumptionRequest, at: signedDate / 1000, source: "app_store",
            summary: "Refund request\(reason) for transaction \(transaction): \(outcome)", ref: uuid, tiebreak: "consumption \(uuid)")
    }

    @Sendable static func repair(_ row: any LedgerColumnReading) -> TimelineItem? {
        guard let at = row.int64(0), let id = row.int64(1), let object = row.string(3) else { return nil }
        let run = row.int64(2).map { "reconcile run \($0)" } ?? "a reconcile run before repairs were logged"
        return TimelineItem(
            kind: .reconcileRepair, at: at, source: "reconcile", summary: "\(row.string(4) ?? object) (\(run))", ref: object,
            tiebreak: "repair \(padded(id))")
    }

    static func grant(_ row: any LedgerColumnReading) -> PromotionalGrant? {
        guard let id = row.string(1) else { return nil }
        return PromotionalGrant(
            id: id, tier: row.string(2) ?? "", startsAt: row.int64(0) ?? 0, expiresAt: row.int64(3) ?? 0, reason: row.string(4) ?? "",
            createdBy: row.string(5) ?? "", revokedAt: row.int64(6), revokedBy: row.string(7))
    }

    @Sendable static func grantCreated(_ row: any LedgerColumnReading) -> TimelineItem? {
        guard let grant = grant(row) else { return nil }
        return TimelineItem(
            kind: .grantCreated, at: grant.startsAt, source: "grant",
            summary: "Granted \(grant.tier) until \(UTCTimestamp.string(grant.expiresAt)) by \(grant.createdBy): \(short(grant.reason))",
            ref: grant.id, tiebreak: grant.id)
    }

    @Sendable static func grantRevoked(_ row: any LedgerColumnReading) -> TimelineItem? {
        guard let grant = grant(row), let revokedAt = grant.revokedAt else { return nil }
        return TimelineItem(
            kind: .grantRevoked, at: revokedAt, source: "grant",
            summary: "Grant of \(grant.tier) revoked by \(grant.revokedBy ?? "unknown")", ref: grant.id, tiebreak: grant.id)
    }

    @Sendable static func grantExpired(_ row: any LedgerColumnReading) -> TimelineItem? {
        guard let grant = grant(row) else { return nil }
        return TimelineItem(
            kind: .grantExpired, at: grant.expiresAt, source: "grant", summary: "Grant of \(grant.tier) expired", ref: grant.id,
            tiebreak: grant.id)
    }

    @Sendable static func usageMark(_ row: any LedgerColumnReading) -> TimelineItem? {
        guard let at = row.int64(0), let kind = row.string(1).flatMap(UsageMarkKind.init(rawValue:)), let meter = row.string(2),
            let day = row.int64(3)
        else { return nil }
        let count = row.int64(4) ?? 0
        let used = row.int64(6).map(String.init) ?? "?"
        switch kind {
        case .limitHit:
            let limit = row.int64(7).map(String.init) ?? "?"
            let times = count == 1 ? "1 consume" : "\(count) consumes"
            let last = count > 1 ? ", the last at \(UTCTimestamp.string(row.int64(5) ?? at))" : ""
            return TimelineItem(
                kind: .usageLimitHit, at: at, source: "usage",
                summary: "\(meter): \(times) refused at the limit (402) this day, \(used) of \(limit) used\(last)", ref: meter,
                tiebreak: "\(kind.rawValue) \(meter) \(day)")
        case .periodReset:
            let period = "\(UTCTimestamp.string(row.int64(8) ?? at)) to \(UTCTimestamp.string(row.int64(9) ?? at))"
            return TimelineItem(
                kind: .usagePeriodReset, at: at, source: "usage",
                summary: "\(meter): a new usage period began (\(period)); \(used) had been used in the period before", ref: meter,
                tiebreak: "\(kind.rawValue) \(meter) \(day)")
        }
    }

    @Sendable static func delivery(_ row: any LedgerColumnReading) -> TimelineItem? {
        guard let createdAt = row.int64(0), let id = row.string(1), let seq = row.int64(9) else { return nil }
        let endpoint = host(of: row.string(2) ?? "")
        let attempts = row.int64(5) ?? 0
        let tries = attempts == 1 ? "1 attempt" : "\(attempts) attempts"
        let outcome: String
        switch row.string(4).flatMap(OutboxStatus.init(rawValue:)) {
        case .delivered: outcome = "delivered after \(tries)"
        case .pending: outcome = "waiting to be sent"
        case .failed: outcome = "failed after \(tries), retrying: \(short(row.string(6) ?? "no error kept"))"
        case .dead: outcome = "given up after \(tries): \(short(row.string(6) ?? "no error kept"))"
        case nil: outcome = row.string(4) ?? "unknown"
        }
        return TimelineItem(
            kind: .outboxDelivery, at: createdAt / 1000, source: "outbox", summary: "\(row.string(3) ?? "event") to \(endpoint): \(outcome)",
            ref: id, tiebreak: padded(seq))
    }

    /// An endpoint's host: its path and query may carry a token, which a timeline never shows.
    static func host(of url: String) -> String {
        let parts = url.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
        guard parts.count >= 3, parts[0].hasSuffix(":"), parts[1].isEmpty else { return "the endpoint" }
        let rest = parts[2]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return String(authority.split(separator: "@").last ?? authority)
    }

    @Sendable static func entitlementChange(_ row: any LedgerColumnReading) -> TimelineItem? {
        guard let at = row.int64(0) else { return nil }
        let tier = row.string(1)
        let entitled = row.bool(2)
        let source = row.string(3)
        let validUntil = row.int64(4)
        let why = row.string(5) ?? ""
        let ref = row.string(6)
        let summary: String
        if entitled {
            let through = [source, ref].compactMap { $0 }.joined(separator: " ")
            let until = validUntil.map { " until \(UTCTimestamp.string($0))" } ?? ""
            summary = "Access: \(tier ?? "an unmapped price")\(through.isEmpty ? "" : " through \(through)")\(until) (\(why))"
        } else {
            summary = "No paid access: \(tier ?? "no tier") (\(why))"
        }
        return TimelineItem(
            kind: .entitlementChanged, at: at / 1000, source: "billingd", summary: summary, ref: ref,
            // Not entitled, the view still names the last subscription or grant: nothing entitles, so no source.
            entitlement: TimelineEntitlement(tier: tier, source: entitled ? source : nil, validUntil: entitled ? validUntil : nil),
            tiebreak: padded(at))
    }

    // MARK: - What the timeline's own tables keep

    /// Records the access a change left the user with (``OutboxAnnouncer/Announcement/entitlementChanged``),
    /// in the change's transaction. Arguments: ``entitlementChangeArguments(_:user:scope:now:)``.
    package static let insertEntitlementChangeSQL = """
        INSERT INTO entitlementChange (\(entitlementChangeColumns.joined(separator: ", ")))
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \(entitlementChangeConflict)
        """

    /// The columns of ``entitlementChangeArguments(_:user:scope:now:)``, in order.
    static let entitlementChangeColumns = ["account", "livemode", "\"user\"", "at", "tier", "entitled", "source", "validUntil", "why", "ref"]

    /// A second change of one user in one millisecond replaces the first.
    static let entitlementChangeConflict = """
        ON CONFLICT (account, livemode, "user", at) DO UPDATE SET tier = excluded.tier, entitled = excluded.entitled,
            source = excluded.source, validUntil = excluded.validUntil, why = excluded.why, ref = excluded.ref
        """

    /// `now` is Unix ms, the change's.
    package static func entitlementChangeArguments(
        _ announcement: OutboxAnnouncer.Announcement, user: String, scope: ServiceScope, now: Int64
    ) -> [LedgerValue] {
        let state = announcement.state
        return [
            .text(scope.account), .boolean(scope.livemode), .text(user), .integer(now), state.plan.map(LedgerValue.text) ?? .null,
            .boolean(state.entitled), state.source.map(LedgerValue.text) ?? .null,
            announcement.validUntil.map(LedgerValue.integer) ?? .null, .text(state.why), state.subscriptionID.map(LedgerValue.text) ?? .null,
        ]
    }
}

/// What a `usageMark` row records.
package enum UsageMarkKind: String, Sendable {
    /// Consumes refused at a hard limit (402), counted per user, meter and UTC day.
    case limitHit = "limit_hit"
    /// A counter's first use in a later period than its last.
    case periodReset = "period_reset"
}

/// The `usageMark` table's writes, made in the usage transaction that causes them: one upsert per
/// refused consume (one row per user, meter and day, however many refusals), one insert per
/// counter and period.
package enum UsageMarkRows {
    /// Arguments: account, livemode, user, meter, day, at (s), lastAt (s), used, limit, period start, period end.
    package static let limitHitSQL = """
        INSERT INTO usageMark (account, livemode, "user", kind, meter, day, at, count, lastAt, used, limitCount, periodStart, periodEnd)
        VALUES (?, ?, ?, 'limit_hit', ?, ?, ?, 1, ?, ?, ?, ?, ?)
        ON CONFLICT (account, livemode, "user", kind, meter, day) DO UPDATE SET count = usageMark.count + 1,
            lastAt = excluded.lastAt, used = excluded.used, limitCount = excluded.limitCount
        """

    package static func limitHitArguments(_ state: UsageMeterState, scope: ServiceScope, user: String, now: Int64) -> [LedgerValue] {
        let seconds = now / 1000
        return [
            .text(scope.account), .boolean(scope.livemode), .text(user), .text(state.meter.id), .integer(seconds / 86_400), .integer(seconds),
            .integer(seconds), .integer(state.used), state.limitCount.map(LedgerValue.integer) ?? .null,
            state.period.map { .integer($0.start) } ?? .null, state.period.map { .integer($0.end) } ?? .null,
        ]
    }

    /// Arguments: account, livemode, user, meter, day, at (= period start), used in the period before, period start, end.
    package static let periodResetSQL = """
        INSERT INTO usageMark (account, livemode, "user", kind, meter, day, at, count, lastAt, used, limitCount, periodStart, periodEnd)
        VALUES (?, ?, ?, 'period_reset', ?, ?, ?, 1, ?, ?, NULL, ?, ?)
        ON CONFLICT (account, livemode, "user", kind, meter, day) DO NOTHING
        """

    /// A mark when a counter's total moves from `cached` to a later `period`; nil otherwise.
    package static func periodResetArguments(
        cached: (period: UsagePeriod, used: Int64)?, period: UsagePeriod, scope: ServiceScope, user: String, meter: String
    ) -> [LedgerValue]? {
        guard let cached, period.start > cached.period.start else { return nil }
        return [
            .text(scope.account), .boolean(scope.livemode), .text(user), .text(meter), .integer(period.start / 86_400), .integer(period.start),
            .integer(period.start), .integer(cached.used), .integer(period.start), .integer(period.end),
        ]
    }
}
