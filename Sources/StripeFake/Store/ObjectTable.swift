/// The members of a stored object that list filters and search read, kept beside its JSON bytes
/// so that a filter never parses JSON.
struct IndexedFields: Sendable, Equatable {
    var customer: String?
    var subscription: String?
    var status: String?
    var email: String?
    var name: String?
    /// Event type, price type (`recurring`/`one_time`) or payment method type.
    var type: String?
    var product: String?
    var lookupKey: String?
    var active: Bool?
    var collectionMethod: String?
    var priceIDs: [String] = []
    /// Only for customers, whose metadata search reads.
    var metadata: [String: String] = [:]
}

/// One object: its id, creation time, the cached compact JSON and the fields filters read.
struct StoredObject: Sendable {
    let id: String
    let created: Int64
    var json: [UInt8]
    var fields: IndexedFields

    /// The object as a value, for changes; the bytes are the truth.
    var value: JSONValue {
        // The bytes were serialized by the fake itself, so they always parse.
        (try? JSONValue(parsing: json)) ?? .null
    }
}

/// Where an object sits in a list: Stripe lists newest first by `created`, then by id.
struct SortKey: Comparable, Sendable {
    let created: Int64
    let id: String
    let slot: Int32

    static func < (lhs: SortKey, rhs: SortKey) -> Bool {
        lhs.created != rhs.created ? lhs.created < rhs.created : lhs.id < rhs.id
    }

    static func == (lhs: SortKey, rhs: SortKey) -> Bool { lhs.created == rhs.created && lhs.id == rhs.id }
}

/// Which part of a table a list reads: all of it, or the objects of one customer or subscription.
enum ListScope: Sendable {
    case all
    case customer(String)
    case subscription(String)
}

/// One page of a list, newest first.
struct Page {
    var objects: [StoredObject]
    var hasMore: Bool
}

/// The objects of one kind in one account, ordered by (created, id) with an id → slot index, so that
/// a page after any cursor is found by binary search and built from cached bytes.
struct ObjectTable: Sendable {
    let kind: ObjectKind
    /// Objects by slot; a slot never moves, so keys in the indexes stay valid. Freed slots are reused.
    private var slots: [StoredObject?] = []
    private var freeSlots: [Int32] = []
    private var slotByID: [String: Int32] = [:]
    /// Every object, ascending; lists walk it from the end.
    private var order: [SortKey] = []
    private var byCustomer: [String: [SortKey]] = [:]
    private var bySubscription: [String: [SortKey]] = [:]

    init(kind: ObjectKind) { self.kind = kind }

    var count: Int { order.count }

    func contains(_ id: String) -> Bool { slotByID[id] != nil }

    /// How many objects belong to `scope`.
    func count(in scope: ListScope) -> Int {
        switch scope {
        case .all: order.count
        case .customer(let id): byCustomer[id]?.count ?? 0
        case .subscription(let id): bySubscription[id]?.count ?? 0
        }
    }

    subscript(id: String) -> StoredObject? {
        guard let slot = slotByID[id] else { return nil }
        return slots[Int(slot)]
    }

    /// The ids, newest first.
    var idsNewestFirst: [String] { order.reversed().map(\.id) }

    // MARK: Changes

    /// Adds a new object or replaces the one with the same id.
    mutating func put(_ object: StoredObject) {
        if let slot = slotByID[object.id], let old = slots[Int(slot)] {
            if old.created == object.created {
                let key = SortKey(created: old.created, id: old.id, slot: slot)
                if old.fields.customer != object.fields.customer {
                    Self.remove(key, from: &byCustomer, at: old.fields.customer)
                    Self.insert(key, into: &byCustomer, at: object.fields.customer)
                }
                if old.fields.subscription != object.fields.subscription {
                    Self.remove(key, from: &bySubscription, at: old.fields.subscription)
                    Self.insert(key, into: &bySubscription, at: object.fields.subscription)
                }
                slots[Int(slot)] = object
                return
            }
            remove(object.id)
        }
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            slots[Int(slot)] = object
        } else {
            slot = Int32(slots.count)
            slots.append(object)
        }
        slotByID[object.id] = slot
        let key = SortKey(created: object.created, id: object.id, slot: slot)
        order.insert(key, at: Self.lowerBound(of: key, in: order))
        Self.insert(key, into: &byCustomer, at: object.fields.customer)
        Self.insert(key, into: &bySubscription, at: object.fields.subscription)
    }

    /// Adds many new objects at once (seeding): one sort instead of one insertion each.
    mutating func putMany(_ objects: [StoredObject]) {
        slots.reserveCapacity(slots.count + objects.count)
        order.reserveCapacity(order.count + objects.count)
        slotByID.reserveCapacity(slotByID.count + objects.count)
        for object in objects {
            if slotByID[object.id] != nil { remove(object.id) }
            let slot = Int32(slots.count)
            slots.append(object)
            slotByID[object.id] = slot
            let key = SortKey(created: object.created, id: object.id, slot: slot)
            order.append(key)
            if let customer = object.fields.customer { byCustomer[customer, default: []].append(key) }
            if let subscription = object.fields.subscription { bySubscription[subscription, default: []].append(key) }
        }
        order.sort()
        for key in byCustomer.keys { byCustomer[key]!.sort() }
        for key in bySubscription.keys { bySubscription[key]!.sort() }
    }

    @discardableResult
    mutating func remove(_ id: String) -> StoredObject? {
        guard let slot = slotByID.removeValue(forKey: id), let object = slots[Int(slot)] else { return nil }
        let key = SortKey(created: object.created, id: object.id, slot: slot)
        let position = Self.lowerBound(of: key, in: order)
        if position < order.count, order[position] == key { order.remove(at: position) }
        Self.remove(key, from: &byCustomer, at: object.fields.customer)
        Self.remove(key, from: &bySubscription, at: object.fields.subscription)
        slots[Int(slot)] = nil
        freeSlots.append(slot)
        return object
    }

    private static func insert(_ key: SortKey, into index: inout [String: [SortKey]], at value: String?) {
        guard let value else { return }
        index[value, default: []].insert(key, at: lowerBound(of: key, in: index[value] ?? []))
    }

    private static func remove(_ key: SortKey, from index: inout [String: [SortKey]], at value: String?) {
        guard let value, var keys = index.removeValue(forKey: value) else { return }
        let position = lowerBound(of: key, in: keys)
        if position < keys.count, keys[position] == key { keys.remove(at: position) }
        if !keys.isEmpty { index[value] = keys }
    }

    // MARK: Lists

    /// A page of the objects in `scope` within `created`, newest first, after `startingAfter` or
    /// before `endingBefore` (ids of this table), keeping those `matching` accepts.
    func page(
        limit: Int, startingAfter: String?, endingBefore: String?, scope: ListScope = .all,
        created: ClosedRange<Int64> = Int64.min...Int64.max, matching accepts: (StoredObject) -> Bool = { _ in true }
    ) throws(StripeAPIError) -> Page {
        let keys: [SortKey]
        switch scope {
        case .all: keys = order
        case .customer(let id): keys = byCustomer[id] ?? []
        case .subscription(let id): keys = bySubscription[id] ?? []
        }
        // The window of keys inside the `created` range.
        var low = Self.lowerBound(of: SortKey(created: created.lowerBound, id: "", slot: 0), in: keys)
        var high =
            created.upperBound == Int64.max
            ? keys.count : Self.lowerBound(of: SortKey(created: created.upperBound + 1, id: "", slot: 0), in: keys)

        var found: [StoredObject] = []
        found.reserveCapacity(limit + 1)
        if let endingBefore {
            let cursor = try cursorKey(endingBefore, param: "ending_before")
            low = max(low, Self.upperBound(of: cursor, in: keys))
            var position = low
            while position < high, found.count <= limit {
                if let object = slots[Int(keys[position].slot)], accepts(object) { found.append(object) }
                position += 1
            }
            let hasMore = found.count > limit
            return Page(objects: Array(found.prefix(limit).reversed()), hasMore: hasMore)
        }
        if let startingAfter {
            let cursor = try cursorKey(startingAfter, param: "starting_after")
            high = min(high, Self.lowerBound(of: cursor, in: keys))
        }
        var position = high - 1
        while position >= low, found.count <= limit {
            if let object = slots[Int(keys[position].slot)], accepts(object) { found.append(object) }
            position -= 1
        }
        let hasMore = found.count > limit
        if hasMore { found.removeLast() }
        return Page(objects: found, hasMore: hasMore)
    }

    /// Every object that `accepts` takes, newest first (search, small tables).
    func all(matching accepts: (StoredObject) -> Bool) -> [StoredObject] {
        var result: [StoredObject] = []
        for key in order.reversed() {
            if let object = slots[Int(key.slot)], accepts(object) { result.append(object) }
        }
        return result
    }

    private func cursorKey(_ id: String, param: String) throws(StripeAPIError) -> SortKey {
        guard let slot = slotByID[id], let object = slots[Int(slot)] else { throw .noSuch(kind, id, param: param) }
        return SortKey(created: object.created, id: object.id, slot: slot)
    }

    /// The first position whose key is not less than `key`.
    private static func lowerBound(of key: SortKey, in keys: [SortKey]) -> Int {
        var low = 0
        var high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if keys[middle] < key { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The first position whose key is greater than `key`.
    private static func upperBound(of key: SortKey, in keys: [SortKey]) -> Int {
        var low = 0
        var high = keys.count
        while low < high {
            let middle = (low + high) / 2
            if key < keys[middle] { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
