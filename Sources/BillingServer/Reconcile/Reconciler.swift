import APITransport
import BillingCore
import BillingStore
import Foundation
import Logging
import StripeAPI
import Synchronization

/// Makes the ledger true again from Stripe's API: recovers missed events through `/v1/events`,
/// re-fetches objects the applier marked, walks Stripe's lists, compares every object with the
/// ledger field by field and repairs through the same version guard as webhooks.
///
/// A run holds the `reconcile` lease in the ledger database, so a cron job and the scheduler in
/// `serve` (or two replicas) never overlap. Memory is flat in the number of objects: lists are
/// streamed a page at a time, and the ids seen for gone detection go to a temporary table.
public struct Reconciler: Sendable {
    public struct Options: Sendable {
        public var kinds: [ReconcileKind] = ReconcileKind.allCases
        public var dryRun = false
        /// Compare only objects created at or after this time (Unix seconds). Gone detection
        /// needs complete lists, so it is skipped when set.
        public var since: Int64?
        /// Compare only objects created before this time (Unix seconds); skips gone detection too.
        public var until: Int64?
        /// A connected account (`acct_…`); nil for the platform account.
        public var account: String?
        /// "full" for a reconcile, "events" for the scheduler's missed-events sweep.
        public var mode = "full"
        /// Apply recovered events in this process after the sweep (the CLI); `serve` wakes its
        /// applier instead.
        public var applyRecoveredEvents = false
        /// Drifted objects kept as examples per kind in the report.
        public var examples = 5
        /// Requests in flight for per-customer lists and single fetches.
        public var concurrency = 8

        public init() {}
    }

    /// A run that started but could not complete (bad key, Stripe down past retries, lease lost).
    /// The report holds what was done before.
    public struct Failure: Error, CustomStringConvertible {
        public let report: ReconcileReport
        public let underlying: any Error
        public var description: String { "reconcile could not complete: \(underlying)" }
    }

    /// What a run is doing, for a progress line on a terminal.
    public struct Progress: Sendable {
        public let phase: String
        public let listed: Int
        public let drift: Int
    }

    public static let leaseName = "reconcile"
    static let leaseTTL: Int64 = 120
    static let eventWindow: Int64 = 30 * 86_400
    static let staleCursor: Int64 = 25 * 86_400
    /// Events created this long before the cursor are listed again: Stripe can make an event
    /// visible in the list a little after its `created` second.
    static let cursorOverlap: Int64 = 300

    let store: any LedgerStore
    let client: StripeClient
    let livemode: Bool
    let logger: Logger
    let now: @Sendable () -> Int64
    let holder: String
    /// Where recovered events go, as webhook deliveries do.
    let inbox: any EventInbox
    let applier: any EventApplier
    /// Called after recovered events were stored (serve wakes its applier).
    let eventsStored: @Sendable () -> Void
    /// Decides users' usage periods for the `usage` kind; calendar months without one.
    let catalog: PlanCatalog?

    public init(
        store: any LedgerStore, client: StripeClient, livemode: Bool, logger: Logger,
        inbox: any EventInbox, applier: any EventApplier, holder: String = Reconciler.defaultHolder, catalog: PlanCatalog? = nil,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        eventsStored: @escaping @Sendable () -> Void = {}
    ) {
        self.store = store
        self.catalog = catalog
        self.client = client
        self.livemode = livemode
        self.logger = logger
        self.inbox = inbox
        self.applier = applier
        self.holder = holder
        self.now = now
        self.eventsStored = eventsStored
    }

    /// host:pid, recorded as the lease holder and on the run.
    public static var defaultHolder: String {
        "\(ProcessInfo.processInfo.hostName):\(ProcessInfo.processInfo.processIdentifier)"
    }

    /// Runs once. Throws ``LeaseHeld`` (nothing recorded) when another run holds
    /// the lease, and ``Failure`` when the run could not complete; drift is not a failure.
    public func run(_ options: Options, progress: @escaping @Sendable (Progress) -> Void = { _ in }) async throws -> ReconcileReport {
        let runs = store.reconcileRuns
        let lease = try await LeaseWatch.hold(Self.leaseName, runs: runs, holder: holder, ttl: Self.leaseTTL, now: now)
        defer { lease.stopRenewing() }

        var report = ReconcileReport()
        report.mode = options.mode
        report.dryRun = options.dryRun
        report.account = options.account
        report.livemode = livemode
        report.kinds = options.kinds.sorted()
        report.startedAt = now()
        do {
            try await runs.markAbandoned(leaseName: Self.leaseName, now: report.startedAt)
            report.runID = try await runs.start(mode: options.mode, holder: holder, dryRun: options.dryRun, now: report.startedAt)
        } catch {
            try? await runs.release(Self.leaseName, holder: holder)
            throw error
        }
        logger.info(
            "reconcile started",
            metadata: ["run": "\(report.runID)", "mode": "\(options.mode)", "kinds": "\(report.kinds.map(\.rawValue).joined(separator: ","))", "dry_run": "\(options.dryRun)"])

        let run = ReconcileRun(reconciler: self, options: options, run: report.runID, lease: lease, progress: progress)
        let failure: (any Error)?
        do {
            try await run.reconcile(into: &report)
            failure = nil
        } catch {
            failure = error
        }
        report.stripeRequests = run.stripeRequests.withLock { $0 }
        report.finishedAt = now()
        report.outcome = failure == nil ? "completed" : "failed"
        report.error = failure.map { "\($0)" }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let totals = ReconcileTotals(
            drift: report.totalDrift, repaired: report.totalRepaired, recoveredEvents: report.events?.recovered ?? 0,
            objects: report.totalObjects)
        try? await runs.finish(
            report.runID, outcome: failure == nil ? .completed : .failed, totals: totals, error: report.error,
            report: try? encoder.encode(report), now: report.finishedAt ?? now())
        try? await runs.release(Self.leaseName, holder: holder)
        let metadata: Logger.Metadata = [
            "run": "\(report.runID)", "objects": "\(report.totalObjects)", "drift": "\(report.totalDrift)",
            "repaired": "\(report.totalRepaired)", "recovered_events": "\(report.events?.recovered ?? 0)",
            "requests": "\(report.stripeRequests)", "seconds": "\((report.finishedAt ?? 0) - report.startedAt)",
        ]
        if let failure {
            logger.error("reconcile failed: \(failure)", metadata: metadata)
            throw Failure(report: report, underlying: failure)
        }
        logger.info("reconcile completed", metadata: metadata)
        return report
    }
}

/// One reconcile run against Stripe: its options, its lease, the Stripe requests it made so far,
/// and the steps it takes (recover events, re-fetch marked objects, compare each list).
final class ReconcileRun: Sendable {
    let reconciler: Reconciler
    let options: Reconciler.Options
    let lease: LeaseWatch
    let progress: @Sendable (Reconciler.Progress) -> Void
    /// Stripe requests made so far, for the report.
    let stripeRequests = Mutex(0)
    let ledger: any LedgerReconciliationStore
    let account: String
    /// The run's id in ``ReconcileRunStore``, which every repair it logs names.
    let run: Int64

    init(
        reconciler: Reconciler, options: Reconciler.Options, run: Int64, lease: LeaseWatch,
        progress: @escaping @Sendable (Reconciler.Progress) -> Void
    ) {
        self.reconciler = reconciler
        self.run = run
        self.options = options
        self.lease = lease
        self.progress = progress
        self.ledger = reconciler.store.reconciliation
        self.account = options.account ?? ""
    }

    var client: StripeClient { reconciler.client }
    var livemode: Bool { reconciler.livemode }

    /// Throws when the lease was lost or the task cancelled: stop at the next page.
    func checkpoint() throws { try lease.checkpoint() }

    /// Takes the run's steps in order, recording each in `report`.
    func reconcile(into report: inout ReconcileReport) async throws {
        let kinds = options.kinds.sorted()
        if kinds.contains(.events) {
            try await recoverEvents(into: &report)
        }
        let listed = kinds.compactMap(\.ledgerKind)
        if !listed.isEmpty {
            try await refetchMarked(into: &report)
        }
        for kind in kinds {
            try checkpoint()
            switch kind {
            case .events:
                continue
            case .products:
                try await reconcileList(.product, path: "/v1/products", into: &report)
            case .prices:
                try await reconcileList(.price, path: "/v1/prices", into: &report)
            case .customers:
                try await reconcileList(.customer, path: "/v1/customers", into: &report)
            case .subscriptions:
                try await reconcileList(.subscription, path: "/v1/subscriptions", parameters: ["status": "all"], into: &report)
            case .invoices:
                try await reconcileList(.invoice, path: "/v1/invoices", into: &report)
            case .paymentMethods:
                try await reconcilePerCustomer(.paymentMethod, into: &report)
            case .entitlements:
                try await reconcilePerCustomer(.entitlementSummary, into: &report)
            case .usage:
                try await reconcileUsage(into: &report)
            }
        }
    }

    // MARK: Lists

    /// Walks one Stripe list, comparing and repairing a page at a time. The next page is fetched
    /// while the current one is decoded and written.
    func reconcileList(
        _ kind: LedgerObjectKind, path: String, parameters: StripeParameters = [:], into report: inout ReconcileReport
    ) async throws {
        var parameters = parameters
        let complete = options.since == nil && options.until == nil
        var created = StripeParameters()
        if let since = options.since { created["gte"] = .integer(since) }
        if let until = options.until { created["lt"] = .integer(until) }
        if !complete { parameters["created"] = .dictionary(created) }
        if complete { try await ledger.beginListing([kind]) }
        // Two stages overlap: while one page is written, the next is fetched and decoded.
        let pages = Prefetching(client.list(path, parameters: parameters, account: options.account, priority: .bulk))
        var writing: Task<PageReconciliation, any Error>?
        while let page = try await pages.next() {
            try checkpoint()
            stripeRequests.withLock { $0 += 1 }
            report.listed(page.objects.count, kind: kind)
            // Objects whose JSON is byte for byte what the ledger holds need no decoding.
            let objects = page.objects.map { (id: $0.id, json: $0.bytes) }
            let (matched, changed) = try await ledger.unchanged(kind, objects: objects, account: account, livemode: livemode, trackSeen: complete)
            let snapshots = try await Self.decode(
                changed.map { page.objects[$0] }, kind: kind, fetchedAt: page.date ?? reconciler.now(), requestID: page.requestID)
            if let previous = writing {
                report.record(try await previous.value, kind: kind, examples: options.examples)
            }
            let (ledger, account, livemode, dryRun, run) = (ledger, account, livemode, options.dryRun, run)
            writing = Task {
                var result = try await ledger.reconcile(snapshots, account: account, livemode: livemode, dryRun: dryRun, trackSeen: false, run: run)
                result.matched += matched
                return result
            }
            progress(.init(phase: kind.rawValue, listed: report.byKind[kind.rawValue]?.listed ?? 0, drift: report.totalDrift))
        }
        if let previous = writing {
            report.record(try await previous.value, kind: kind, examples: options.examples)
        }
        if complete {
            try await detectGone(kind, into: &report)
        }
    }

    /// Objects the ledger holds that the complete list did not show: fetched one by one, since
    /// a list can lag a moment behind a create. A 404 makes a tombstone.
    func detectGone(_ kind: LedgerObjectKind, into report: inout ReconcileReport) async throws {
        var after: String?
        while true {
            try checkpoint()
            let ids = try await ledger.goneCandidates(kind, account: account, livemode: livemode, after: after, limit: 500)
            guard let last = ids.last else { return }
            after = last
            try await fetchEach(ids.map { (kind, $0) }, reportingGone: true, into: &report)
        }
    }

    /// Payment methods or active entitlements, listed per customer the ledger holds.
    func reconcilePerCustomer(_ kind: LedgerObjectKind, into report: inout ReconcileReport) async throws {
        var after: String?
        while true {
            try checkpoint()
            let customers = try await ledger.customerIDs(account: account, livemode: livemode, after: after, limit: 200)
            guard let last = customers.last else { return }
            after = last
            let pages = try await withThrowingTaskGroup(of: (String, [LedgerSnapshot], [String]).self) { group in
                var results: [(String, [LedgerSnapshot], [String])] = []
                var index = 0
                for customer in customers {
                    if index >= options.concurrency, let next = try await group.next() { results.append(next) }
                    index += 1
                    group.addTask { try await self.listForCustomer(kind, customer: customer) }
                }
                for try await result in group { results.append(result) }
                return results
            }
            for (customer, snapshots, unlisted) in pages {
                report.listed(snapshots.count, kind: kind)
                let result = try await ledger.reconcile(snapshots, account: account, livemode: livemode, dryRun: options.dryRun, trackSeen: false, run: run)
                report.record(result, kind: kind, examples: options.examples)
                // Attached in the ledger, not in Stripe's list: detached since. Fetch to be sure.
                if !unlisted.isEmpty {
                    logger.debug("payment methods no longer attached", metadata: ["customer": "\(customer)", "count": "\(unlisted.count)"])
                    try await fetchEach(unlisted.map { (.paymentMethod, $0) }, reportingGone: true, into: &report)
                }
            }
            progress(.init(phase: kind.rawValue, listed: report.byKind[kind.rawValue]?.listed ?? 0, drift: report.totalDrift))
        }
    }

    var logger: Logger { reconciler.logger }

    /// One customer's payment methods (with the ledger's attached ones Stripe no longer lists)
    /// or active entitlements (as the summary object Stripe's event would carry).
    func listForCustomer(_ kind: LedgerObjectKind, customer: String) async throws -> (String, [LedgerSnapshot], [String]) {
        switch kind {
        case .paymentMethod:
            var snapshots: [LedgerSnapshot] = []
            for try await page in client.list("/v1/customers/\(customer)/payment_methods", account: options.account, priority: .bulk) {
                stripeRequests.withLock { $0 += 1 }
                snapshots += try await Self.decode(page.objects, kind: .paymentMethod, fetchedAt: page.date ?? reconciler.now(), requestID: page.requestID)
            }
            let listed = Set(snapshots.map(\.objectID))
            let held = try await ledger.attachedPaymentMethods(customer: customer, account: account, livemode: livemode)
            return (customer, snapshots, held.filter { !listed.contains($0) })
        default:
            let summary = try await entitlementSummary(customer: customer)
            return (customer, summary.map { [$0] } ?? [], [])
        }
    }

    /// The customer's active entitlements as an `entitlements.active_entitlement_summary`
    /// object. Nil when Stripe lists none and the ledger has none either (nothing to compare).
    func entitlementSummary(customer: String) async throws -> LedgerSnapshot? {
        var elements: [ArraySlice<UInt8>] = []
        var fetchedAt: Int64 = 0
        var requestID: String?
        for try await page in client.list(
            "/v1/entitlements/active_entitlements", parameters: ["customer": .string(customer)], account: options.account, priority: .bulk)
        {
            stripeRequests.withLock { $0 += 1 }
            elements += page.objects.map { ArraySlice($0.bytes) }
            fetchedAt = max(fetchedAt, page.date ?? reconciler.now())
            requestID = page.requestID ?? requestID
        }
        if elements.isEmpty, try await !ledger.hasEntitlementSummary(customer: customer, account: account, livemode: livemode) {
            return nil
        }
        var json = Array(#"{"object":"entitlements.active_entitlement_summary","customer":"#.utf8)
        json += Array(Self.jsonString(customer).utf8)
        json += Array(#","livemode":\#(livemode),"entitlements":{"object":"list","has_more":false,"url":"/v1/customer/"#.utf8)
        json += Array(customer.utf8)
        json += Array(#"/entitlements","data":["#.utf8)
        for (index, element) in elements.enumerated() {
            if index > 0 { json.append(UInt8(ascii: ",")) }
            json += element
        }
        json += Array("]}}".utf8)
        return try Self.snapshot(.entitlementSummary, json: json[...], fetchedAt: fetchedAt, requestID: requestID)
    }

    // MARK: Single fetches

    /// Objects the applier marked for re-fetch (ambiguous ties, truncated lists).
    func refetchMarked(into report: inout ReconcileReport) async throws {
        let queue = try await ledger.refetchQueue(account: account, livemode: livemode, limit: 10_000)
        guard !queue.isEmpty else { return }
        logger.info("re-fetching objects marked by the applier", metadata: ["count": "\(queue.count)"])
        try await fetchEach(queue, reportingGone: false, into: &report)
        report.refetched = queue.count
    }

    /// Fetches each object by id (a few at a time) and reconciles it; a 404 tombstones it.
    func fetchEach(_ objects: [(LedgerObjectKind, String)], reportingGone: Bool, into report: inout ReconcileReport) async throws {
        for chunk in stride(from: 0, to: objects.count, by: options.concurrency * 4).map({ Array(objects[$0..<min($0 + options.concurrency * 4, objects.count)]) }) {
            try checkpoint()
            let fetched = try await withThrowingTaskGroup(of: (LedgerObjectKind, String, Fetched).self) { group in
                for (kind, id) in chunk {
                    group.addTask { (kind, id, try await self.fetch(kind, id: id)) }
                }
                var results: [(LedgerObjectKind, String, Fetched)] = []
                for try await result in group { results.append(result) }
                return results
            }
            for (kind, id, result) in fetched {
                switch result {
                case .snapshot(let snapshot):
                    let page = try await ledger.reconcile([snapshot], account: account, livemode: livemode, dryRun: options.dryRun, trackSeen: false, run: run)
                    report.record(page, kind: kind, examples: options.examples)
                case .gone(let fetchedAt, let requestID):
                    let changed = options.dryRun
                        ? false
                        : try await ledger.markGone(kind, id: id, account: account, livemode: livemode, fetchedAt: fetchedAt, fetchID: "fetch:\(requestID ?? "\(fetchedAt)")", run: run)
                    var page = PageReconciliation()
                    if reportingGone || changed || options.dryRun {
                        page.drifts = [ObjectDrift(kind: kind, id: id, drift: .goneInStripe, fields: [], outcome: options.dryRun ? .dryRun : (changed ? .repaired : .keptNewer))]
                    }
                    report.record(page, kind: kind, examples: options.examples)
                case .nothing:
                    break
                }
            }
        }
    }

    enum Fetched: Sendable {
        case snapshot(LedgerSnapshot)
        case gone(fetchedAt: Int64, requestID: String?)
        case nothing
    }

    /// GETs one object; 404 means gone.
    func fetch(_ kind: LedgerObjectKind, id: String) async throws -> Fetched {
        if kind == .entitlementSummary {
            return try await entitlementSummary(customer: id).map(Fetched.snapshot) ?? .nothing
        }
        let path: String
        switch kind {
        case .customer: path = "/v1/customers/\(id)"
        case .subscription: path = "/v1/subscriptions/\(id)"
        case .invoice: path = "/v1/invoices/\(id)"
        case .paymentMethod: path = "/v1/payment_methods/\(id)"
        case .price: path = "/v1/prices/\(id)"
        case .product: path = "/v1/products/\(id)"
        case .checkoutSession: path = "/v1/checkout/sessions/\(id)"
        case .invoicePayment: path = "/v1/invoice_payments/\(id)"
        case .entitlementSummary: return .nothing
        }
        stripeRequests.withLock { $0 += 1 }
        do {
            let response = try await client.send(.get, path, account: options.account, priority: .bulk)
            let fetchedAt = response.date ?? reconciler.now()
            return .snapshot(try Self.snapshot(kind, json: response.body[...], fetchedAt: fetchedAt, requestID: response.requestID))
        } catch let error as StripeError where error.kind == .notFound {
            return .gone(fetchedAt: reconciler.now(), requestID: error.requestID)
        }
    }

    // MARK: Events

    /// Walks `/v1/events` from the stored cursor (at most Stripe's 30-day window) and puts every
    /// event the inbox lacks into it, where the applier treats it like a webhook delivery.
    func recoverEvents(into report: inout ReconcileReport) async throws {
        let runs = reconciler.store.reconcileRuns
        let now = reconciler.now()
        var events = ReconcileReport.EventsReport()
        let cursor = try await runs.eventCursor(account: account, livemode: livemode)
        let oldest = now - Reconciler.eventWindow
        events.from = max(oldest, (cursor?.created ?? oldest) - Reconciler.cursorOverlap)
        if let cursor, now - cursor.walkedAt > Reconciler.staleCursor {
            let days = (now - cursor.walkedAt) / 86_400
            events.warning = "the missed-events cursor is \(days) days old (last walk \(UTCTimestamp.string(cursor.walkedAt))); Stripe lists events for 30 days only, so events older than that cannot be recovered. Run the events sweep more often (BILLINGD_EVENTS_SWEEP_INTERVAL) and a full `billingd reconcile` now."
            logger.warning("\(events.warning!)")
        } else if cursor == nil {
            logger.notice("no missed-events cursor yet: walking Stripe's whole 30-day event window")
        }
        let inbox = reconciler.inbox
        var newest = cursor?.created ?? 0
        let receivedAt = Int64(Date().timeIntervalSince1970 * 1000)
        let pages = Prefetching(
            client.list("/v1/events", parameters: ["created": .dictionary(["gte": .integer(events.from)])], account: options.account, priority: .bulk))
        while let page = try await pages.next() {
            try checkpoint()
            stripeRequests.withLock { $0 += 1 }
            var deliveries: [InboxDelivery] = []
            for object in page.objects {
                let body = Array(object.bytes)
                guard let envelope = try? EventEnvelope(decoding: body) else {
                    logger.warning("skipping an event /v1/events returned that is not a Stripe event", metadata: ["id": "\(object.id)"])
                    continue
                }
                newest = max(newest, envelope.created)
                deliveries.append(InboxDelivery(envelope: envelope, body: body, receivedAt: receivedAt, source: .api, secretIndex: nil))
            }
            events.listed += deliveries.count
            if options.dryRun {
                for delivery in deliveries
                where try await !inbox.contains(eventID: delivery.envelope.id, account: delivery.envelope.account, livemode: delivery.envelope.livemode) {
                    events.recovered += 1
                }
            } else {
                let outcomes = try await inbox.insert(deliveries)
                events.recovered += outcomes.filter { if case .stored = $0 { true } else { false } }.count
            }
            progress(.init(phase: "events", listed: events.listed, drift: events.recovered))
        }
        if !options.dryRun {
            try await runs.advanceEventCursor(account: account, livemode: livemode, created: max(newest, events.from), walkedAt: now)
            events.cursor = max(newest, events.from)
            if events.recovered > 0 {
                logger.notice("recovered events Stripe never delivered", metadata: ["count": "\(events.recovered)"])
                reconciler.eventsStored()
                if options.applyRecoveredEvents {
                    events.applied = try await reconciler.applier.drain().applied
                }
            }
        }
        report.events = events
    }

    // MARK: Decoding

    /// Decodes a page's objects into snapshots versioned at the fetch time, on two tasks.
    static func decode(_ objects: [StripeObjectJSON], kind: LedgerObjectKind, fetchedAt: Int64, requestID: String?) async throws -> [LedgerSnapshot] {
        let half = objects.count / 2
        guard half >= 8 else {
            return try objects.map { try snapshot(kind, json: ArraySlice($0.bytes), fetchedAt: fetchedAt, requestID: requestID) }
        }
        async let first = Task { try objects[..<half].map { try snapshot(kind, json: ArraySlice($0.bytes), fetchedAt: fetchedAt, requestID: requestID) } }.value
        let second = try objects[half...].map { try snapshot(kind, json: ArraySlice($0.bytes), fetchedAt: fetchedAt, requestID: requestID) }
        return try await first + second
    }

    static func snapshot(_ kind: LedgerObjectKind, json: ArraySlice<UInt8>, fetchedAt: Int64, requestID: String?) throws -> LedgerSnapshot {
        try APISnapshot.decode(kind, json: json, fetchedAt: fetchedAt, requestID: requestID)
    }

    static func jsonString(_ text: String) -> String {
        let data = try? JSONSerialization.data(withJSONObject: [text], options: [.fragmentsAllowed])
        return data.flatMap { String(data: $0, encoding: .utf8) }.map { String($0.dropFirst().dropLast()) } ?? "\"\""
    }
}

/// Objects read from Stripe's API as ledger snapshots.
public enum APISnapshot {
    /// One object read from the API as a snapshot. Its version is the time Stripe answered (the
    /// `Date` header, Stripe's clock), so an event created later still wins and one created
    /// earlier never overwrites it.
    public static func decode(_ kind: LedgerObjectKind, json: ArraySlice<UInt8>, fetchedAt: Int64, requestID: String?) throws -> LedgerSnapshot {
        let eventID = "fetch:\(requestID ?? String(fetchedAt))"
        let snapshot = try LedgerSnapshot.decode(
            kind: kind, deletion: false, eventType: nil, eventID: eventID, eventCreated: fetchedAt, objectJSON: json)
        if case .paymentMethod(let method) = snapshot.object, method.customer == nil {
            // Detached: final, as the payment_method.detached event would make it.
            return try LedgerSnapshot.decode(
                kind: kind, deletion: false, eventType: "payment_method.detached", eventID: eventID, eventCreated: fetchedAt, objectJSON: json)
        }
        return snapshot
    }

    /// The snapshot of an API answer (`StripeResponse`), versioned at its `Date` header.
    public static func decode(_ kind: LedgerObjectKind, response: StripeResponse) throws -> LedgerSnapshot {
        try decode(
            kind, json: response.body[...], fetchedAt: response.date ?? Int64(Date().timeIntervalSince1970), requestID: response.requestID)
    }
}

/// Keeps one page request in flight ahead of the consumer, so that Stripe's latency overlaps
/// with decoding and writing the current page. At most two pages are in memory.
final class Prefetching: Sendable {
    /// The request for the page after the one last returned, in flight.
    private let ahead: Mutex<Task<StripeListPage?, any Error>?>
    private let iterator: Mutex<StripeListPages.AsyncIterator>

    init(_ pages: StripeListPages) {
        iterator = Mutex(pages.makeAsyncIterator())
        ahead = Mutex(nil)
    }

    func next() async throws -> StripeListPage? {
        let pending = ahead.withLock { $0.take() } ?? fetch()
        let page = try await pending.value
        if page != nil {
            ahead.withLock { $0 = fetch() }
        }
        return page
    }

    private func fetch() -> Task<StripeListPage?, any Error> {
        Task { try await self.advance() }
    }

    private func advance() async throws -> StripeListPage? {
        var current = iterator.withLock { $0 }
        let page = try await current.next()
        iterator.withLock { $0 = current }
        return page
    }

    deinit {
        ahead.withLock { $0?.cancel() }
    }
}
