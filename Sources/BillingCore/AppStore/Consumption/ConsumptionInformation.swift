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

/// `APPSTORE_REFUND_PREFERENCE`: the refund preference billingd states in every answer.
public enum AppStoreRefundPolicy: String, Sendable, Hashable, CaseIterable {
    /// States none (the member is left out): Apple decides on its own.
    case none
    case decline
    case grantFull = "grant_full"
    case grantProrated = "grant_prorated"

    /// The preference sent; nil for ``none``.
    public var preference: ConsumptionRefundPreference? {
        switch self {
        case .none: nil
        case .decline: .decline
        case .grantFull: .grantFull
        case .grantProrated: .grantProrated
        }
    }
}
