import Foundation

extension ApplierConfiguration {
    /// Exponential backoff with ±20 % jitter, capped.
    func retryDelayMilliseconds(afterAttempt attempt: Int) -> Int64 {
        let first = Double(firstRetryDelay.components.seconds) * 1000 + Double(firstRetryDelay.components.attoseconds) / 1e15
        let cap = Double(maximumRetryDelay.components.seconds) * 1000
        let base = min(cap, first * pow(2, Double(max(0, attempt - 1))))
        return Int64(base * Double.random(in: 0.8...1.2))
    }

    /// What a failed try leaves: the attempts so far and, unless the event is now dead, when it
    /// is tried next.
    func failure(afterAttempts previous: Int, now: Int64) -> (attempts: Int, retryAt: Int64?) {
        let attempts = previous + 1
        return (attempts, attempts >= maximumAttempts ? nil : now + retryDelayMilliseconds(afterAttempt: attempts))
    }

    /// Counts an event of another API version than the configured one.
    func countVersion(_ version: String?, in pass: inout ApplyPass) {
        guard let version, version != apiVersion else { return }
        pass.otherAPIVersion += 1
        pass.apiVersions[version, default: 0] += 1
    }
}
