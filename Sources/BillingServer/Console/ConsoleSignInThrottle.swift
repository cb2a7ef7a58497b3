import Synchronization

/// Throttles wrong operator tokens per client address: after `limit` failures within `window`
/// seconds, that address is refused until the oldest failure leaves the window. Other addresses
/// are not affected, so a right token from elsewhere still signs in.
public final class ConsoleSignInThrottle: Sendable {
    public let limit: Int
    public let window: Int64
    private let failures = Mutex<[String: [Int64]]>([:])
    /// Beyond this many addresses, those with no failure left in the window are forgotten.
    private static let capacity = 10_000

    public init(limit: Int = 5, window: Int64 = 60) {
        self.limit = limit
        self.window = window
    }

    /// Seconds until `address` may try again; nil when it may now.
    public func retryAfter(_ address: String, now: Int64) -> Int64? {
        failures.withLock { failures in
            let recent = (failures[address] ?? []).filter { $0 > now - window }
            guard recent.count >= limit, let oldest = recent.min() else { return nil }
            return max(1, oldest + window - now)
        }
    }

    /// Counts a wrong token from `address`.
    public func failed(_ address: String, now: Int64) {
        failures.withLock { failures in
            if failures.count >= Self.capacity {
                failures = failures.filter { $0.value.contains { $0 > now - window } }
                // Still full of live entries: a flood from many addresses; start over rather than grow.
                if failures.count >= Self.capacity { failures = [:] }
            }
            var recent = (failures[address] ?? []).filter { $0 > now - window }
            recent.append(now)
            failures[address] = Array(recent.suffix(limit))
        }
    }

    /// A right token from `address` forgets its failures.
    public func succeeded(_ address: String) {
        _ = failures.withLock { $0.removeValue(forKey: address) }
    }
}
