import BillingCore
import Testing

@Suite("MeterEventPolicy: when a usage record is sent, retried, or given up")
struct MeterEventPolicyTests {
    static let now: Int64 = 1_770_000_000

    @Test("Rules in order: too old, ahead of the clock, unconfirmed past the identifier window, else send", arguments: [
        (now - 35 * 86_400 - 1, nil, MeterEventPolicy.Decision.giveUp(.tooOld(timestamp: now - 35 * 86_400 - 1))),
        (now - 35 * 86_400, nil, .send),
        (now + 300, nil, .send),
        (now + 301, nil, .wait(.future(timestamp: now + 301), until: now + 2)),
        (now, now - 23 * 3_600 + 1, .send),
        (now, now - 23 * 3_600, .giveUp(.unconfirmed(since: now - 23 * 3_600))),
        (now - 36 * 86_400, now - 30 * 86_400, .giveUp(.tooOld(timestamp: now - 36 * 86_400))),
    ] as [(Int64, Int64?, MeterEventPolicy.Decision)])
    func decide(timestamp: Int64, inFlightSince: Int64?, expected: MeterEventPolicy.Decision) {
        #expect(MeterEventPolicy.decide(timestamp: timestamp, inFlightSince: inFlightSince, now: Self.now) == expected)
    }

    @Test("Retries wait 1, 2, 4 … minutes, at most an hour; all ten attempts fit well inside Stripe's 24 hours")
    func delays() {
        let delays = (1..<MeterEventPolicy.maximumAttempts).map { MeterEventPolicy.retryDelay(afterAttempts: $0) }
        #expect(delays == [60, 120, 240, 480, 960, 1_920, 3_600, 3_600, 3_600])
        #expect(delays.reduce(0, +) < MeterEventPolicy.identifierWindow / 4)
        #expect(MeterEventPolicy.retryDelay(afterAttempts: 1_000) == 3_600)
    }

    @Test("After an answer: accepted and duplicate are reported; a refusal keeps an earlier unknown attempt; an unknown one starts the window")
    func next() {
        let now = Self.now
        #expect(MeterEventPolicy.next(after: .accepted, attempts: 1, inFlightBefore: nil, sentAt: now, now: now).state == .reported)
        let duplicate = MeterEventPolicy.next(after: .duplicate, attempts: 3, inFlightBefore: now - 600, sentAt: now, now: now)
        #expect(duplicate == .init(state: .reported, nextAt: nil, error: nil, inFlightSince: nil))

        let refused = MeterEventPolicy.next(after: .refused("400", final: false), attempts: 2, inFlightBefore: now - 600, sentAt: now, now: now)
        #expect(refused == .init(state: .failed, nextAt: now + 120, error: "400", inFlightSince: now - 600))
        let final = MeterEventPolicy.next(after: .refused("too old", final: true), attempts: 1, inFlightBefore: nil, sentAt: now, now: now)
        #expect(final.nextAt == nil)
        #expect(final.inFlightSince == nil)

        let unknown = MeterEventPolicy.next(after: .unknown("timeout"), attempts: 1, inFlightBefore: nil, sentAt: now - 5, now: now)
        #expect(unknown == .init(state: .failed, nextAt: now + 60, error: "timeout", inFlightSince: now - 5))
        #expect(MeterEventPolicy.next(after: .unknown("timeout"), attempts: 4, inFlightBefore: now - 900, sentAt: now, now: now).inFlightSince == now - 900)
        #expect(MeterEventPolicy.next(after: .unknown("x"), attempts: MeterEventPolicy.maximumAttempts, inFlightBefore: nil, sentAt: now, now: now).nextAt == nil)
    }

    @Test("Without a customer: wait and look again every 5 minutes for an hour, then skip")
    func withoutCustomer() {
        #expect(MeterEventPolicy.withoutCustomer(recordedAt: Self.now - 3_599, now: Self.now) == .wait(.noCustomer, until: Self.now + 300))
        #expect(MeterEventPolicy.withoutCustomer(recordedAt: Self.now - 3_600, now: Self.now) == .giveUp(.noCustomer))
    }

    @Test("Identifiers: billingd-<namespace>-<seq>-<fingerprint>, within Stripe's 100 characters; namespaces are 16 random characters")
    func identifiers() {
        var generator = SystemRandomNumberGenerator()
        let namespace = MeterEventIdentifier.newNamespace(using: &generator)
        #expect(MeterEventIdentifier.isNamespace(namespace))
        #expect(namespace != MeterEventIdentifier.newNamespace(using: &generator))
        let fingerprint = MeterEventIdentifier.fingerprint(
            account: "acct_1", livemode: true, user: "user_42", meter: "radars", idempotencyKey: "radar-7", timestamp: 1_770_000_000, quantity: 3)
        #expect(fingerprint.count == 8)
        #expect(fingerprint.allSatisfy { $0.isHexDigit })
        let identifier = MeterEventIdentifier.make(namespace: namespace, seq: Int64.max, fingerprint: fingerprint)
        #expect(identifier == "billingd-\(namespace)-9223372036854775807-\(fingerprint)")
        #expect(identifier.count <= 100)
        #expect(!MeterEventIdentifier.isNamespace("ABCDEFGHIJKLMNOP"))
    }

    @Test("The fingerprint is the record's: the same for the same record, another for any other field, and parts cannot run into each other")
    func fingerprints() {
        func print(_ user: String = "user_42", _ meter: String = "radars", key: String = "radar-7", timestamp: Int64 = 1, quantity: Int64 = 3, livemode: Bool = false) -> String {
            MeterEventIdentifier.fingerprint(account: "", livemode: livemode, user: user, meter: meter, idempotencyKey: key, timestamp: timestamp, quantity: quantity)
        }
        let base = print()
        #expect(print() == base)
        let others = [print("user_43"), print("user_42", "api"), print(key: "radar-8"), print(timestamp: 2), print(quantity: 4), print(livemode: true)]
        #expect(Set(others + [base]).count == others.count + 1)
        #expect(print("ab", "c") != print("a", "bc"))
    }
}
