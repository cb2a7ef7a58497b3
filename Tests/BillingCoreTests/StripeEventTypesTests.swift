import BillingCore
import Foundation
import Testing

@Suite("Stripe's event types")
struct StripeEventTypesTests {
    @Test("The list in the code is Fixtures/event-types.txt")
    func sameAsFixture() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("Fixtures/event-types.txt"), encoding: .utf8)
        let fixture = Set(text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && $0 != "*" })
        #expect(StripeEventTypes.all == fixture)
        #expect(StripeEventTypes.all.contains("customer.subscription.created"))
    }

    @Test("A misspelt type is answered with the nearest real ones", arguments: [
        ("customer.subscription.creatd", "customer.subscription.created"),
        ("invoice.payed", "invoice.paid"),
        ("checkout.session.complete", "checkout.session.completed"),
    ])
    func nearest(_ typo: String, expected: String) {
        #expect(!StripeEventTypes.all.contains(typo))
        #expect(StripeEventTypes.nearest(to: typo).first == expected)
    }

    @Test("Nothing is near a type far from every real one")
    func nothingNear() {
        #expect(StripeEventTypes.nearest(to: "zzz.qqq.xxxxxx").isEmpty)
    }
}
