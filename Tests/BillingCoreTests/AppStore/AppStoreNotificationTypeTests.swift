@testable import BillingCore
import BillingSamples
import Foundation
import Testing

@Suite("App Store notification types: Apple's names, and a new one kept")
struct AppStoreNotificationTypeTests {
    typealias F = AppStoreFixtures

    @Test("Apple's names read as the named constants; billingd applies the types it knows how to")
    func knownTypes() {
        #expect(AppStoreNotificationType(rawValue: "DID_RENEW") == .didRenew)
        #expect(AppStoreNotificationType(rawValue: "REFUND_REVERSED") == .refundReversed)
        #expect(AppStoreNotificationSubtype(rawValue: "INITIAL_BUY") == .initialBuy)
        #expect(AppStoreNotificationType.subscribed.isApplied && AppStoreNotificationType.test.isApplied)
        #expect(!AppStoreNotificationType.externalPurchaseToken.isApplied)
        #expect(!AppStoreNotificationType.metadataUpdate.isApplied)
        #expect(AppStoreNotificationType.applied.count == 18)
    }

    @Test("A type and subtype Apple adds later are kept as they came, and not applied")
    func unknownTypeKept() throws {
        let json = Array(
            #"{"notificationUUID":"u-new","notificationType":"SUBSCRIPTION_PAUSED","subtype":"BY_USER","signedDate":1767225601000,"data":{"environment":"Sandbox"}}"#.utf8)
        let notification = try AppStoreNotification(json: json, transaction: nil, renewalInfo: nil)
        #expect(notification.notificationType.rawValue == "SUBSCRIPTION_PAUSED")
        #expect(notification.notificationType == AppStoreNotificationType(rawValue: "SUBSCRIPTION_PAUSED"))
        #expect(notification.notificationType.description == "SUBSCRIPTION_PAUSED")
        #expect(!notification.notificationType.isApplied)
        #expect(notification.subtype?.rawValue == "BY_USER")
        #expect(notification.json == json)
    }

    @Test("A genuine notification of a type Apple adds later verifies, its type kept")
    func unknownTypeVerifies() async throws {
        let pki = try AppStoreTestPKI()
        let verifier = try AppStoreVerifier(F.configuration(pki))
        let signed = try F.notification(pki, ["notificationType": "SUBSCRIPTION_PAUSED", "subtype": "BY_USER"])
        let verified = try await verifier.verifyNotification(signed)
        #expect(verified.notificationType == AppStoreNotificationType(rawValue: "SUBSCRIPTION_PAUSED"))
        #expect(verified.subtype == AppStoreNotificationSubtype(rawValue: "BY_USER"))
        let stored = try AppStoreNotification(storedBody: Array(#"{"signedPayload":"\#(signed)"}"#.utf8))
        #expect(stored.notificationType.rawValue == "SUBSCRIPTION_PAUSED")
        #expect(stored.subtype?.rawValue == "BY_USER")
    }
}
