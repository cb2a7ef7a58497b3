import Foundation

/// A decoded object of one of the kinds the ledger keeps.
public enum LedgerObject: Sendable, Equatable {
    case customer(Customer)
    case subscription(Subscription)
    case invoice(Invoice)
    case paymentMethod(PaymentMethod)
    case price(Price)
    case product(Product)
    case checkoutSession(CheckoutSession)
    case entitlementSummary(ActiveEntitlementSummary)
    case invoicePayment(InvoicePayment)
}

/// One snapshot of one object, ready for the ledger: the decoded object, its key, and its
/// version under the ordering rule. Pure: built from bytes, no I/O.
public struct LedgerSnapshot: Sendable, Equatable {
    public let kind: LedgerObjectKind
    /// The object's key: its id (for an entitlement summary, the customer's id).
    public let objectID: String
    public let object: LedgerObject
    public let version: SnapshotVersion
    /// Stripe cut an embedded list short (items, lines, entitlements): the ledger holds what was
    /// sent and marks the object for re-fetch.
    public let truncated: Bool
    /// The object's JSON exactly as Stripe sent it.
    public let raw: ArraySlice<UInt8>
    /// A subscription's coupons that last forever (what its monthly amount is net of), decoded
    /// with it, so that the write transaction does not decode the JSON again; nil for other kinds.
    public let subscriptionDiscounts: SubscriptionDiscounts?
    /// `raw` in the form the store keeps it, when the store prepared it off its write transaction
    /// (as it decodes a delivery on the sender's task): compressed, or empty when the JSON is kept
    /// in the body of the event that carried it; nil leaves it to the writer.
    /// Not part of the snapshot's identity: two snapshots of the same bytes are equal either way.
    public var storedRaw: [UInt8]?

    /// Why an event's object could not be taken into the ledger.
    public enum DecodingFailure: Error, Sendable, Equatable, CustomStringConvertible {
        case noObject
        case invalid(kind: LedgerObjectKind, reason: String)
        case noID(kind: LedgerObjectKind)

        public var description: String {
            switch self {
            case .noObject: "the event has no data.object"
            case .invalid(let kind, let reason): "data.object is not a valid \(kind.rawValue): \(reason)"
            case .noID(let kind): "the \(kind.rawValue) in data.object has no id"
            }
        }
    }

    /// Decodes the snapshot an event carries.
    /// - Parameters:
    ///   - deletion: the event deletes the object (`customer.deleted`, `invoice.deleted` …).
    ///   - eventType: decides what the evidence cannot (a detached payment method is final).
    ///   - eventCreated: `event.created`, or the fetch time for API reads.
    public static func decode(
        kind: LedgerObjectKind, deletion: Bool, eventType: String?, eventID: String, eventCreated: Int64,
        objectJSON raw: ArraySlice<UInt8>
    ) throws(DecodingFailure) -> LedgerSnapshot {
        let decoder = JSONDecoder()
        func decode<T: Decodable>(_ type: T.Type) throws(DecodingFailure) -> T {
            do {
                return try decoder.decode(T.self, fromUntrusted: raw)
            } catch {
                throw .invalid(kind: kind, reason: Self.describe(error))
            }
        }

        var id: String
        var object: LedgerObject
        var terminal = false
        var transitionAt: Int64 = 0
        var rank = 0
        var truncated = false
        var isDeleted = deletion
        var discounts: SubscriptionDiscounts?

        switch kind {
        case .customer:
            let customer = try decode(Customer.self)
            (id, object) = (customer.id, .customer(customer))
            isDeleted = isDeleted || customer.deleted
        case .subscription:
            let subscription = try decode(Subscription.self)
            (id, object) = (subscription.id, .subscription(subscription))
            // Its discounts' shapes vary by API version; ones that do not decode count as none.
            discounts = (try? decoder.decode(SubscriptionDiscounts.self, fromUntrusted: raw)) ?? SubscriptionDiscounts(forever: [])
            (rank, terminal) = LifecycleEvidence.rank(subscription.status)
            transitionAt = max(subscription.canceledAt ?? 0, subscription.endedAt ?? 0)
            truncated = subscription.itemsHasMore
        case .invoice:
            let invoice = try decode(Invoice.self)
            guard let invoiceID = invoice.id else { throw .noID(kind: kind) }
            (id, object) = (invoiceID, .invoice(invoice))
            (rank, terminal) = LifecycleEvidence.rank(invoice.status)
            let transitions = invoice.statusTransitions
            transitionAt = [transitions.finalizedAt, transitions.paidAt, transitions.voidedAt, transitions.markedUncollectibleAt]
                .compactMap { $0 }.max() ?? 0
            truncated = invoice.linesHasMore
            isDeleted = isDeleted || invoice.deleted
        case .paymentMethod:
            let method = try decode(PaymentMethod.self)
            (id, object) = (method.id, .paymentMethod(method))
            // Stripe never re-attaches a detached payment method.
            terminal = eventType == "payment_method.detached"
        case .price:
            let price = try decode(Price.self)
            (id, object) = (price.id, .price(price))
            isDeleted = isDeleted || price.deleted
        case .product:
            let product = try decode(Product.self)
            (id, object) = (product.id, .product(product))
            isDeleted = isDeleted || product.deleted
        case .checkoutSession:
            let session = try decode(CheckoutSession.self)
            (id, object) = (session.id, .checkoutSession(session))
            (rank, terminal) = LifecycleEvidence.rank(session.status)
        case .entitlementSummary:
            let summary = try decode(ActiveEntitlementSummary.self)
            (id, object) = (summary.customer, .entitlementSummary(summary))
            truncated = summary.hasMore
        case .invoicePayment:
            let payment = try decode(InvoicePayment.self)
            (id, object) = (payment.id, .invoicePayment(payment))
            terminal = payment.status == "paid" || payment.status == "canceled"
            rank = terminal ? 1 : 0
            transitionAt = payment.paidAt ?? 0
        }
        guard !id.isEmpty else { throw .noID(kind: kind) }
        if let character = StoredText.firstControlCharacter(id) {
            throw .invalid(kind: kind, reason: "its id holds a control character (\(character))")
        }
        return LedgerSnapshot(
            kind: kind, objectID: id, object: object,
            version: SnapshotVersion(
                deleted: isDeleted, terminal: terminal, eventCreated: eventCreated, transitionAt: transitionAt,
                statusRank: rank, eventID: eventID),
            truncated: truncated, raw: raw, subscriptionDiscounts: discounts)
    }

    /// A decoding error as a path and a reason, for an inbox row's `lastError`.
    package static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.keyNotFound(_, let context), DecodingError.dataCorrupted(let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
        default:
            return "\(error)"
        }
    }
}

extension LedgerSnapshot {
    /// Equal when they are the same snapshot of the same bytes, whether or not a store prepared
    /// ``storedRaw``.
    public static func == (lhs: LedgerSnapshot, rhs: LedgerSnapshot) -> Bool {
        lhs.kind == rhs.kind && lhs.objectID == rhs.objectID && lhs.object == rhs.object && lhs.version == rhs.version
            && lhs.truncated == rhs.truncated && lhs.raw == rhs.raw && lhs.subscriptionDiscounts == rhs.subscriptionDiscounts
    }
}
