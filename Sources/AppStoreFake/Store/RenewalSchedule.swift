/// The next due time of every subscription that has one (a renewal, the end of a grace period or
/// of billing retry), as a binary min-heap: catching up after the clock moves costs only the
/// subscriptions that are due, not all of them.
///
/// Entries are never updated in place: a subscription whose due time changes gets a new entry,
/// and an entry whose time no longer matches its subscription is skipped when it comes up.
struct RenewalSchedule: Sendable {
    struct Entry: Sendable {
        let due: Int64
        let originalTransactionID: String

        /// Earlier first; the same time in id order, so that the same state always runs the same way.
        func precedes(_ other: Entry) -> Bool {
            (due, originalTransactionID) < (other.due, other.originalTransactionID)
        }
    }

    private var heap: [Entry] = []

    var isEmpty: Bool { heap.isEmpty }

    /// The earliest entry, without removing it.
    var first: Entry? { heap.first }

    mutating func insert(_ due: Int64, _ originalTransactionID: String) {
        heap.append(Entry(due: due, originalTransactionID: originalTransactionID))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest entry.
    mutating func removeFirst() -> Entry? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let first = heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].precedes(heap[smallest]) { smallest = left }
            if right < heap.count, heap[right].precedes(heap[smallest]) { smallest = right }
            if smallest == parent { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
        return first
    }
}
