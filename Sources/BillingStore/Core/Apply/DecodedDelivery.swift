import BillingCore
import Foundation

/// The outcome of decoding one delivery or stored event, computed outside the write
/// transaction: what either backend's applier writes (or why it cannot).
enum DecodedDelivery: Sendable {
    case snapshot(LedgerSnapshot)
    case appStore(AppStoreDelivery)
    /// A refund of a charge that paid an invoice: recorded, and announced to the app.
    case refund(Charge)
    /// A refund's state, kept for the revenue metrics under its own version guard.
    case refundSnapshot(RefundSnapshot)
    case recordOnly
    case ignored
    case failure(String)
}

extension DecodedDelivery {
    /// Decodes a batch on as many cores as there are, keeping its order.
    static func decodeConcurrently(_ events: [DueEvent]) async -> [DecodedDelivery] {
        let parts = min(ProcessInfo.processInfo.activeProcessorCount, max(1, events.count / 64))
        if parts <= 1 { return events.map(decode) }
        let size = (events.count + parts - 1) / parts
        return await withTaskGroup(of: (Int, [DecodedDelivery]).self) { group in
            for part in 0..<parts {
                let slice = events[min(part * size, events.count)..<min((part + 1) * size, events.count)]
                group.addTask { (part, slice.map(decode)) }
            }
            var results = Array(repeating: [DecodedDelivery](), count: parts)
            for await (part, decoded) in group { results[part] = decoded }
            return results.flatMap { $0 }
        }
    }

    private static func decode(_ event: DueEvent) -> DecodedDelivery {
        decode(source: event.source, type: event.type, eventID: event.eventID, created: event.created, body: event.body)
    }

    /// Decodes a stored or arriving event: routes its type, and decodes the object the ledger keeps.
    static func decode(source: InboxSource, type: String, eventID: String, created: Int64, body: [UInt8]) -> DecodedDelivery {
        if source.isAppStore { return decodeAppStore(source: source, type: type, body: body) }
        let route = EventRoute(eventType: type)
        let kind: LedgerObjectKind
        let deletion: Bool
        switch route {
        case .ignored: return .ignored
        case .recordOnly: return .recordOnly
        case .refund: return decodeRefund(body: body)
        case .refundSnapshot: return decodeRefundSnapshot(body: body, eventID: eventID, created: created)
        case .snapshot(let routed): (kind, deletion) = (routed, false)
        case .deletion(let routed): (kind, deletion) = (routed, true)
        }
        guard let object = RawObjectLocator.object(in: body) else {
            return .failure(LedgerSnapshot.DecodingFailure.noObject.description)
        }
        do {
            var snapshot = try LedgerSnapshot.decode(
                kind: kind, deletion: deletion, eventType: type, eventID: eventID, eventCreated: created, objectJSON: object)
            // The JSON is `data.object` of this event's body, which the inbox keeps beside the
            // row (in the same transaction when the event is applied as it is stored): the row
            // names the event (vEventID) instead of keeping a second copy (StoredJSON).
            if kind.keepsRawJSON { snapshot.storedRaw = StoredJSON.inEventBody }
            return .snapshot(snapshot)
        } catch {
            return .failure(error.description)
        }
    }

    /// A refunded charge. Only a charge that paid an invoice of a customer can be a
    /// subscription's payment; any other (a one-off payment, or an API version whose charges no
    /// longer name their invoice) is only recorded.
    private static func decodeRefund(body: [UInt8]) -> DecodedDelivery {
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

    /// A refund object (`refund.*`, `charge.refund.updated`), versioned by its event.
    private static func decodeRefundSnapshot(body: [UInt8], eventID: String, created: Int64) -> DecodedDelivery {
        guard let object = RawObjectLocator.object(in: body) else {
            return .failure(LedgerSnapshot.DecodingFailure.noObject.description)
        }
        do {
            let refund = try JSONDecoder().decode(Refund.self, fromUntrusted: object)
            return .refundSnapshot(RefundSnapshot(refund: refund, eventCreated: created, eventID: eventID))
        } catch {
            return .failure("data.object is not a valid refund: \(LedgerSnapshot.describe(error))")
        }
    }

    /// A stored App Store row: a notification (types billingd does not apply are ignored), a
    /// transaction the app forwarded, or one fetched from the API. All were verified before they
    /// were stored; their JWS are decoded here without verifying again.
    private static func decodeAppStore(source: InboxSource, type: String, body: [UInt8]) -> DecodedDelivery {
        do {
            switch source {
            case .appStoreApp:
                return .appStore(.app(try AppStoreAppTransaction(body: body)))
            case .appStoreAPI:
                return .appStore(.server(try AppStoreServerSnapshot(body: body)))
            default:
                guard AppStoreNotificationType(rawValue: type).isApplied else { return .ignored }
                return .appStore(.notification(try AppStoreNotification(storedBody: body)))
            }
        } catch {
            return .failure(error.description)
        }
    }

    /// App Store data verified and decoded by the caller: applied as it is, a notification of a
    /// type billingd does not apply ignored, as ``decodeAppStore(source:type:body:)`` does with
    /// the same data read back from the inbox.
    static func verified(_ delivery: AppStoreDelivery) -> DecodedDelivery {
        if case .notification(let notification) = delivery, !notification.notificationType.isApplied { return .ignored }
        return .appStore(delivery)
    }
}

extension PreparedDelivery {
    /// A delivery decoded for a group commit, on the caller's task, for either backend; one whose
    /// App Store data the caller verified and holds is not decoded again.
    init(_ delivery: InboxDelivery) {
        let envelope = delivery.envelope
        if let verified = delivery.verifiedAppStore {
            self.init(delivery: delivery, decoded: .verified(verified))
            return
        }
        self.init(
            delivery: delivery,
            decoded: DecodedDelivery.decode(
                source: delivery.source, type: envelope.type, eventID: envelope.id, created: envelope.created, body: delivery.body))
    }
}

extension AppStoreDelivery {
    /// The App Store environment an inbox row's writes are keyed by: the one its account names
    /// (see ``InboxAccount``). Only App Store rows decode to App Store deliveries; any other
    /// account would key them by its own text, as it always has.
    static func environment(inboxAccount account: String) -> String {
        InboxAccount(column: account).appStoreEnvironment?.rawValue ?? account
    }
}

extension OutboxTouches {
    /// Notes the users whose view a decoded event that changed the ledger may have changed.
    mutating func add(_ decoded: DecodedDelivery, account: String, livemode: Bool) {
        switch decoded {
        case .snapshot(let snapshot): add(snapshot, account: account, livemode: livemode)
        case .appStore(let delivery): add(delivery, environment: AppStoreDelivery.environment(inboxAccount: account))
        case .refund(let charge): add(charge, account: account, livemode: livemode)
        case .refundSnapshot, .recordOnly, .ignored, .failure: break
        }
    }
}
