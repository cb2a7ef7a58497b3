import BillingServer
import Hummingbird
import Logging
import Testing

/// The bearer token's comparison, directly: right on every kind of near miss, and its work
/// shaped by the lengths alone (it walks the whole expected token whatever the presented one
/// holds, and tries every configured token).
@Suite struct BearerTokenComparisonTests {
    typealias Middleware = BearerTokenMiddleware<BasicRequestContext>
    static let token = Array("tok_live_0123456789abcdef".utf8)

    @Test func equalTokensMatch() {
        #expect(Middleware.constantTimeEquals(Self.token, Self.token))
        #expect(Middleware.constantTimeEquals([], []))
    }

    static let nearMisses: [(name: String, presented: String)] = [
        ("differs in the first byte", "Xok_live_0123456789abcdef"),
        ("differs in the last byte", "tok_live_0123456789abcdeX"),
        ("a prefix", "tok_live_0123456789abcde"),
        ("one byte longer", "tok_live_0123456789abcdefX"),
        ("the token followed by a NUL", "tok_live_0123456789abcdef\u{0}"),
        ("empty", ""),
        ("the token twice", "tok_live_0123456789abcdeftok_live_0123456789abcdef"),
    ]

    @Test func nearMissesDoNotMatch() {
        for (name, presented) in Self.nearMisses {
            #expect(!Middleware.constantTimeEquals(Array(presented.utf8), Self.token), "\(name)")
        }
    }

    /// Lengths that differ by a multiple of 256 look equal to a difference kept in one byte.
    @Test func lengthsThatDifferByAMultipleOf256DoNotMatch() {
        let expected = [UInt8](repeating: 0, count: 300)
        #expect(!Middleware.constantTimeEquals([UInt8](repeating: 0, count: 44), expected))
        #expect(!Middleware.constantTimeEquals([UInt8](repeating: 0, count: 556), expected))
        #expect(Middleware.constantTimeEquals([UInt8](repeating: 0, count: 300), expected))
    }

    static func middleware(_ tokens: [String]) -> Middleware {
        Middleware(tokens: tokens, metrics: BillingMetrics(), rejections: RejectionLog(logger: Logger(label: "test")))
    }

    @Test func anyConfiguredTokenIsAccepted() {
        let middleware = Self.middleware(["tok_old_0123456789abcdef", "tok_new_0123456789abcdef"])
        #expect(middleware.accepts(Array("tok_old_0123456789abcdef".utf8)))
        #expect(middleware.accepts(Array("tok_new_0123456789abcdef".utf8)))
        #expect(!middleware.accepts(Array("tok_new_0123456789abcdeF".utf8)))
        #expect(!Self.middleware([]).accepts(Array("tok_new_0123456789abcdef".utf8)))
    }
}
