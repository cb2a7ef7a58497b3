import Foundation

/// How long to wait before trying a failed request again, for every client over this transport.
public enum RetryBackoff {
    /// `Retry-After` in whole or fractional seconds, capped at a day; nil for anything else (the
    /// HTTP-date form is used by neither Stripe nor Apple).
    public static func retryAfter(_ text: String) -> Duration? {
        guard let seconds = Double(text.trimmingCharacters(in: .whitespaces)), seconds.isFinite, seconds >= 0 else {
            return nil
        }
        return .milliseconds(Int64(min(seconds, 86_400) * 1000))
    }

    /// Retry-After when given, otherwise full jitter: a random time up to base × 2^(attempt-1);
    /// capped either way.
    /// - Parameter random: a number in 0..<1.
    public static func delay(attempt: Int, retryAfter: Duration?, base: Duration, cap: Duration, random: Double) -> Duration {
        if let retryAfter { return min(retryAfter, cap) }
        let ceiling = min(cap, base * (1 << min(max(attempt - 1, 0), 30)))
        return ceiling * min(max(random, 0), 1)
    }
}
