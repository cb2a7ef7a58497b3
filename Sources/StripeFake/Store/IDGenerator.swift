import Synchronization

/// Makes ids shaped like Stripe's (`cus_` + 14 characters, `sub_1` + 23, …) that sort in the order
/// they were made, so that objects created in the same second still list newest first.
final class IDGenerator: Sendable {
    private static let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
    /// Starts well inside the six-character range so that ids do not begin with a run of zeros.
    private let counter = Atomic<UInt64>(17_000_000_000)

    /// `prefix` + a six-character sequence + random characters, `length` characters after the prefix.
    func make(_ prefix: String, length: Int, using generator: inout some RandomNumberGenerator) -> String {
        let sequence = counter.add(1, ordering: .relaxed).newValue
        var bytes = Array(prefix.utf8)
        bytes.reserveCapacity(prefix.utf8.count + length)
        var digits = [UInt8](repeating: Self.alphabet[0], count: 6)
        var rest = sequence
        for index in stride(from: 5, through: 0, by: -1) {
            digits[index] = Self.alphabet[Int(rest % 62)]
            rest /= 62
        }
        bytes.append(contentsOf: digits)
        for _ in 0..<max(0, length - 6) {
            bytes.append(Self.alphabet[Int(generator.next() % 62)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// An id for a new object of `kind`.
    func make(_ kind: ObjectKind, using generator: inout some RandomNumberGenerator) -> String {
        switch kind {
        case .customer, .product: make(kind.idPrefix, length: 14, using: &generator)
        case .checkoutSession: make("cs_test_a1", length: 56, using: &generator)
        case .billingMeter: make("mtr_test_61", length: 30, using: &generator)
        default: make(kind.idPrefix + "1", length: 23, using: &generator)
        }
    }

    func make(_ kind: ObjectKind) -> String {
        var generator = SystemRandomNumberGenerator()
        return make(kind, using: &generator)
    }

    func make(_ prefix: String, length: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return make(prefix, length: length, using: &generator)
    }
}

/// A fast, seedable generator (SplitMix64) so that `seed(…, seed: 42)` builds the same data every time.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
