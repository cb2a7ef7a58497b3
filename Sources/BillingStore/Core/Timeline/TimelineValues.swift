import BillingCore
import Foundation

/// One step of a user's history.
public struct TimelineItem: Sendable, Equatable {
    /// What happened, e.g. `stripe.event`, `grant.created` (``TimelineKind``).
    public var kind: TimelineKind
    /// Unix seconds.
    public var at: Int64
    /// Where it came from: `stripe`, `app_store`, `reconcile`, `grant`, `usage`, `outbox` or `billingd`.
    public var source: String
    /// One line for a person.
    public var summary: String
    /// The id to look further with: an event or notification id, a grant id, a meter, a webhook id.
    public var ref: String?
    /// The access the step left the user with; only on ``TimelineKind/entitlementChanged``.
    public var entitlement: TimelineEntitlement?
    /// What orders items of one second (with ``kind``'s rank) and tells them apart.
    public var tiebreak: String

    public init(
        kind: TimelineKind, at: Int64, source: String, summary: String, ref: String?, entitlement: TimelineEntitlement? = nil,
        tiebreak: String
    ) {
        self.kind = kind
        self.at = at
        self.source = source
        self.summary = summary
        self.ref = ref
        self.entitlement = entitlement
        self.tiebreak = tiebreak
    }

    /// The item's place in the timeline: newer first, then by rank (a result above its cause),
    /// then by tiebreak, so that items of one second keep one order.
    var position: TimelineCursor { TimelineCursor(at: at, rank: kind.rank, tiebreak: tiebreak) }
}

/// The access a user had after a step.
public struct TimelineEntitlement: Sendable, Equatable {
    /// The tier's id; nil for a price the catalog does not map.
    public var tier: String?
    /// `stripe`, `app_store` or `grant`; nil when nothing entitles the user.
    public var source: String?
    /// Unix seconds until which access holds without another change; nil when not entitled or open-ended.
    public var validUntil: Int64?

    public init(tier: String?, source: String?, validUntil: Int64?) {
        self.tier = tier
        self.source = source
        self.validUntil = validUntil
    }
}

/// The kinds of timeline items; the raw value is the contract.
public enum TimelineKind: String, Sendable, CaseIterable {
    case stripeEvent = "stripe.event"
    case appStoreNotification = "appstore.notification"
    case appStoreTransaction = "appstore.transaction"
    case appStoreConsumptionRequest = "appstore.consumption_request"
    case reconcileRepair = "reconcile.repair"
    case grantCreated = "grant.created"
    case grantRevoked = "grant.revoked"
    case grantExpired = "grant.expired"
    case usagePeriodReset = "usage.period_reset"
    case usageLimitHit = "usage.limit_hit"
    case outboxDelivery = "outbox.delivery"
    case entitlementChanged = "entitlement.changed"

    /// Within one second, higher ranks come first: the access that resulted, then its
    /// announcement, then the grant or store event that caused it (a refund request before the
    /// notification that brought it), then usage.
    var rank: Int {
        switch self {
        case .entitlementChanged: 9
        case .outboxDelivery: 8
        case .grantCreated, .grantRevoked, .grantExpired, .appStoreConsumptionRequest: 5
        case .stripeEvent, .appStoreNotification, .appStoreTransaction, .reconcileRepair: 4
        case .usagePeriodReset, .usageLimitHit: 3
        }
    }
}

/// Where a page ended: the last item's second, rank and tiebreak. Opaque to clients
/// (``encoded``); keyed on what items keep, so a page after it holds every older item exactly
/// once however many newer ones are written meanwhile.
public struct TimelineCursor: Sendable, Equatable, Comparable {
    public var at: Int64
    public var rank: Int
    public var tiebreak: String

    init(at: Int64, rank: Int, tiebreak: String) {
        self.at = at
        self.rank = rank
        self.tiebreak = tiebreak
    }

    /// Older first: the timeline runs in descending order of this.
    public static func < (lhs: TimelineCursor, rhs: TimelineCursor) -> Bool {
        (lhs.at, lhs.rank) != (rhs.at, rhs.rank) ? (lhs.at, lhs.rank) < (rhs.at, rhs.rank) : lhs.tiebreak.utf8.lexicographicallyPrecedes(rhs.tiebreak.utf8)
    }

    /// The cursor as clients pass it back: `t1.` and base64url of `at.rank.tiebreak`.
    public var encoded: String {
        let text = "\(at).\(rank).\(tiebreak)"
        return "t1." + Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Reads a cursor a page handed out; nil for anything else.
    public init?(encoded: String) {
        guard encoded.utf8.count <= 1024, encoded.hasPrefix("t1.") else { return nil }
        var base64 = String(encoded.dropFirst(3)).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        guard !base64.isEmpty, base64.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "/" }) else { return nil }
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8) else { return nil }
        let parts = text.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let at = Int64(parts[0]), let rank = Int(parts[1]), (0...9).contains(rank), !parts[2].isEmpty,
            at >= 0
        else { return nil }
        self.init(at: at, rank: rank, tiebreak: String(parts[2]))
    }
}

/// One page of a timeline.
public struct TimelinePage: Sendable, Equatable {
    public var items: [TimelineItem]
    /// Where the next page starts; nil when this page holds the oldest item.
    public var nextCursor: TimelineCursor?

    public init(items: [TimelineItem], nextCursor: TimelineCursor?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}

extension TimelinePage {
    /// The default page size and the largest a client may ask for.
    public static let defaultLimit = 50
    public static let maximumLimit = 500
}
