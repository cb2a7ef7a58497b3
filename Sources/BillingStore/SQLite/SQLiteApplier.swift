import BillingCore
import Foundation
import GRDB

/// Applies the inbox to the ledger under the version guard: new deliveries in the group commit
/// that stores them (``ingest(_:now:)``), and what is left queued in commit order (``drain``):
/// each due event is decoded, routed and applied, and its inbox row records the outcome. A
/// failing event is retried with exponential backoff and ends `dead` after a bounded number of
/// tries, without holding back the events behind it.
public struct InboxApplier: EventApplier {
    let database: LedgerDatabase
    public let configuration: ApplierConfiguration

    public init(database: LedgerDatabase, configuration: ApplierConfiguration = .init()) {
        self.database = database
        self.configuration = configuration
    }

    typealias DueEvent = InboxQueue.DueEvent

    /// The outcome of decoding one event, computed outside the write transaction.
    enum Decoded: Sendable {
        case snapshot(LedgerSnapshot)
        case appStore(AppStoreDelivery)
        /// A refund of a charge that paid an invoice: recorded, and announced to the app.
        case refund(Charge)
        case recordOnly
        case ignored
        case failure(String)
    }

    /// Applies every due event, batch after batch, until none is left. `now` is Unix ms.
    ///
    /// Pipelined: while one batch is written (on GRDB's writer), the next is read and decoded
    /// on the other cores. A cursor on `seq` keeps the next read from seeing the batch in flight.
    @discardableResult
    public func drain(
        now: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
        progress: @Sendable (ApplyPass) -> Void = { _ in }
    ) async throws -> ApplyPass {
        var total = ApplyPass()
        var batch = try await fetchDue(now: now(), after: 0)
        var decoded = await Self.decodeConcurrently(batch)
        while !batch.isEmpty {
            let (current, currentDecoded, time) = (batch, decoded, now())
            async let written = write(current, decoded: currentDecoded, now: time)
            if current.count == configuration.batchSize, let last = current.last {
                batch = try await fetchDue(now: now(), after: last.seq)
                decoded = await Self.decodeConcurrently(batch)
            } else {
                batch = []
            }
            total.add(try await written)
            progress(total)
        }
        return total
    }

    /// Writes one batch in one transaction. Savepoints per event cost two statements each, so
    /// the batch is first written without them; only if a ledger write fails is it rolled back
    /// and written again with each event in its own savepoint, so one bad event fails alone.
    private func write(_ due: [DueEvent], decoded: [Decoded], now: Int64) async throws -> ApplyPass {
        do {
            return try await database.writer.write { db in try apply(due: due, decoded: decoded, now: now, isolated: false, db: db) }
        } catch {
            return try await database.writer.write { db in try apply(due: due, decoded: decoded, now: now, isolated: true, db: db) }
        }
    }

    /// Reads up to one batch of due events after a position in the inbox.
    private func fetchDue(now: Int64, after seq: Int64) async throws -> [DueEvent] {
        try await InboxQueue(database: database).due(now: now, after: seq, limit: configuration.batchSize)
    }

    /// Decodes a batch on as many cores as there are, keeping its order.
    static func decodeConcurrently(_ events: [DueEvent]) async -> [Decoded] {
        let parts = min(ProcessInfo.processInfo.activeProcessorCount, max(1, events.count / 64))
        if parts <= 1 { return events.map(decode) }
        let size = (events.count + parts - 1) / parts
        return await withTaskGroup(of: (Int, [Decoded]).self) { group in
            for part in 0..<parts {
                let slice = events[min(part * size, events.count)..<min((part + 1) * size, events.count)]
                group.addTask { (part, slice.map(decode)) }
            }
            var results = Array(repeating: [Decoded](), count: parts)
            for await (part, decoded) in group { results[part] = decoded }
            return results.flatMap { $0 }
        }
    }

    private static func decode(_ event: DueEvent) -> Decoded {
        decode(source: event.source, type: event.type, eventID: event.eventID, created: event.created, body: event.body)
    }

    /// Decodes a stored or arriving event: routes its type, and decodes the object the ledger keeps.
    static func decode(source: InboxSource, type: String, eventID: String, created: Int64, body: [UInt8]) -> Decoded {
        if source.isAppStore { return decodeAppStore(source: source, type: type, body: body) }
        let route = EventRoute(eventType: type)
        let kind: LedgerObjectKind
        let deletion: Bool
        switch route {
        case .ignored: return .ignored
        case .recordOnly: return .recordOnly
        case .refund: return decodeRefund(body: body)
        case .snapshot(let routed): (kind, deletion) = (routed, false)
        case .deletion(let routed): (kind, deletion) = (routed, true)
        }
        guard let object = RawObjectLocator.object(in: body) else {
            return .failure(LedgerSnapshot.DecodingFailure.noObject.description)
        }
        do {
            return .snapshot(
                try LedgerSnapshot.decode(
                    kind: kind, deletion: deletion, eventType: type, eventID: eventID, eventCreated: created, objectJSON: object))
        } catch {
            return .failure(error.description)
        }
    }

    /// A refunded charge. Only a charge that paid an invoice of a customer can be a
    /// subscription's payment; any other (a one-off payment, or an API version whose charges no
    /// longer name their invoice) is only recorded.
    private static func decodeRefund(body: [UInt8]) -> Decoded {
        guard let object = RawObjectLocator.object(in: body) else {
            return .failure(LedgerSnapshot.DecodingFailure.noObject.description)
        }
        do {
            let charge = try JSONDecoder().decode(Charge.self, fromUntrusted: object)
            guard charge.invoice != nil, charge.customer != nil else { return .recordOnly }
            return .refund(charge)
        } catch {
            return .failure("data.object is not a valid charge: \(LedgerSnapshot.describe(error))")
        }
    }

    /// An App Store row: a notification (types billingd does not apply are ignored) or a
    /// transaction the app forwarded. Both were verified before they were stored.
    private static func decodeAppStore(source: InboxSource, type: String, body: [UInt8]) -> Decoded {
        do {
            switch source {
            case .appStoreApp:
                return .appStore(.app(try AppStoreAppTransaction(body: body)))
            case .appStoreAPI:
                return .appStore(.server(try AppStoreServerSnapshot(body: body)))
            default:
                guard AppStoreDelivery.appliedNotificationTypes.contains(type) else { return .ignored }
                return .appStore(.notification(try AppStoreNotification(storedBody: body)))
            }
        } catch {
            return .failure(error.description)
        }
    }

    /// Writes a decoded snapshot or App Store delivery to the ledger under its version guard.
    static func applyToLedger(_ decoded: Decoded, eventID: String, account: String, livemode: Bool, db: Database) throws -> ApplyEffect {
        switch decoded {
        case .snapshot(let snapshot):
            let effect = try LedgerWriter.apply(snapshot, account: account, livemode: livemode, db: db)
            try LedgerWriter.linkCheckoutUser(snapshot, account: account, livemode: livemode, db: db)
            return effect
        case .appStore(let delivery):
            return try AppStoreLedgerWriter.apply(
                delivery, environment: AppStoreLedgerWriter.environment(inboxAccount: account), sourceID: eventID, db: db)
        case .recordOnly, .refund:
            return .recorded
        case .ignored, .failure:
            return .unchanged
        }
    }

    /// Counts an event of another API version than the configured one.
    func countVersion(_ version: String?, in pass: inout ApplyPass) {
        configuration.countVersion(version, in: &pass)
    }

    private func apply(due: [DueEvent], decoded: [Decoded], now: Int64, isolated: Bool, db: Database) throws -> ApplyPass {
        var pass = ApplyPass()
        var touches = OutboxTouches()
        for (event, outcome) in zip(due, decoded) {
            pass.processed += 1
            countVersion(event.apiVersion, in: &pass)
            var failure: String?
            switch outcome {
            case .ignored:
                try InboxQueue.recordDone(seq: event.seq, status: .ignored, effect: nil, at: now, db: db)
                pass.ignored += 1
            case .recordOnly:
                try InboxQueue.recordDone(seq: event.seq, status: .applied, effect: .recorded, at: now, db: db)
                pass.applied += 1
            case .refund:
                try InboxQueue.recordDone(seq: event.seq, status: .applied, effect: .recorded, at: now, db: db)
                pass.applied += 1
                if database.outbox != nil { Self.touch(outcome, account: event.account, livemode: event.livemode, into: &touches) }
            case .snapshot, .appStore:
                do {
                    var effect = ApplyEffect.unchanged
                    if isolated {
                        try db.inSavepoint {
                            effect = try Self.applyToLedger(outcome, eventID: event.eventID, account: event.account, livemode: event.livemode, db: db)
                            return .commit
                        }
                    } else {
                        effect = try Self.applyToLedger(outcome, eventID: event.eventID, account: event.account, livemode: event.livemode, db: db)
                    }
                    try InboxQueue.recordDone(seq: event.seq, status: .applied, effect: effect, at: now, db: db)
                    if effect == .stale { pass.stale += 1 } else { pass.applied += 1 }
                    if effect != .stale, database.outbox != nil {
                        Self.touch(outcome, account: event.account, livemode: event.livemode, into: &touches)
                    }
                } catch {
                    // Without savepoints the transaction cannot continue: let the caller retry
                    // the batch with each event isolated.
                    guard isolated else { throw error }
                    failure = "ledger write failed: \(error)"
                }
            case .failure(let reason):
                failure = reason
            }
            if let failure {
                let (attempts, retryAt) = configuration.failure(afterAttempts: event.attempts, now: now)
                try InboxQueue.recordFailure(seq: event.seq, attempts: attempts, error: failure, retryAt: retryAt, at: now, db: db)
                if retryAt == nil { pass.dead += 1 } else { pass.failed += 1 }
            }
        }
        if let policy = database.outbox { try OutboxLedger.announce(touches, policy: policy, now: now, db: db) }
        return pass
    }

    /// Notes the users whose view a decoded event that changed the ledger may have changed.
    static func touch(_ decoded: Decoded, account: String, livemode: Bool, into touches: inout OutboxTouches) {
        switch decoded {
        case .snapshot(let snapshot): touches.add(snapshot, account: account, livemode: livemode)
        case .appStore(let delivery): touches.add(delivery, environment: AppStoreLedgerWriter.environment(inboxAccount: account))
        case .refund(let charge): touches.add(charge, account: account, livemode: livemode)
        case .recordOnly, .ignored, .failure: break
        }
    }

    /// Exponential backoff with ±20 % jitter, capped.
    func retryDelayMilliseconds(afterAttempt attempt: Int) -> Int64 {
        configuration.retryDelayMilliseconds(afterAttempt: attempt)
    }
}

extension ApplierConfiguration {
    /// Exponential backoff with ±20 % jitter, capped.
    func retryDelayMilliseconds(afterAttempt attempt: Int) -> Int64 {
        let first = Double(firstRetryDelay.components.seconds) * 1000 + Double(firstRetryDelay.components.attoseconds) / 1e15
        let cap = Double(maximumRetryDelay.components.seconds) * 1000
        let base = min(cap, first * pow(2, Double(max(0, attempt - 1))))
        return Int64(base * Double.random(in: 0.8...1.2))
    }

    /// What a failed try leaves: the attempts so far and, unless the event is now dead, when it
    /// is tried next.
    func failure(afterAttempts previous: Int, now: Int64) -> (attempts: Int, retryAt: Int64?) {
        let attempts = previous + 1
        return (attempts, attempts >= maximumAttempts ? nil : now + retryDelayMilliseconds(afterAttempt: attempts))
    }

    /// Counts an event of another API version than the configured one.
    func countVersion(_ version: String?, in pass: inout ApplyPass) {
        guard let version, version != apiVersion else { return }
        pass.otherAPIVersion += 1
        pass.apiVersions[version, default: 0] += 1
    }
}
