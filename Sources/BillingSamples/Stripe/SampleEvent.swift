import BillingCore
import Foundation

/// Complete Stripe event bodies for any event type, built on ``SampleObjects``, for tests, the
/// Stripe fake and demos; the object's status agrees with the event type.
public enum SampleEvent {
    /// The resource (a ``SampleObjects/json`` key) an event type carries in `data.object`, e.g.
    /// `customer.subscription.updated` → `subscription`, `charge.dispute.created` → `dispute`.
    ///
    /// Drops the action (the last dot-component), then tries the irregular names, the whole
    /// prefix, and ever shorter dotted suffixes of it; falls back to the prefix itself.
    public static func resource(forEventType type: String) -> String {
        var components = type.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        if components.count > 1 { components.removeLast() }
        let prefix = components.joined(separator: ".")
        if let resource = irregularResources[prefix] { return resource }
        while !components.isEmpty {
            let candidate = components.joined(separator: ".")
            if SampleObjects.json[candidate] != nil { return candidate }
            components.removeFirst()
        }
        return prefix
    }

    /// The UTF-8 bytes of a complete event envelope of `type` (keys sorted, deterministic).
    /// - Parameters:
    ///   - account: the connected account, written as `account` only when non-nil.
    ///   - objectOverrides: top-level string members of `data.object` to set last, e.g. `["id": "sub_123"]`.
    public static func body(
        type: String, eventID: String, created: Int64, apiVersion: String, livemode: Bool, account: String?,
        objectOverrides: [String: String] = [:]
    ) -> [UInt8] {
        // No fields to place, so nothing can be refused.
        (try? body(type: type, eventID: eventID, created: created, apiVersion: apiVersion, livemode: livemode, account: account, objectOverrides: objectOverrides, fields: []))
            ?? Array("{}".utf8)
    }

    /// The same, with `--set` fields placed in the object after the overrides; refuses a field
    /// whose path the sample does not have.
    /// - Parameter timesAtEvent: move every timestamp of the sample by the same amount so that the
    ///   object was created when the event was (`billingd trigger`): a subscription's period then
    ///   starts now rather than on the sample's date, and an invoice is created and paid today.
    public static func body(
        type: String, eventID: String, created: Int64, apiVersion: String, livemode: Bool, account: String?,
        objectOverrides: [String: String] = [:], fields: [SampleField], timesAtEvent: Bool = false
    ) throws(SampleFieldError) -> [UInt8] {
        let resource = resource(forEventType: type)
        var object = sampleObject(resource)
        if timesAtEvent, let sampleCreated = object["created"] as? Int {
            object = shiftingTimes(in: object, by: created - Int64(sampleCreated)) as? [String: Any] ?? object
        }
        makeConsistent(&object, withEventType: type, created: created)
        object = settingLivemode(livemode, in: object) as? [String: Any] ?? object
        object["livemode"] = livemode
        if livemode, let id = object["id"] as? String, id.hasPrefix("cs_test_") {
            object["id"] = "cs_live_" + id.dropFirst("cs_test_".count)
        }
        for (key, value) in objectOverrides {
            object[key] = value
        }
        for field in fields {
            try field.apply(to: &object)
        }

        var data: [String: Any] = ["object": object]
        if let previous = previousAttributes(forEventType: type, object: object) {
            data["previous_attributes"] = previous
        }
        var event: [String: Any] = [
            "id": eventID,
            "object": "event",
            "api_version": apiVersion,
            "created": created,
            "data": data,
            "livemode": livemode,
            "pending_webhooks": 1,
            "request": ["id": NSNull(), "idempotency_key": NSNull()],
            "type": type,
        ]
        if let account { event["account"] = account }
        if let bytes = serialize(event) { return bytes }
        // Unreachable with the generated samples; still a valid event rather than a crash.
        data["object"] = minimalObject(resource, livemode: livemode)
        event["data"] = data
        return serialize(event) ?? Array("{}".utf8)
    }

    // MARK: - Resources

    /// Event prefixes whose resource name is not found by the generic rule.
    private static let irregularResources: [String: String] = [
        "application_fee.refund": "fee_refund",
        "customer.source": "card",  // sources added with a card token are cards
        "source.transaction": "source_transaction",
        "issuing_authorization": "issuing.authorization",
        "issuing_card": "issuing.card",
        "issuing_cardholder": "issuing.cardholder",
        "issuing_dispute": "issuing.dispute",
        "issuing_personalization_design": "issuing.personalization_design",
        "issuing_token": "issuing.token",
        "issuing_transaction": "issuing.transaction",
    ]

    private static func sampleObject(_ resource: String) -> [String: Any] {
        guard let json = SampleObjects.json[resource],
            let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        else { return minimalObject(resource, livemode: false) }
        return object
    }

    private static func minimalObject(_ resource: String, livemode: Bool) -> [String: Any] {
        ["id": "\(resource)_sample", "object": resource, "livemode": livemode]
    }

    private static func serialize(_ event: [String: Any]) -> [UInt8]? {
        guard JSONSerialization.isValidJSONObject(event),
            let data = try? JSONSerialization.data(withJSONObject: event, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return nil }
        return Array(data)
    }

    /// Sets every `livemode` member, nested objects included, so that no part claims the other mode.
    private static func settingLivemode(_ livemode: Bool, in value: Any) -> Any {
        if var object = value as? [String: Any] {
            for (key, member) in object {
                object[key] = key == "livemode" ? livemode : settingLivemode(livemode, in: member)
            }
            return object
        }
        if let array = value as? [Any] {
            return array.map { settingLivemode(livemode, in: $0) }
        }
        return value
    }

    // MARK: - Status consistent with the event type

    private static let day: Int64 = 86_400

    /// Every timestamp in `value` (a time-named field holding Unix seconds) moved by `delta`,
    /// nested objects and lists included, so the sample stays consistent with itself.
    static func shiftingTimes(in value: Any, by delta: Int64, key: String = "") -> Any {
        if let dictionary = value as? [String: Any] {
            return Dictionary(uniqueKeysWithValues: dictionary.map { ($0.key, shiftingTimes(in: $0.value, by: delta, key: $0.key)) })
        }
        if let array = value as? [Any] {
            return array.map { shiftingTimes(in: $0, by: delta, key: key) }
        }
        guard isTimeField(key), let seconds = value as? Int, !(value is Bool), (1_000_000_000...4_000_000_000).contains(seconds) else {
            return value
        }
        return Int64(seconds) + delta
    }

    /// Whether a field of Stripe's objects holds a time: `created`, `*_at`, `*_start`/`*_end`,
    /// `*_date`, `start`/`end` of a period, `billing_cycle_anchor`, `next_payment_attempt`.
    static func isTimeField(_ key: String) -> Bool {
        ["created", "start", "end", "billing_cycle_anchor", "next_payment_attempt", "date"].contains(key)
            || ["_at", "_start", "_end", "_date"].contains { key.hasSuffix($0) }
    }

    private static func makeConsistent(_ object: inout [String: Any], withEventType type: String, created: Int64) {
        switch type {
        case "customer.subscription.created", "customer.subscription.updated", "customer.subscription.resumed",
            "customer.subscription.pending_update_applied", "customer.subscription.pending_update_expired":
            object["status"] = "active"
        case "customer.subscription.deleted":
            object["status"] = "canceled"
            object["canceled_at"] = created
            object["ended_at"] = created
            object["cancel_at_period_end"] = false
            object["cancellation_details"] = ["comment": NSNull(), "feedback": NSNull(), "reason": "cancellation_requested"]
        case "customer.subscription.paused":
            object["status"] = "paused"
        case "customer.subscription.trial_will_end":
            // Stripe sends this three days before the trial ends; the trial is the current period.
            let trialEnd = created + 3 * day
            let trialStart = trialEnd - 14 * day
            object["status"] = "trialing"
            object["trial_start"] = trialStart
            object["trial_end"] = trialEnd
            setSubscriptionItemPeriods(&object, start: trialStart, end: trialEnd)

        case "invoice.created", "invoice.deleted", "invoice.finalization_failed":
            setInvoiceDraft(&object)
        case "invoice.upcoming":
            setInvoiceDraft(&object)
            object.removeValue(forKey: "id")
            object["billing_reason"] = "upcoming"
            mapLines(&object) { $0["invoice"] = NSNull() }
        case "invoice.finalized", "invoice.sent", "invoice.payment_attempt_required":
            setInvoiceOpen(&object, created: created)
        case "invoice.payment_failed", "invoice.payment_action_required":
            setInvoiceOpen(&object, created: created)
            object["attempted"] = true
            object["attempt_count"] = 1
            object["next_payment_attempt"] = type == "invoice.payment_failed" ? created + 3 * day : NSNull()
        case "invoice.overdue", "invoice.will_be_due":
            setInvoiceOpen(&object, created: created)
            object["collection_method"] = "send_invoice"
            object["due_date"] = type == "invoice.overdue" ? created - day : created + 7 * day
        case "invoice.paid", "invoice.payment_succeeded", "invoice.overpaid":
            setInvoicePaid(&object, created: created)
        case "invoice.marked_uncollectible":
            setInvoiceOpen(&object, created: created)
            object["status"] = "uncollectible"
            setTransition(&object, "marked_uncollectible_at", created)
        case "invoice.voided":
            setInvoiceOpen(&object, created: created)
            object["status"] = "void"
            setTransition(&object, "voided_at", created)

        case "invoice_payment.paid":
            object["status"] = "paid"
            object["amount_paid"] = object["amount_requested"] ?? NSNull()
            setTransition(&object, "paid_at", created)

        case "checkout.session.completed", "checkout.session.async_payment_succeeded":
            object["status"] = "complete"
            object["payment_status"] = "paid"
            object["url"] = NSNull()
        case "checkout.session.async_payment_failed":
            object["status"] = "complete"
            object["payment_status"] = "unpaid"
            object["url"] = NSNull()
        case "checkout.session.expired":
            object["status"] = "expired"
            object["payment_status"] = "unpaid"
            object["url"] = NSNull()
            object["subscription"] = NSNull()
            object["invoice"] = NSNull()

        case "payment_method.detached":
            object["customer"] = NSNull()
        default:
            break
        }
    }

    private static func setSubscriptionItemPeriods(_ object: inout [String: Any], start: Int64, end: Int64) {
        guard var items = object["items"] as? [String: Any], let data = items["data"] as? [[String: Any]] else { return }
        items["data"] = data.map { item in
            var item = item
            item["current_period_start"] = start
            item["current_period_end"] = end
            return item
        }
        object["items"] = items
    }

    private static func mapLines(_ object: inout [String: Any], _ change: (inout [String: Any]) -> Void) {
        guard var lines = object["lines"] as? [String: Any], let data = lines["data"] as? [[String: Any]] else { return }
        lines["data"] = data.map { line in
            var line = line
            change(&line)
            return line
        }
        object["lines"] = lines
    }

    private static func setTransition(_ object: inout [String: Any], _ name: String, _ time: Int64?) {
        var transitions = object["status_transitions"] as? [String: Any] ?? [:]
        transitions[name] = time.map { $0 as Any } ?? NSNull()
        object["status_transitions"] = transitions
    }

    private static func int64(_ value: Any?) -> Int64? {
        (value as? NSNumber)?.int64Value
    }

    /// Not finalized: no number, no hosted page, nothing paid or attempted.
    private static func setInvoiceDraft(_ object: inout [String: Any]) {
        object["status"] = "draft"
        object["number"] = NSNull()
        object["hosted_invoice_url"] = NSNull()
        object["invoice_pdf"] = NSNull()
        object["effective_at"] = NSNull()
        object["attempted"] = false
        object["attempt_count"] = 0
        object["amount_paid"] = 0
        object["amount_remaining"] = object["amount_due"] ?? 0
        for name in ["finalized_at", "paid_at", "voided_at", "marked_uncollectible_at"] {
            setTransition(&object, name, nil)
        }
    }

    /// Finalized at or before the event, nothing paid yet.
    private static func setInvoiceOpen(_ object: inout [String: Any], created: Int64) {
        object["status"] = "open"
        object["amount_paid"] = 0
        object["amount_remaining"] = object["amount_due"] ?? 0
        finalize(&object, by: created)
        setTransition(&object, "paid_at", nil)
    }

    private static func setInvoicePaid(_ object: inout [String: Any], created: Int64) {
        let total = int64(object["total"]) ?? 0
        object["status"] = "paid"
        object["amount_due"] = total
        object["amount_paid"] = total
        object["amount_remaining"] = 0
        if object["paid"] != nil { object["paid"] = true }  // the pre-2025 shape
        finalize(&object, by: created)
        setTransition(&object, "paid_at", created)
    }

    private static func finalize(_ object: inout [String: Any], by created: Int64) {
        let transitions = object["status_transitions"] as? [String: Any]
        let finalizedAt = min(int64(transitions?["finalized_at"]) ?? created, created)
        setTransition(&object, "finalized_at", finalizedAt)
    }

    /// What changed, for `*.updated` events of the objects billingd keeps.
    private static func previousAttributes(forEventType type: String, object: [String: Any]) -> [String: Any]? {
        switch type {
        case "customer.subscription.updated":
            return ["status": "incomplete"]
        case "customer.updated":
            return ["invoice_settings": ["default_payment_method": NSNull()]]
        case "invoice.updated":
            return ["metadata": ["note": "edited before payment"]]
        case "payment_method.updated":
            return ["card": ["exp_month": 8, "exp_year": 2029]]
        case "price.updated", "product.updated":
            return ["active": false]
        default:
            return nil
        }
    }
}
