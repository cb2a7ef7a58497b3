/// Everything one Stripe account holds: the platform account, or a connected account named by the
/// `Stripe-Account` header. Accounts never see each other's objects, events or idempotency keys.
///
/// Owned by ``FakeStore`` and only touched on its executor.
final class AccountState {
    /// The connected account id, nil for the platform account.
    let account: String?
    private var tables: [ObjectTable]
    /// Deleted objects that Stripe still answers for, as `{"id","object","deleted":true}`.
    var deletedStubs: [String: [UInt8]] = [:]
    /// Saved answers to POSTs with an `Idempotency-Key`.
    var idempotentResults: [String: IdempotentResult] = [:]
    /// A customer's active entitlements (`entitlements.active_entitlement` objects).
    var activeEntitlements: [String: [JSONValue]] = [:]
    /// Feature ids by lookup key, so that one feature keeps one id.
    var featureIDs: [String: String] = [:]
    /// What each Checkout Session sells, which Stripe shows only through `line_items`.
    var checkoutOrders: [String: CheckoutObjects.Order] = [:]
    /// Every meter event accepted, oldest first.
    var meterEvents: [MeterEventRecord] = []
    /// Indexes into ``meterEvents`` of the events that counted, by `"meter customer"`.
    var countedMeterEvents: [String: [Int]] = [:]
    /// When each meter event identifier was first used.
    var meterIdentifiers: [String: Int64] = [:]

    init(account: String?) {
        self.account = account
        tables = ObjectKind.allCases.map { ObjectTable(kind: $0) }
    }

    /// The table of `kind`; changed in place through the array subscript.
    subscript(kind: ObjectKind) -> ObjectTable {
        get { tables[kind.tableIndex] }
        _modify { yield &tables[kind.tableIndex] }
    }
}

/// The first answer to an idempotent POST, replayed byte for byte.
struct IdempotentResult {
    /// Method, path and parameters of the first request; a different one under the same key is refused.
    let fingerprint: String
    let status: Int
    let body: [UInt8]
    let requestID: String
    let created: Int64
}

extension ObjectKind {
    fileprivate var tableIndex: Int { ObjectKind.allCases.firstIndex(of: self)! }
}
