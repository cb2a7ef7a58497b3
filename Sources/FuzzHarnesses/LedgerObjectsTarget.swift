import BillingCore

/// Every object decoder of the ledger: the input is tried as `data.object` of each kind, as the
/// applier and the reconciler decode them.
enum LedgerObjectsTarget {
    static func run(_ input: [UInt8]) -> FuzzVerdict {
        let raw = input[...]
        var accepted = false
        for kind in LedgerObjectKind.allCases {
            guard
                let snapshot = try? LedgerSnapshot.decode(
                    kind: kind, deletion: false, eventType: nil, eventID: "evt_fuzz", eventCreated: 1_700_000_000, objectJSON: raw)
            else { continue }
            guard snapshot.kind == kind, snapshot.raw == raw, !snapshot.objectID.isEmpty else {
                return .violated("a \(kind.rawValue) snapshot lost its kind, its bytes or its id")
            }
            accepted = true
        }
        return accepted ? .accepted : .rejected
    }
}
