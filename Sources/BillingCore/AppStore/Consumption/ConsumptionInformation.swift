/// The body of the App Store Server API's Send Consumption Information (v2, `ConsumptionRequest`):
/// what billingd tells Apple about a purchase whose customer asked for a refund. Apple's rules,
/// as of App Store Server API 1.19 (checked 2026-11):
///
/// - `customerConsented` must be `true` (else 400 `InvalidCustomerConsentedError`), so nothing is
///   sent for a customer who did not consent.
/// - `deliveryStatus` and `sampleContentProvided` are required.
/// - `consumptionPercentage` (milliunits, 0 to 100000) is never sent for an auto-renewable
///   subscription (400 `ConsumptionPercentageAutoRenewableSubscriptionError`: Apple computes it
///   from the elapsed time); it must be 0 when the purchase was not delivered, and strictly
///   between 0 and 100000 with `GRANT_PRORATED`.
public struct ConsumptionInformation: Sendable, Equatable {
    public var customerConsented: Bool
    public var deliveryStatus: ConsumptionDeliveryStatus
    public var sampleContentProvided: Bool
    public var refundPreference: ConsumptionRefundPreference?
    /// Milliunits of a percent: 100000 is all of it; nil leaves it out.
    public var consumptionPercentage: Int64?

    public init(
        customerConsented: Bool, deliveryStatus: ConsumptionDeliveryStatus, sampleContentProvided: Bool,
        refundPreference: ConsumptionRefundPreference? = nil, consumptionPercentage: Int64? = nil
    ) {
        self.customerConsented = customerConsented
        self.deliveryStatus = deliveryStatus
        self.sampleContentProvided = sampleContentProvided
        self.refundPreference = refundPreference
        self.consumptionPercentage = consumptionPercentage
    }

    /// The JSON Apple receives, members in a fixed (alphabetical) order, the optional ones left
    /// out when nil.
    public func json() -> [UInt8] {
        var json = JSONBytesWriter(capacity: 160)
        json.beginObject()
        if let consumptionPercentage { json.field("consumptionPercentage", consumptionPercentage) }
        json.field("customerConsented", customerConsented)
        json.field("deliveryStatus", deliveryStatus.rawValue)
        if let refundPreference { json.field("refundPreference", refundPreference.rawValue) }
        json.field("sampleContentProvided", sampleContentProvided)
        json.endObject()
        return json.bytes
    }

    /// Reads a body billingd stored (``json()``); nil for anything else.
    public init?(json bytes: [UInt8]) {
        guard let json = try? AppStoreJSON(bytes), let consented = json.bool("customerConsented"),
            let delivery = json.string("deliveryStatus").flatMap(ConsumptionDeliveryStatus.init(rawValue:)),
            let sample = json.bool("sampleContentProvided")
        else { return nil }
        let preference = json.string("refundPreference")
        guard preference == nil || ConsumptionRefundPreference(rawValue: preference!) != nil else { return nil }
        self.init(
            customerConsented: consented, deliveryStatus: delivery, sampleContentProvided: sample,
            refundPreference: preference.flatMap(ConsumptionRefundPreference.init(rawValue:)),
            consumptionPercentage: json.int64("consumptionPercentage"))
    }

    /// One line for a person: what was told to Apple.
    public var summary: String {
        var parts = [deliveryStatus.rawValue]
        parts.append(refundPreference.map { "refund preference \($0.rawValue)" } ?? "no refund preference")
        if let consumptionPercentage { parts.append("\(Self.percent(consumptionPercentage)) consumed") }
        parts.append(sampleContentProvided ? "sample content provided" : "no sample content")
        return parts.joined(separator: ", ")
    }

    /// Milliunits as a percentage for people: 67932 → `67.932%`, 40000 → `40%`.
    public static func percent(_ milliunits: Int64) -> String {
        let whole = milliunits / 1000
        let fraction = milliunits % 1000
        guard fraction != 0 else { return "\(whole)%" }
        var digits = String(fraction)
        digits = String(repeating: "0", count: 3 - digits.count) + digits
        while digits.hasSuffix("0") { digits.removeLast() }
        return "\(whole).\(digits)%"
    }

    /// The most `consumptionPercentage` may be: all of it.
    public static let fullConsumption: Int64 = 100_000
}

/// `deliveryStatus`: whether the app delivered a purchase that works.
public enum ConsumptionDeliveryStatus: String, Sendable, Hashable, CaseIterable {
    case delivered = "DELIVERED"
    case undeliveredQualityIssue = "UNDELIVERED_QUALITY_ISSUE"
    case undeliveredWrongItem = "UNDELIVERED_WRONG_ITEM"
    case undeliveredServerOutage = "UNDELIVERED_SERVER_OUTAGE"
    case undeliveredOther = "UNDELIVERED_OTHER"
}

/// `refundPreference`: what the developer would like Apple to decide.
public enum ConsumptionRefundPreference: String, Sendable, Hashable, CaseIterable {
    case decline = "DECLINE"
    case grantFull = "GRANT_FULL"
    case grantProrated = "GRANT_PRORATED"
}

/// `APPSTORE_REFUND_PREFERENCE`: the refund preference billingd states in its answers.
public enum AppStoreRefundPolicy: Sendable, Hashable, CustomStringConvertible {
    /// States none (the member is left out): Apple decides on its own.
    case none
    case decline
    case grantFull
    case grantProrated
    /// By the share of the purchase used (``ConsumptionAnswerPolicy/shareUsed(_:now:)``):
    /// `by_usage:10,50` asks for a full refund below 10 % used, a prorated one below 50 %, and
    /// declines from 50 %; no preference when the share is unknown.
    case byUsage(RefundUsageThresholds)

    /// The policies that state one preference whatever the purchase.
    public static let fixed: [AppStoreRefundPolicy] = [.none, .decline, .grantFull, .grantProrated]

    /// Reads the setting: `none`, `decline`, `grant_full`, `grant_prorated`, `by_usage` (the
    /// ``RefundUsageThresholds/standard`` thresholds) or `by_usage:FULL,PRORATED` (percentages,
    /// up to three decimals, FULL ≤ PRORATED ≤ 100); case-insensitive. Nil for anything else.
    public init?(setting text: String) {
        let text = text.lowercased()
        switch text {
        case "none": self = .none
        case "decline": self = .decline
        case "grant_full": self = .grantFull
        case "grant_prorated": self = .grantProrated
        case "by_usage": self = .byUsage(.standard)
        default:
            guard text.hasPrefix("by_usage:") else { return nil }
            let parts = text.dropFirst("by_usage:".count).split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count == 2, let full = Self.milliunits(parts[0]), let prorated = Self.milliunits(parts[1]),
                let thresholds = RefundUsageThresholds(grantFullBelow: full, declineFrom: prorated)
            else { return nil }
            self = .byUsage(thresholds)
        }
    }

    /// The setting's spelling: `grant_full`, `by_usage:10,50`.
    public var description: String {
        switch self {
        case .none: "none"
        case .decline: "decline"
        case .grantFull: "grant_full"
        case .grantProrated: "grant_prorated"
        case .byUsage(let thresholds): "by_usage:\(thresholds)"
        }
    }

    /// The preference sent for a purchase of which `shareUsed` (milliunits) was used; nil states none.
    public func preference(shareUsed: Int64?) -> ConsumptionRefundPreference? {
        switch self {
        case .none: nil
        case .decline: .decline
        case .grantFull: .grantFull
        case .grantProrated: .grantProrated
        case .byUsage(let thresholds): shareUsed.map(thresholds.preference(shareUsed:))
        }
    }

    /// `12.5` → 12500: a percentage of 0 to 100 with up to three decimals, in milliunits.
    static func milliunits(_ text: Substring) -> Int64? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        let isDigit: (Character) -> Bool = { ("0"..."9").contains($0) }
        guard (1...2).contains(parts.count), (1...3).contains(parts[0].count), parts[0].allSatisfy(isDigit) else { return nil }
        var fraction = parts.count == 2 ? String(parts[1]) : ""
        guard fraction.count <= 3, fraction.allSatisfy(isDigit), parts.count == 1 || !fraction.isEmpty else { return nil }
        fraction += String(repeating: "0", count: 3 - fraction.count)
        guard let whole = Int64(parts[0]), let thousandths = Int64(fraction) else { return nil }
        let value = whole * 1000 + thousandths
        return value <= ConsumptionInformation.fullConsumption ? value : nil
    }
}

/// The thresholds of `by_usage`, in milliunits of the share used: below ``grantFullBelow`` a full
/// refund, below ``declineFrom`` a prorated one, from it none.
public struct RefundUsageThresholds: Sendable, Hashable, CustomStringConvertible {
    public let grantFullBelow: Int64
    public let declineFrom: Int64

    /// `by_usage` alone: a full refund below 10 % used, prorated below 50 %, declined from 50 %.
    public static let standard = RefundUsageThresholds(grantFullBelow: 10_000, declineFrom: 50_000)!

    /// Nil unless 0 ≤ grantFullBelow ≤ declineFrom ≤ 100000.
    public init?(grantFullBelow: Int64, declineFrom: Int64) {
        guard 0 <= grantFullBelow, grantFullBelow <= declineFrom, declineFrom <= ConsumptionInformation.fullConsumption else { return nil }
        self.grantFullBelow = grantFullBelow
        self.declineFrom = declineFrom
    }

    public func preference(shareUsed: Int64) -> ConsumptionRefundPreference {
        if shareUsed < grantFullBelow { return .grantFull }
        if shareUsed < declineFrom { return .grantProrated }
        return .decline
    }

    /// `10,50`, `2.5,40`: as the setting writes them.
    public var description: String {
        "\(Self.percentage(grantFullBelow)),\(Self.percentage(declineFrom))"
    }

    static func percentage(_ milliunits: Int64) -> String {
        String(ConsumptionInformation.percent(milliunits).dropLast())
    }
}
