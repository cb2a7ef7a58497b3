import BillingCore
import Testing

private let pro = UserAccessState(
    plan: "pro", entitled: true, why: "active", source: "stripe", subscriptionID: "sub_1", status: "active", price: "price_pro",
    periodEnd: 1_000, features: ["export"], limits: ["items": "5000"])
private let free = UserAccessState(plan: "free", features: ["read"], limits: ["items": "100"])

/// `base` (Pro by default) with one change.
private func with(_ change: (inout UserAccessState) -> Void, _ base: UserAccessState = pro) -> UserAccessState {
    var state = base
    change(&state)
    return state
}

@Suite("Outbound events from a change of a user's view")
struct OutboundEventRulesTests {
    @Test("each change of a user's view gives the events an app acts on, in order", arguments: [
        (nil, pro, [OutboundEventType.subscriptionStarted, .entitlementUpdated]),
        (free, pro, [.subscriptionStarted, .entitlementUpdated]),
        (pro, with { $0.periodEnd = 2_000 }, [.subscriptionRenewed]),
        (pro, with { $0.plan = "enterprise"; $0.price = "price_ent"; $0.features = ["export", "sso"] }, [.subscriptionPlanChanged, .entitlementUpdated]),
        (pro, with { $0.cancelScheduled = true; $0.why = "canceling" }, [.subscriptionCancellationScheduled]),
        (with { $0.cancelScheduled = true }, pro, [.subscriptionUncanceled]),
        (pro, with { $0.billingIssue = true; $0.why = "grace"; $0.status = "past_due" }, [.subscriptionBillingIssue]),
        (with { $0.billingIssue = true; $0.why = "grace" }, pro, [.subscriptionRecovered]),
        (with { $0.billingIssue = true; $0.entitled = false; $0.why = "billing_retry"; $0.plan = "free" }, pro, [.subscriptionRecovered, .entitlementUpdated]),
        (pro, with { $0.entitled = false; $0.why = "expired"; $0.plan = "free"; $0.features = ["read"]; $0.limits = ["items": "100"] }, [.subscriptionExpired, .entitlementUpdated]),
        (pro, with { $0.entitled = false; $0.revoked = true; $0.why = "revoked"; $0.plan = "free" }, [.subscriptionRefunded, .entitlementUpdated]),
        (pro, with { $0.status = "active" }, []),
        (nil, free, []),
    ] as [(UserAccessState?, UserAccessState, [OutboundEventType])])
    func events(previous: UserAccessState?, current: UserAccessState, expected: [OutboundEventType]) {
        #expect(OutboundEventRules.events(from: previous, to: current) == expected)
    }

    @Test("a catalog change of the default tier's limits is announced to a user already announced")
    func limitsOfAnnouncedUser() {
        #expect(OutboundEventRules.events(from: free, to: with({ $0.limits = ["items": "200"] }, free)) == [.entitlementUpdated])
    }
}

@Suite("Standard Webhooks signatures")
struct StandardWebhookSignerTests {
    @Test("the signature matches the Standard Webhooks reference vector")
    func referenceVector() throws {
        let signer = try StandardWebhookSigner(secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"])
        let signature = signer.signature(
            id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: Array(#"{"test": 2432232314}"#.utf8))
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
    }

    @Test("several secrets sign every message, each signature separated by a space")
    func rotation() throws {
        let first = StandardWebhookSigner.generateSecret()
        let second = StandardWebhookSigner.generateSecret()
        let both = try StandardWebhookSigner(secrets: [first, second]).signature(id: "msg_1", timestamp: 1, body: [])
        let one = try StandardWebhookSigner(secrets: [first]).signature(id: "msg_1", timestamp: 1, body: [])
        let other = try StandardWebhookSigner(secrets: [second]).signature(id: "msg_1", timestamp: 1, body: [])
        #expect(both == one + " " + other)
    }

    @Test("a secret that is not base64 is refused, naming which", arguments: ["whsec_not base64!", "whsec_c2hvcnQ="])
    func badSecret(secret: String) {
        #expect(throws: StandardWebhookSecretError.notBase64(index: 1)) {
            try StandardWebhookSigner(secrets: [StandardWebhookSigner.generateSecret(), secret])
        }
    }
}
