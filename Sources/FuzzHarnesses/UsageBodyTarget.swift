import BillingServer

/// The usage endpoints' JSON bodies, read as each endpoint reads them: the members it allows,
/// then each member's type and range (`…/events`, `…/consume`, `PUT …/usage/{meter}`, and each
/// item of `POST /v1/usage/events`).
enum UsageBodyTarget {
    /// A fixed clock, so that a finding replays alone: 2026-01-01.
    static let now: Int64 = 1_767_225_600

    static func run(_ input: [UInt8]) -> FuzzVerdict {
        var accepted = false
        for allowed in [["quantity", "idempotency_key", "timestamp"], ["quantity", "idempotency_key"]] {
            if let body = try? JSONObjectBody(bytes: input, allowed: allowed), (try? UsageController.recordFields(body, now: now)) != nil {
                accepted = true
            }
        }
        if let body = try? JSONObjectBody(bytes: input, allowed: ["value"]),
            (try? body.integer("value", in: 0...Int64.max, required: true, "the gauge's level")) != nil
        {
            accepted = true
        }
        if let body = try? JSONObjectBody(bytes: input, allowed: ["events"]),
            let items = try? body.objects(
                "events", maximum: UsageController.maximumBatch, allowed: ["user", "meter", "quantity", "idempotency_key", "timestamp"])
        {
            var every = true
            for item in items {
                do {
                    _ = try item.string("user", maximumBytes: UserRequest.maximumUserBytes, "the app user id")
                    _ = try item.string("meter", maximumBytes: 100, "a meter id")
                    _ = try UsageController.recordFields(item, now: now)
                } catch {
                    every = false
                }
            }
            if every { accepted = true }
        }
        return accepted ? .accepted : .rejected
    }
}
