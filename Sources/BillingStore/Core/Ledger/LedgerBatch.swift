import BillingCore

/// What a batch of Stripe snapshots makes of the ledger, set-wise and the same on every backend:
/// the version guard's decision for each snapshot, and the rows to write as one group per table,
/// so that a backend whose statements are round trips (PostgreSQL) writes a group commit in a
/// bounded number of statements whatever its size.
///
/// The result is the ledger that applying the snapshots one after another, in the batch's
/// order, with ``LedgerRows`` would give: each snapshot is decided against the version the
/// ledger held before the batch or the one an earlier snapshot of the batch wrote, and each
/// object's row, children and marks are those of its last write. The caller holds the objects'
/// locks for its transaction, so nothing changes what the ledger holds between the read of the
/// held versions and the writes.
struct LedgerBatch {
    /// One snapshot of the batch, for an account ('' = platform) and mode.
    struct Item {
        let snapshot: LedgerSnapshot
        let account: String
        let livemode: Bool
    }

    /// An object's key in its table.
    struct Key: Hashable {
        let table: String
        let account: String
        let livemode: Bool
        let id: String
    }

    /// Rows of one table written by one statement, all with the same columns.
    struct Rows {
        let table: String
        let columns: [String]
        var rows: [[LedgerValue]] = []
    }

    /// A parent whose child rows a write replaces: they are deleted, then the new ones inserted.
    struct Parent: Hashable {
        let table: String
        let parentColumn: String
        let account: String
        let livemode: Bool
        let id: String
    }

    /// The effect of each item, in the batch's order.
    private(set) var effects: [ApplyEffect] = []
    /// The objects' rows to upsert, one per object (its last write), grouped by table.
    private(set) var upserts: [Rows] = []
    /// Objects whose held row is only marked for re-fetch (a tie the held row won, with no later
    /// write in the batch).
    private(set) var refetchMarks: [Key] = []
    /// Parents whose child rows are replaced.
    private(set) var replacedParents: [Parent] = []
    /// The new child rows, grouped by child table; each conflicts with the ledger at most once.
    private(set) var children: [(children: LedgerRows.Children, rows: [[LedgerValue]])] = []
    /// Subscription facts, one per subscription snapshot, whatever the guard decided.
    private(set) var subscriptionFacts: [[LedgerValue]] = []
    /// Payment method links, one per payment method: the first sighting's customer, the
    /// earliest time (what ``ReconcileRepairRows/linkPaymentMethodSQL`` keeps row after row).
    private(set) var paymentMethodLinks: [[LedgerValue]] = []
    /// Checkout links (account, livemode, user, customer); inserted only if absent.
    private(set) var checkoutLinks: [[LedgerValue]] = []

    /// The keys whose held versions ``init(_:held:)`` needs.
    static func keys(_ items: [Item]) -> Set<Key> {
        Set(items.map(key))
    }

    static func key(_ item: Item) -> Key {
        Key(table: LedgerRows.table(item.snapshot.kind), account: item.account, livemode: item.livemode, id: item.snapshot.objectID)
    }

    /// Decides every item against `held` (the versions the ledger holds for ``keys(_:)``; a key
    /// absent: the ledger holds no row) and the batch's earlier writes.
    init(_ items: [Item], held: [Key: SnapshotVersion]) {
        var current = held
        /// Per object: its last write and whether a later tie marked it for re-fetch.
        var lastWrite: [Key: (item: Item, needsRefetch: Bool)] = [:]
        var marked: Set<Key> = []
        var writeOrder: [Key] = []
        var links: [Key: [LedgerValue]] = [:]
        var linkOrder: [Key] = []
        effects.reserveCapacity(items.count)
        for item in items {
            let (snapshot, account, livemode) = (item.snapshot, item.account, item.livemode)
            if let fact = MetricsFactRows.subscriptionFact(snapshot, account: account, livemode: livemode) {
                subscriptionFacts.append(fact)
            }
            if let customer = ReconcileRepairRows.paymentMethodLink(snapshot) {
                let link = ReconcileRepairRows.linkArguments(snapshot, customer: customer, account: account, livemode: livemode)
                let linkKey = Key(table: "paymentMethodCustomer", account: account, livemode: livemode, id: snapshot.objectID)
                if var kept = links[linkKey] {
                    // The first sighting's customer stays; the earliest time wins.
                    if case .integer(let seen) = link[4], case .integer(let keptSeen) = kept[4], seen < keptSeen { kept[4] = link[4] }
                    links[linkKey] = kept
                } else {
                    links[linkKey] = link
                    linkOrder.append(linkKey)
                }
            }
            let key = Self.key(item)
            let decision = LedgerRows.decide(snapshot, held: current[key])
            switch decision {
            case .unchanged, .stale:
                break
            case .markForRefetch:
                if lastWrite[key] != nil { lastWrite[key]?.needsRefetch = true } else { marked.insert(key) }
            case .write(let needsRefetch, _):
                if lastWrite[key] == nil { writeOrder.append(key) }
                lastWrite[key] = (item, needsRefetch)
                marked.remove(key)
                current[key] = snapshot.version
            }
            if let link = LedgerRows.checkoutLink(snapshot) {
                checkoutLinks.append([.text(account), .boolean(livemode), .text(link.user), .text(link.customer)])
            }
            effects.append(decision.effect)
        }
        paymentMethodLinks = linkOrder.compactMap { links[$0] }
        refetchMarks = items.map(Self.key).filter { marked.remove($0) != nil }

        // Rows in the order objects were first written, children of each parent from its last write.
        var tables: [String: Int] = [:]
        var parents: [Parent: LedgerRows.Children] = [:]
        var parentOrder: [Parent] = []
        for key in writeOrder {
            guard let (item, needsRefetch) = lastWrite[key] else { continue }
            let row = LedgerRows.row(item.snapshot, account: item.account, livemode: item.livemode, needsRefetch: needsRefetch)
            if let index = tables[key.table] {
                upserts[index].rows.append(row.map(\.value))
            } else {
                tables[key.table] = upserts.count
                upserts.append(Rows(table: key.table, columns: row.map(\.column), rows: [row.map(\.value)]))
            }
            if let owned = LedgerRows.children(of: item.snapshot, account: item.account, livemode: item.livemode) {
                let parent = Parent(
                    table: owned.table, parentColumn: owned.parentColumn, account: item.account, livemode: item.livemode, id: owned.parentID)
                if parents.updateValue(owned, forKey: parent) == nil { parentOrder.append(parent) }
            }
        }
        replacedParents = parentOrder
        var childTables: [String: Int] = [:]
        for parent in parentOrder {
            guard let owned = parents[parent] else { continue }
            // Within one parent a later row with the same key replaces an earlier one, as the
            // row-by-row upsert does; one statement may not touch a row twice.
            var rows = owned.rows
            if owned.replacesDuplicates {
                var last: [[LedgerValue]: Int] = [:]
                for (index, row) in rows.enumerated() { last[Array(row.prefix(4))] = index }
                rows = rows.enumerated().filter { last[Array($0.element.prefix(4))] == $0.offset }.map(\.element)
            }
            guard !rows.isEmpty else { continue }
            if let index = childTables[owned.table] {
                children[index].rows += rows
            } else {
                childTables[owned.table] = children.count
                children.append((owned, rows))
            }
        }
    }
}
