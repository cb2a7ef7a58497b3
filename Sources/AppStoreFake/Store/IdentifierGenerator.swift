import BillingCore

/// Makes identifiers in Apple's shapes, the same sequence for the same seed: numeric transaction
/// and web order line item ids, ten-character order ids (`MK5TTTVWJH`), notification UUIDs.
struct IdentifierGenerator: Sendable {
    private var random: SplitMix64
    private var nextTransaction: UInt64
    private var nextLineItem: UInt64
    private static let orderAlphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789".utf8)

    /// Sandbox ids start with 2000000, Production ids with 1000000 (16 digits), as Apple's do;
    /// `offset` (below 10^14, so that they keep 16 digits) moves where they count from.
    init(environment: AppStoreEnvironment, seed: UInt64, offset: UInt64 = 0) {
        random = SplitMix64(seed: seed)
        let base: UInt64 = environment == .production ? 1_000_000_000_000_000 : 2_000_000_000_000_000
        let offset = offset % 100_000_000_000_000
        nextTransaction = base + 100_000_000 + offset
        nextLineItem = base + 50_000_000 + offset
    }

    mutating func transactionID() -> String {
        nextTransaction += 1
        return String(nextTransaction)
    }

    mutating func webOrderLineItemID() -> String {
        nextLineItem += 1
        return String(nextLineItem)
    }

    /// Ten characters without the easily confused I and O, as on Apple's receipts.
    mutating func orderID() -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(10)
        for _ in 0..<10 { bytes.append(Self.orderAlphabet[Int(random.next() % UInt64(Self.orderAlphabet.count))]) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A version 4 UUID, lowercased as Apple writes `notificationUUID`.
    mutating func uuid() -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        let high = random.next()
        let low = random.next()
        for index in 0..<8 {
            bytes[index] = UInt8(truncatingIfNeeded: high >> (8 * UInt64(index)))
            bytes[index + 8] = UInt8(truncatingIfNeeded: low >> (8 * UInt64(index)))
        }
        bytes[6] = bytes[6] & 0x0f | 0x40
        bytes[8] = bytes[8] & 0x3f | 0x80
        let hex = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for (index, byte) in bytes.enumerated() {
            if [4, 6, 8, 10].contains(index) { text.append(UInt8(ascii: "-")) }
            text.append(hex[Int(byte >> 4)])
            text.append(hex[Int(byte & 0x0f)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

/// A fast, seedable generator (SplitMix64), so that seeded data is the same every run.
struct SplitMix64: RandomNumberGenerator, Sendable {
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
