import Crypto
import Foundation
internal import Synchronization

/// Chains that already verified, so that the same Apple leaf is not re-verified for every payload.
///
/// The rule it keeps: an entry answers only for a validation time inside the window in which every
/// certificate of the verified chain is valid, and only for exactly the same leaf and intermediate
/// DER bytes; outside that the caller verifies in full, so a cached answer is always the answer a
/// full verification would give. Bounded: the oldest entry goes first.
final class VerifiedChainCache: Sendable {
    struct Key: Hashable, Sendable {
        let leaf: [UInt8]
        let intermediate: [UInt8]
    }

    private struct Entry {
        let leafKey: P256.Signing.PublicKey
        let validFrom: Date
        let validUntil: Date
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        /// Keys in insertion order, oldest first.
        var order: [Key] = []
    }

    private let capacity: Int
    private let state = Mutex(State())

    init(capacity: Int) {
        precondition(capacity > 0, "VerifiedChainCache needs room for at least one chain")
        self.capacity = capacity
    }

    /// The leaf key of a chain verified before, if `time` is inside its window.
    func leafKey(for key: Key, at time: Date) -> P256.Signing.PublicKey? {
        state.withLock { state in
            guard let entry = state.entries[key], entry.validFrom <= time, time <= entry.validUntil else { return nil }
            return entry.leafKey
        }
    }

    /// Records a verified chain; `validFrom...validUntil` must be where all its certificates are valid.
    func insert(_ leafKey: P256.Signing.PublicKey, for key: Key, validFrom: Date, validUntil: Date) {
        state.withLock { state in
            if state.entries.updateValue(Entry(leafKey: leafKey, validFrom: validFrom, validUntil: validUntil), forKey: key) == nil {
                state.order.append(key)
            }
            while state.order.count > capacity {
                state.entries[state.order.removeFirst()] = nil
            }
        }
    }

    /// How many chains are held, for tests.
    var count: Int { state.withLock { $0.entries.count } }
}
