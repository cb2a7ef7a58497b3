import Crypto

/// Where a usage record stands in its report to a Stripe Billing Meter.
public enum UsageReportState: String, Sendable, Hashable, CaseIterable {
    /// To be sent (or waiting: a future timestamp, a user whose Stripe customer is not known yet).
    case pending
    /// Stripe accepted it (or already had its identifier): counted once.
    case reported
    /// The last attempt failed; tried again at `reportNextAt`, or given up when that is empty.
    case failed
    /// The user had no Stripe customer in the record's scope: nothing to bill.
    case skipped
}

/// What Stripe's answer to one `POST /v1/billing/meter_events` means for the record.
public enum MeterEventOutcome: Sendable, Equatable {
    /// 2xx: the event was created.
    case accepted
    /// Stripe already holds an event with this identifier: an earlier attempt reached it.
    case duplicate
    /// A definite no: the event was not created. `final` when no retry can change that (the
    /// timestamp is out of Stripe's window).
    case refused(String, final: Bool)
    /// No answer, or a 5xx: the event may or may not exist.
    case unknown(String)
}

/// The rules of reporting usage records as meter events, in the order they apply:
///
/// 1. A record whose timestamp is more than 35 days old can no longer be reported (Stripe refuses
///    it): `failed` for good, without a call.
/// 2. A record more than 5 minutes ahead of the clock waits until it is not.
/// 3. A record an earlier attempt may have delivered (no answer, a 5xx, a crash) is sent again
///    with the same identifier, which Stripe refuses as a duplicate — counted once. Stripe keeps
///    identifiers unique for at least 24 hours only, so once 23 hours have passed since that
///    attempt the record is not sent again: `failed` as unconfirmed, for a person to check.
/// 4. A failed attempt is retried after 1, 2, 4 … minutes, at most an hour apart, for
///    ``maximumAttempts`` attempts in all (about four hours, well inside rule 3's window); then
///    the record stays `failed` until `billingd usage report --retry-failed`.
///
/// Times are Unix seconds.
public enum MeterEventPolicy {
    public static let pastWindow: Int64 = 35 * 86_400
    public static let futureWindow: Int64 = 300
    /// How long after an attempt that may have reached Stripe a resend is still deduplicated:
    /// an hour short of Stripe's 24, for clock skew and slow runs.
    public static let identifierWindow: Int64 = 23 * 3_600
    public static let maximumAttempts = 10
    public static let firstRetryDelay: Int64 = 60
    public static let longestRetryDelay: Int64 = 3_600
    /// How long a record of a user without a Stripe customer waits for one (a Checkout that just
    /// completed, its webhook on the way) before it is skipped.
    public static let customerGrace: Int64 = 3_600
    /// How often such a record looks for the customer again.
    public static let customerRecheck: Int64 = 300

    /// Why a record is not sent, now or ever.
    public enum Hold: Sendable, Equatable {
        /// Rule 1: its timestamp is out of Stripe's 35 days.
        case tooOld(timestamp: Int64)
        /// Rule 2: its timestamp is ahead of the clock.
        case future(timestamp: Int64)
        /// Rule 3: an attempt at `since` may have delivered it, and Stripe's identifier window is over.
        case unconfirmed(since: Int64)
        /// The user has no Stripe customer yet.
        case noCustomer
    }

    /// What to do with a due record before any call.
    public enum Decision: Sendable, Equatable {
        case send
        /// Not yet: due again at `until`.
        case wait(Hold, until: Int64)
        /// `failed` (or `skipped`, for ``Hold/noCustomer``) for good.
        case giveUp(Hold)
    }

    /// Rules 1–3 for a record with `timestamp`, `inFlightSince` (the earliest attempt whose outcome
    /// is unknown, nil when none) at `now`.
    public static func decide(timestamp: Int64, inFlightSince: Int64?, now: Int64) -> Decision {
        if timestamp < now - pastWindow { return .giveUp(.tooOld(timestamp: timestamp)) }
        if timestamp > now + futureWindow { return .wait(.future(timestamp: timestamp), until: timestamp - futureWindow + 1) }
        if let inFlightSince, now - inFlightSince >= identifierWindow { return .giveUp(.unconfirmed(since: inFlightSince)) }
        return .send
    }

    /// The wait before attempt `attempts + 1`, after `attempts` failed ones.
    public static func retryDelay(afterAttempts attempts: Int) -> Int64 {
        let doublings = min(max(attempts - 1, 0), 30)
        return min(longestRetryDelay, firstRetryDelay << Int64(doublings))
    }

    /// The record's state after an attempt.
    public struct Next: Sendable, Equatable {
        public var state: UsageReportState
        /// When to try again; nil when done or given up.
        public var nextAt: Int64?
        public var error: String?
        /// The earliest attempt whose outcome is unknown, after this one.
        public var inFlightSince: Int64?

        public init(state: UsageReportState, nextAt: Int64?, error: String?, inFlightSince: Int64?) {
            self.state = state
            self.nextAt = nextAt
            self.error = error
            self.inFlightSince = inFlightSince
        }
    }

    /// Rule 4: the state after attempt number `attempts` (this one included) ended in `outcome`.
    /// - Parameters:
    ///   - inFlightBefore: the record's `inFlightSince` before this attempt.
    ///   - sentAt: when this attempt started.
    public static func next(after outcome: MeterEventOutcome, attempts: Int, inFlightBefore: Int64?, sentAt: Int64, now: Int64) -> Next {
        switch outcome {
        case .accepted, .duplicate:
            return Next(state: .reported, nextAt: nil, error: nil, inFlightSince: nil)
        case .refused(let reason, let final):
            // A refusal proves this attempt created nothing; an earlier unknown one still may have.
            return Next(state: .failed, nextAt: final ? nil : retryAt(attempts: attempts, now: now), error: reason, inFlightSince: inFlightBefore)
        case .unknown(let reason):
            return Next(
                state: .failed, nextAt: retryAt(attempts: attempts, now: now), error: reason,
                inFlightSince: inFlightBefore.map { min($0, sentAt) } ?? sentAt)
        }
    }

    private static func retryAt(attempts: Int, now: Int64) -> Int64? {
        attempts >= maximumAttempts ? nil : now + retryDelay(afterAttempts: attempts)
    }

    /// Rule for users without a Stripe customer: wait for one during ``customerGrace`` after the
    /// record was accepted, then skip.
    public static func withoutCustomer(recordedAt: Int64, now: Int64) -> Decision {
        now - recordedAt >= customerGrace ? .giveUp(.noCustomer) : .wait(.noCustomer, until: now + customerRecheck)
    }
}

/// The `identifier` of a usage record's meter event: billingd's id of the record (its `seq`) in
/// a namespace drawn at random once per ledger database, so that two databases reporting to one
/// Stripe account never collide, and a retry of one record always carries the same identifier.
///
/// A fingerprint of the record follows, so that a seq used twice — a ledger restored from a
/// backup hands out again the seqs of records made after the backup, some of them already
/// reported — never makes Stripe take a new record for a copy of an old one and drop it.
public enum MeterEventIdentifier {
    /// `billingd-<namespace>-<seq>-<fingerprint>`, at most 63 characters (Stripe allows 100).
    public static func make(namespace: String, seq: Int64, fingerprint: String) -> String {
        "billingd-\(namespace)-\(seq)-\(fingerprint)"
    }

    /// 8 hex digits of SHA-256 over what makes the record itself: its scope, user, meter,
    /// idempotency key, time and quantity.
    public static func fingerprint(
        account: String, livemode: Bool, user: String, meter: String, idempotencyKey: String, timestamp: Int64, quantity: Int64
    ) -> String {
        // Lengths before the variable parts, so that no two records spell the same bytes.
        var bytes: [UInt8] = []
        for part in [account, livemode ? "live" : "test", user, meter, idempotencyKey, String(timestamp), String(quantity)] {
            bytes += Array("\(part.utf8.count):".utf8) + Array(part.utf8)
        }
        let hex = Array("0123456789abcdef".utf8)
        return String(decoding: SHA256.hash(data: bytes).prefix(4).flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0x0F)]] }, as: UTF8.self)
    }

    /// A new namespace: 16 random lowercase letters and digits (about 82 bits).
    public static func newNamespace(using generator: inout some RandomNumberGenerator) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        return String((0..<16).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }

    public static func isNamespace(_ text: String) -> Bool {
        text.count == 16 && text.allSatisfy { ($0.isLetter && $0.isLowercase && $0.isASCII) || ($0.isNumber && $0.isASCII) }
    }
}
