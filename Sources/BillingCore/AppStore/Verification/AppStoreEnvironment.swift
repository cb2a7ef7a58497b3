/// Production, Sandbox, Xcode, LocalTesting, or a value Apple adds later (kept as a string).
///
/// A struct, not an enum, so that a new environment decodes instead of failing the delivery; it
/// is then refused by ``AppStoreVerifier`` unless configured, and always needs Apple's chain.
public struct AppStoreEnvironment: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public static let production = Self(rawValue: "Production")
    public static let sandbox = Self(rawValue: "Sandbox")
    public static let xcode = Self(rawValue: "Xcode")
    public static let localTesting = Self(rawValue: "LocalTesting")

    /// Production is live mode; everything else is test mode (as Stripe's livemode).
    public var isLive: Bool { self == .production }

    /// Whether Apple signs this environment's data with a chain to its root: Production, Sandbox,
    /// and any environment Apple adds later. Only Xcode and LocalTesting data is signed locally,
    /// so only a payload naming one of those two may go without the chain (and only if configured).
    public var isChainSigned: Bool { self != .xcode && self != .localTesting }

    public var description: String { rawValue }
}
