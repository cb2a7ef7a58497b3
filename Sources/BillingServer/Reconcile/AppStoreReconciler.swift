import APITransport
import AppStoreAPI
import BillingCore
import BillingStore
import Foundation
import Logging

/// Makes the App Store side of the ledger true again from the App Store Server API, the way
/// `Reconciler` does for Stripe:
///
/// 1. walks Get Notification History from the stored cursor (with an hour's overlap, as far back as
///    Apple keeps it: 180 days in Production, 30 in the Sandbox) and puts every notification the inbox lacks into it, where the applier treats it like
///    a delivery (deduplicated by `notificationUUID`, so one that arrives later is a duplicate);
/// 2. asks Get All Subscription Statuses about every subscription whose state may be stale (see
///    ``AppStoreStaleReason``) and repairs through the same `signedDate` guard;
/// 3. reports drift by kind (missing, status differs, expiry differs) with examples.
///
/// It shares the `reconcile` lease with Stripe's reconcile, so a cron job, `serve`'s scheduler and
/// other replicas never overlap, and records each run (mode `appstore:<environment>`).
public struct AppStoreReconciler: Sendable {
    public struct Options: Sendable {
        public var dryRun = false
        /// Walk notification history from this time (Unix seconds) instead of the cursor.
        public var since: Int64?
        /// Apply recovered notifications in this process (the CLI); `serve` wakes its applier.
        public var applyRecoveredEvents = false
        public var examples = 5
        /// Get All Subscription Statuses calls in flight.
        public var concurrency = 4

        public init() {}
    }

    /// A run that could not complete; the report holds what was done before.
    public struct Failure: Error, CustomStringConvertible {
        public let report: AppStoreReconcileReport
        public let underlying: any Error
        public var description: String { "App Store reconcile could not complete: \(underlying)" }
    }

    public struct Progress: Sendable {
        public let phase: String
        public let done: Int
        public let drift: Int
    }

    /// The run records' mode: `appstore:Production` or `appstore:Sandbox`.
    public static func mode(_ environment: AppStoreEnvironment) -> String { "appstore:\(environment.rawValue)" }
    /// How far back Apple keeps notification history: 180 days in Production, 30 in the
    /// Sandbox. The walk never asks for more (Apple answers 4000012 to an earlier start).
    static func historyDays(_ environment: AppStoreEnvironment) -> Int64 { environment.isLive ? 180 : 30 }
    /// How far inside Apple's window a walk with no cursor (or a cursor that old) starts. Every
    /// request of a walk, each page included, must have a startDate within the window of Apple's
    /// now (4000012 otherwise), and a walk keeps its first startDate: from the very edge (a minute
    /// inside) a walk was refused after a minute, so a first fill longer than that (1,200 pages at
    /// 20 requests/s, some 6,000 subscriptions) failed, and failed again on every retry. A day's
    /// margin lets a walk take a day (1.7 million pages at 20 requests/s), for the oldest day.
    static let historyMargin: Int64 = 86_400
    /// A cursor this many days old is close to losing notifications for good: 150 in
    /// Production, 25 in the Sandbox.
    static func staleCursorDays(_ environment: AppStoreEnvironment) -> Int64 { historyDays(environment) * 5 / 6 }
    /// Notifications signed this long before the cursor are listed again: one can appear in the
    /// history a little after its date.
    static let cursorOverlap: Int64 = 3600

    let store: any LedgerStore
    let client: AppStoreClient
    let logger: Logger
    /// Where recovered notifications go, as deliveries do.
    let inbox: any EventInbox
    let applier: any EventApplier
    let holder: String
    let now: @Sendable () -> Int64
    let eventsStored: @Sendable () -> Void

    public init(
        store: any LedgerStore, client: AppStoreClient, logger: Logger, inbox: any EventInbox, applier: any EventApplier,
        holder: String = Reconciler.defaultHolder, now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        eventsStored: @escaping @Sendable () -> Void = {}
    ) {
        self.store = store
        self.client = client
        self.logger = logger
        self.inbox = inbox
        self.applier = applier
        self.holder = holder
        self.now = now
        self.eventsStored = eventsStored
    }

    public var environment: AppStoreEnvironment { client.configuration.environment }
    var inboxAccount: String { InboxAccount.appStore(environment).column }

    /// Runs once. Throws ``LeaseHeld`` when another run holds the lease (nothing
    /// recorded) and ``Failure`` when the run could not complete; drift is not a failure.
    public func run(_ options: Options, progress: @escaping @Sendable (Progress) -> Void = { _ in }) async throws -> AppStoreReconcileReport {
        let runs = store.reconcileRuns
        let lease = try await LeaseWatch.hold(Reconciler.leaseName, runs: runs, holder: holder, ttl: Reconciler.leaseTTL, now: now)
        defer { lease.stopRenewing() }

        var report = AppStoreReconcileReport()
        report.environment = environment.rawValue
        report.mode = Self.mode(environment)
        report.dryRun = options.dryRun
        report.startedAt = now()
        do {
            try await runs.markAbandoned(leaseName: Reconciler.leaseName, now: report.startedAt)
            report.runID = try await runs.start(mode: report.mode, holder: holder, dryRun: options.dryRun, now: report.startedAt)
        } catch {
            try? await runs.release(Reconciler.leaseName, holder: holder)
            throw error
        }
        logger.info("appstore reconcile started", metadata: ["run": "\(report.runID)", "environment": "\(environment)", "dry_run": "\(options.dryRun)"])

        let failure: (any Error)?
        do {
            try await recoverNotifications(options, lease: lease, progress: progress, into: &report)
            try await checkSubscriptions(options, lease: lease, progress: progress, into: &report)
            failure = nil
        } catch {
            failure = error
        }
        report.finishedAt = now()
        report.outcome = failure == nil ? "completed" : "failed"
        report.error = failure.map { "\($0)" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let totals = ReconcileTotals(
            drift: report.totalDrift, repaired: report.subscriptions.repaired, recoveredEvents: report.notifications.recovered,
            objects: report.subscriptions.checked)
        try? await runs.finish(
            report.runID, outcome: failure == nil ? .completed : .failed, totals: totals, error: report.error,
            report: try? encoder.encode(report), now: report.finishedAt ?? now())
        try? await runs.release(Reconciler.leaseName, holder: holder)
        let metadata: Logger.Metadata = [
            "run": "\(report.runID)", "environment": "\(environment)", "recovered": "\(report.notifications.recovered)",
            "checked": "\(report.subscriptions.checked)", "drift": "\(report.totalDrift)", "repaired": "\(report.subscriptions.repaired)",
            "requests": "\(report.requests)",
        ]
        if let failure {
            logger.error("appstore reconcile failed: \(failure)", metadata: metadata)
            throw Failure(report: report, underlying: failure)
        }
        logger.info("appstore reconcile completed", metadata: metadata)
        return report
    }

    // MARK: - 1. Notification history

    private func recoverNotifications(
        _ options: Options, lease: LeaseWatch, progress: @Sendable (Progress) -> Void,
        into report: inout AppStoreReconcileReport
    ) async throws {
        let runs = store.reconcileRuns
        let started = now()
        let window = Self.historyDays(environment)
        let earliest = started - window * 86_400 + Self.historyMargin
        let cursor = try await runs.eventCursor(account: inboxAccount, livemode: environment.isLive)
        var from = options.since ?? cursor.map { $0.created - Self.cursorOverlap } ?? earliest
        if let cursor, started - cursor.walkedAt > Self.staleCursorDays(environment) * 86_400 {
            let days = (started - cursor.walkedAt) / 86_400
            report.notifications.warning = "the App Store notification cursor is \(days) days old (last walk \(UTCTimestamp.string(cursor.walkedAt))); Apple keeps \(environment.rawValue) notification history for \(window) days only, so older notifications cannot be recovered. Run `billingd appstore reconcile` daily (cron, or serve's scheduler)."
            logger.warning("\(report.notifications.warning!)")
        }
        if from < earliest {
            if options.since != nil || cursor != nil {
                let note = "notifications before \(UTCTimestamp.string(earliest)) are past Apple's \(window)-day \(environment.rawValue) history (less a day, so that a long walk's pages stay inside it) and were not walked"
                report.notifications.warning = [report.notifications.warning, note].compactMap { $0 }.joined(separator: "; ")
            }
            from = earliest
        }
        report.notifications.from = from
        report.notifications.to = started
        // Apple refuses an empty span (4000013); nothing can have happened in it anyway.
        guard from < started else { return }

        var token: String?
        repeat {
            try lease.checkpoint()
            let page = try await client.notificationHistory(startDate: from * 1000, endDate: started * 1000, paginationToken: token, priority: .bulk)
            report.requests += 1
            report.notifications.listed += page.notifications.count
            let receivedAt = now() * 1000
            var deliveries: [(InboxDelivery, delivered: Bool)] = []
            for item in page.notifications {
                let body = Self.notificationBody(signedPayload: item.signedPayload)
                deliveries.append((InboxDelivery.appStore(item.notification, body: body, receivedAt: receivedAt, source: .appStoreHistory), item.wasDelivered))
            }
            if options.dryRun {
                for (delivery, delivered) in deliveries
                where try await !inbox.contains(eventID: delivery.envelope.id, account: delivery.envelope.account, livemode: delivery.envelope.livemode) {
                    report.notifications.recovered += 1
                    if !delivered { report.notifications.neverDelivered += 1 }
                }
            } else if !deliveries.isEmpty {
                let outcomes = try await inbox.insert(deliveries.map(\.0))
                for (outcome, (_, delivered)) in zip(outcomes, deliveries) {
                    guard case .stored = outcome else { continue }
                    report.notifications.recovered += 1
                    if !delivered { report.notifications.neverDelivered += 1 }
                }
            }
            progress(.init(phase: "notifications", done: report.notifications.listed, drift: report.notifications.recovered))
            guard page.hasMore, let next = page.paginationToken, next != token else { break }
            token = next
        } while true

        guard !options.dryRun else { return }
        try await runs.advanceEventCursor(account: inboxAccount, livemode: environment.isLive, created: started, walkedAt: started)
        if report.notifications.recovered > 0 {
            logger.notice("recovered App Store notifications the inbox lacked", metadata: ["count": "\(report.notifications.recovered)", "never_delivered": "\(report.notifications.neverDelivered)"])
            eventsStored()
        }
        // Applied before the subscriptions are judged, so that a recovered renewal is not drift.
        if options.applyRecoveredEvents {
            report.notifications.applied = try await applier.drain().applied
        }
    }

    // MARK: - 2. Stale subscriptions

    private func checkSubscriptions(
        _ options: Options, lease: LeaseWatch, progress: @Sendable (Progress) -> Void,
        into report: inout AppStoreReconcileReport
    ) async throws {
        let reconciliation = store.appStoreReconciliation
        let startedMilliseconds = now() * 1000
        var after: String?
        var seen = Set<String>()
        while true {
            try lease.checkpoint()
            let candidates = try await reconciliation.staleSubscriptions(
                environment: environment.rawValue, now: startedMilliseconds, after: after, limit: 200)
            guard let last = candidates.last else { break }
            after = last.originalTransactionID
            let fresh = candidates.filter { !seen.contains($0.originalTransactionID) }
            for candidate in fresh { report.subscriptions.candidates[candidate.reason.rawValue, default: 0] += 1 }

            // Apple's answers for a page, fetched `concurrency` at a time, then judged in order.
            var answers: [(reason: AppStoreStaleReason, statuses: [AppStoreLastTransaction])] = []
            for chunk in stride(from: 0, to: fresh.count, by: max(1, options.concurrency)).map({ Array(fresh[$0..<min($0 + max(1, options.concurrency), fresh.count)]) }) {
                try lease.checkpoint()
                let fetched = try await withThrowingTaskGroup(of: (Int, [AppStoreLastTransaction]).self) { group in
                    for (index, candidate) in chunk.enumerated() {
                        group.addTask {
                            do {
                                return (index, try await client.subscriptionStatuses(transactionID: candidate.originalTransactionID, priority: .bulk))
                            } catch let error as AppStoreAPIError where error.kind == .notFound {
                                // Apple no longer knows it (e.g. a deleted sandbox tester): nothing to compare.
                                return (index, [])
                            }
                        }
                    }
                    var results = [[AppStoreLastTransaction]](repeating: [], count: chunk.count)
                    for try await (index, statuses) in group { results[index] = statuses }
                    return results
                }
                report.requests += chunk.count
                for (candidate, statuses) in zip(chunk, fetched) { answers.append((candidate.reason, statuses)) }
            }

            for (reason, statuses) in answers {
                for last in statuses where seen.insert(last.originalTransactionID).inserted {
                    try await judge(last, reason: reason, now: startedMilliseconds, options: options, into: &report.subscriptions)
                }
            }
            progress(.init(phase: "subscriptions", done: report.subscriptions.checked, drift: report.subscriptions.drift))
        }
    }

    /// Compares Apple's latest state of one subscription with the ledger's and repairs it.
    private func judge(
        _ last: AppStoreLastTransaction, reason: AppStoreStaleReason, now: Int64, options: Options,
        into subscriptions: inout AppStoreReconcileReport.SubscriptionsReport
    ) async throws {
        let reconciliation = store.appStoreReconciliation
        subscriptions.checked += 1
        let held = try await reconciliation.record(environment: environment.rawValue, originalTransactionID: last.originalTransactionID)
        let apple = Self.status(last.status)
        let appleExpires = last.transaction.transaction.expiresDate
        let ledgerStatus = held?.status(now: now)
        let kind: String?
        if held == nil {
            kind = "missing"
            subscriptions.missing += 1
        } else if let apple, ledgerStatus != apple {
            kind = "status_differs"
            subscriptions.statusDiffers += 1
        } else if held?.expiresDate != appleExpires {
            kind = "expiry_differs"
            subscriptions.expiryDiffers += 1
        } else {
            kind = nil
            subscriptions.matched += 1
        }
        guard let kind else { return }
        if subscriptions.examples.count < options.examples {
            subscriptions.examples.append(.init(
                originalTransactionID: last.originalTransactionID, kind: kind, reason: reason.rawValue, ledgerStatus: ledgerStatus?.rawValue,
                appleStatus: apple?.rawValue ?? "status \(last.status)", ledgerExpiresDate: held?.expiresDate, appleExpiresDate: appleExpires))
        }
        guard !options.dryRun else { return }
        let snapshot = AppStoreServerSnapshot(
            signedTransaction: last.transaction.jws, transaction: last.transaction.transaction, signedRenewalInfo: last.renewalInfo?.jws,
            renewalInfo: last.renewalInfo?.renewalInfo)
        switch try await reconciliation.recordFetched([snapshot], environment: environment, receivedAt: now)[0] {
        case .applied, .ambiguous: subscriptions.repaired += 1
        case .stale: subscriptions.keptNewer += 1
        case .unchanged, .recorded: break
        }
    }

    /// Apple's `status` in the service API's words.
    static func status(_ apple: Int) -> AppStoreStatus? {
        switch apple {
        case 1: .active
        case 2: .expired
        case 3: .billingRetry
        case 4: .gracePeriod
        case 5: .revoked
        default: nil
        }
    }
}

extension AppStoreReconciler {
    /// The body the inbox keeps for a notification recovered from the history, as Apple posts one:
    /// `{"signedPayload":"…"}`. A compact JWS is base64url and dots, which JSON writes as they are,
    /// so those bytes are put together directly (JSONSerialization took 27 % of a first fill's CPU
    /// to write the same bytes); anything else is left to JSONSerialization to escape.
    package static func notificationBody(signedPayload: String) -> [UInt8] {
        let jws = signedPayload.utf8
        let plain = jws.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
        }
        guard plain else { return Array((try? JSONSerialization.data(withJSONObject: ["signedPayload": signedPayload])) ?? Data()) }
        var body: [UInt8] = []
        body.reserveCapacity(jws.count + 20)
        body += #"{"signedPayload":""#.utf8
        body += jws
        body += #""}"#.utf8
        return body
    }
}
