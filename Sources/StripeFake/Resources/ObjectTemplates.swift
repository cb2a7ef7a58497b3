import BillingCore
import BillingSamples

/// Stripe's example of each object (BillingCore's ``SampleObjects``), parsed once: every object
/// the fake makes starts as one of these with its own members set, so that shapes stay Stripe's.
enum ObjectTemplates {
    static let customer = template("customer")
    static let subscription = template("subscription")
    static let subscriptionItem = subscription[path: "items.data"]?[0] ?? .object([:])
    static let invoice = template("invoice")
    static let invoiceLine = invoice[path: "lines.data"]?[0] ?? .object([:])
    static let paymentMethod = template("payment_method")
    static let price = template("price")
    static let product = template("product")
    static let checkoutSession = template("checkout.session")

    private static func template(_ resource: String) -> JSONValue {
        guard let json = SampleObjects.json[resource], let value = try? JSONValue(parsing: Array(json.utf8)) else {
            preconditionFailure("BillingCore.SampleObjects has no parsable sample of \(resource)")
        }
        return value
    }
}

extension ObjectKind {
    /// The members of `object` that filters read.
    func indexedFields(of object: JSONValue) -> IndexedFields {
        var fields = IndexedFields()
        switch self {
        case .customer:
            fields.email = object["email"]?.stringValue
            fields.name = object["name"]?.stringValue
            fields.metadata = (object["metadata"]?.objectValue ?? [:]).compactMapValues(\.stringValue)
        case .subscription:
            fields.customer = expandableID(object["customer"])
            fields.status = object["status"]?.stringValue
            fields.collectionMethod = object["collection_method"]?.stringValue
            fields.priceIDs = (object[path: "items.data"]?.arrayValue ?? []).compactMap { expandableID($0["price"]) }
        case .invoice:
            fields.customer = expandableID(object["customer"])
            fields.subscription =
                expandableID(object[path: "parent.subscription_details.subscription"])
                ?? expandableID(object["subscription"])
            fields.status = object["status"]?.stringValue
            fields.collectionMethod = object["collection_method"]?.stringValue
        case .paymentMethod:
            fields.customer = expandableID(object["customer"])
            fields.type = object["type"]?.stringValue
        case .price:
            fields.active = object["active"]?.boolValue
            fields.product = expandableID(object["product"])
            fields.lookupKey = object["lookup_key"]?.stringValue
            fields.type = object["type"]?.stringValue
        case .product:
            fields.active = object["active"]?.boolValue
        case .checkoutSession:
            fields.customer = expandableID(object["customer"])
            fields.subscription = expandableID(object["subscription"])
            fields.status = object["status"]?.stringValue
        case .event:
            fields.type = object["type"]?.stringValue
        case .billingMeter:
            fields.status = object["status"]?.stringValue
            fields.name = object["event_name"]?.stringValue
        }
        return fields
    }
}

/// The id of an expandable member: the string itself, or the `id` of the expanded object.
func expandableID(_ value: JSONValue?) -> String? {
    switch value {
    case .string(let id): id
    case .object(let members): members["id"]?.stringValue
    default: nil
    }
}
