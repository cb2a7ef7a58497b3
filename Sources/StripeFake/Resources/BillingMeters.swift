/// Billing Meters and the usage reported to them: meters (`/v1/billing/meters`: create, list,
/// retrieve, update, deactivate, reactivate), meter events (`POST /v1/billing/meter_events`) and
/// their summaries (`GET /v1/billing/meters/:id/event_summaries`), with Stripe's rules:
///
/// - an event's `identifier` is unique for ``FakeStore/meterIdentifierWindow`` (Stripe promises
///   "a rolling period of at least 24 hours"; the fake keeps exactly that, so that a client
///   cannot come to rely on more): a second event with it is refused with 400
///   `An event already exists with identifier …` and `Stripe-Should-Retry: false`, the answer
///   Stripe gives (its v1 error carries no `code`);
/// - `timestamp` must be within the past 35 days and at most 5 minutes ahead, else 400;
/// - what Stripe checks only later (no active meter for the event name, no such customer, a
///   value that is not a whole number) is accepted with 200 and counted nowhere, with the
///   error code Stripe's error report would give (``MeterEventRecord/error``).
///
/// Summaries add up the counted events of one customer by their `timestamp`, at once (Stripe's
/// are eventually consistent, usually within minutes).
public struct MeterEventRecord: Sendable, Equatable {
    public let identifier: String
    public let eventName: String
    public let payload: [String: String]
    public let timestamp: Int64
    public let created: Int64
    /// The meter it counted on; nil when it counted nowhere.
    public let meter: String?
    public let customer: String?
    /// The value it counted with (1 for a `count` meter's event without one).
    public let value: Int64
    /// Why it counted nowhere: `no_meter`, `archived_meter`, `meter_event_customer_not_found`,
    /// `meter_event_no_customer_defined`, `meter_event_value_not_found`, `meter_event_invalid_value`.
    public let error: String?
}

enum BillingMeterObjects {
    static let formulas = ["count", "last", "sum"]

    static func meter(
        id: String, displayName: String, eventName: String, formula: String, customerKey: String, valueKey: String,
        created: Int64
    ) -> JSONValue {
        [
            "id": .string(id), "object": "billing.meter", "created": .int(created),
            "customer_mapping": ["event_payload_key": .string(customerKey), "type": "by_id"],
            "default_aggregation": ["formula": .string(formula)], "display_name": .string(displayName),
            "event_name": .string(eventName), "event_time_window": nil, "livemode": false, "status": "active",
            "status_transitions": ["deactivated_at": nil], "updated": .int(created),
            "value_settings": ["event_payload_key": .string(valueKey)],
        ]
    }

    /// A stable id for the summary of one window, so that `starting_after` finds it again.
    static func summaryID(meter: String, customer: String, start: Int64, end: Int64) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "\(meter)|\(customer)|\(start)|\(end)".utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
        var text = ""
        for _ in 0..<11 {
            text.append(alphabet[Int(hash % 62)])
            hash /= 62
        }
        return "mtrusg_test_\(text)\(start)"
    }
}

extension FakeStore {
    /// How long Stripe keeps a meter event's identifier unique: 24 hours, the documented minimum.
    static let meterIdentifierWindow: Int64 = 86_400
    /// How old a meter event may be.
    static let meterEventPastWindow: Int64 = 35 * 86_400
    /// How far ahead of Stripe's clock a meter event may be.
    static let meterEventFutureWindow: Int64 = 300

    // MARK: Helpers

    @discardableResult
    func createBillingMeter(
        displayName: String, eventName: String, formula: String = "sum", customerKey: String = "stripe_customer_id",
        valueKey: String = "value", in account: AccountState
    ) throws(StripeAPIError) -> StoredObject {
        guard BillingMeterObjects.formulas.contains(formula) else {
            throw .invalidEnum("default_aggregation[formula]", formula, allowed: BillingMeterObjects.formulas)
        }
        if activeMeter(eventName: eventName, in: account) != nil {
            throw .invalidRequest(
                "An active meter with event_name \(eventName) already exists; event names must be unique among active meters.",
                param: "event_name")
        }
        let meter = BillingMeterObjects.meter(
            id: ids.make(.billingMeter), displayName: displayName, eventName: eventName, formula: formula,
            customerKey: customerKey, valueKey: valueKey, created: clock.now)
        return save(meter, as: .billingMeter, in: account)
    }

    func activeMeter(eventName: String, in account: AccountState) -> StoredObject? {
        account[.billingMeter].all { $0.fields.name == eventName && $0.fields.status == "active" }.first
    }

    /// Records one meter event as Stripe does; throws the synchronous refusals.
    @discardableResult
    func recordMeterEvent(
        eventName: String, payload: [String: String], identifier: String?, timestamp: Int64?, in account: AccountState
    ) throws(StripeAPIError) -> MeterEventRecord {
        let now = clock.now
        let identifier = identifier ?? ids.make("mev_", length: 24)
        guard (1...100).contains(identifier.count) else {
            throw .invalidRequest("Invalid identifier: must be at most 100 characters", param: "identifier")
        }
        let timestamp = timestamp ?? now
        guard timestamp >= now - Self.meterEventPastWindow, timestamp <= now + Self.meterEventFutureWindow else {
            throw .invalidRequest(
                "Timestamp \(timestamp) is not within the past 35 calendar days or up to 5 minutes in the future.",
                param: "timestamp", code: timestamp < now ? "timestamp_too_far_in_past" : "timestamp_in_future")
        }
        if let seen = account.meterIdentifiers[identifier], now - seen < Self.meterIdentifierWindow {
            throw .duplicateMeterEvent(identifier)
        }
        var meterID: String?
        var customer: String?
        var value: Int64 = 0
        var failure: String?
        if let meter = activeMeter(eventName: eventName, in: account)?.value {
            meterID = meter["id"]?.stringValue
            let customerKey = meter[path: "customer_mapping.event_payload_key"]?.stringValue ?? "stripe_customer_id"
            let valueKey = meter[path: "value_settings.event_payload_key"]?.stringValue ?? "value"
            let counts = meter[path: "default_aggregation.formula"]?.stringValue == "count"
            customer = payload[customerKey]
            if customer == nil {
                failure = "meter_event_no_customer_defined"
            } else if account[.customer][customer!] == nil {
                failure = "meter_event_customer_not_found"
            } else if let text = payload[valueKey] {
                if let number = Int64(text) { value = number } else { failure = "meter_event_invalid_value" }
            } else if counts {
                value = 1
            } else {
                failure = "meter_event_value_not_found"
            }
        } else {
            let inactive = account[.billingMeter].all { $0.fields.name == eventName }.first
            failure = inactive == nil ? "no_meter" : "archived_meter"
        }
        let record = MeterEventRecord(
            identifier: identifier, eventName: eventName, payload: payload, timestamp: timestamp, created: now,
            meter: failure == nil ? meterID : nil, customer: customer, value: value, error: failure)
        account.meterIdentifiers[identifier] = now
        account.meterEvents.append(record)
        if failure == nil, let meterID, let customer {
            account.countedMeterEvents["\(meterID) \(customer)", default: []].append(account.meterEvents.count - 1)
        }
        return record
    }

    /// The summary of one customer's usage on a meter over `[start, end)`, by its formula.
    func meterSummaryValue(meter: JSONValue, customer: String, start: Int64, end: Int64, in account: AccountState) -> Int64 {
        let id = meter["id"]?.stringValue ?? ""
        let events = (account.countedMeterEvents["\(id) \(customer)"] ?? []).map { account.meterEvents[$0] }
            .filter { start <= $0.timestamp && $0.timestamp < end }
        switch meter[path: "default_aggregation.formula"]?.stringValue {
        case "count": return Int64(events.count)
        case "last": return events.max { ($0.timestamp, $0.created) < ($1.timestamp, $1.created) }?.value ?? 0
        default: return events.reduce(0) { $0 &+ $1.value }
        }
    }

    private static func eventJSON(_ record: MeterEventRecord) -> JSONValue {
        [
            "object": "billing.meter_event", "created": .int(record.created), "event_name": .string(record.eventName),
            "identifier": .string(record.identifier), "livemode": false, "payload": JSONValue(record.payload),
            "timestamp": .int(record.timestamp),
        ]
    }

    // MARK: API

    func createBillingMeterRequest(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly([
            "customer_mapping", "default_aggregation", "display_name", "event_name", "event_time_window", "value_settings",
        ])
        let displayName = try form.requiredString("display_name")
        let eventName = try form.requiredString("event_name")
        guard let aggregation = try form.object("default_aggregation") else {
            throw .missingParameter("default_aggregation")
        }
        try aggregation.allowOnly(["formula"])
        guard let formula = try aggregation.oneOf("formula", BillingMeterObjects.formulas) else {
            throw .missingParameter("default_aggregation[formula]")
        }
        var customerKey = "stripe_customer_id"
        if let mapping = try form.object("customer_mapping") {
            try mapping.allowOnly(["event_payload_key", "type"])
            _ = try mapping.oneOf("type", ["by_id"])
            customerKey = try mapping.requiredString("event_payload_key")
        }
        var valueKey = "value"
        if let settings = try form.object("value_settings") {
            try settings.allowOnly(["event_payload_key"])
            valueKey = try settings.requiredString("event_payload_key")
        }
        _ = try form.oneOf("event_time_window", ["day", "hour"])
        let account = account(request.account)
        let meter = try createBillingMeter(
            displayName: displayName, eventName: eventName, formula: formula, customerKey: customerKey,
            valueKey: valueKey, in: account)
        return APIResponse(bytes: meter.json)
    }

    func listBillingMeters(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["ending_before", "limit", "starting_after", "status"])
        let list = try ListParameters(form)
        let status = try form.oneOf("status", ["active", "inactive"])
        let account = account(request.account)
        let page = try account[.billingMeter].page(
            limit: list.limit, startingAfter: list.startingAfter, endingBefore: list.endingBefore
        ) { status == nil || $0.fields.status == status }
        return try respond(with: page, url: ObjectKind.billingMeter.listURL, to: request, in: account)
    }

    func retrieveBillingMeter(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        return try respond(with: existing(.billingMeter, request.id, in: account), to: request, in: account)
    }

    func updateBillingMeter(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["display_name"])
        let account = account(request.account)
        var meter = try existing(.billingMeter, request.id, in: account).value
        if let name = try form.string("display_name") { meter["display_name"] = .string(name) }
        meter["updated"] = .int(clock.now)
        return APIResponse(bytes: save(meter, as: .billingMeter, in: account).json)
    }

    func deactivateBillingMeter(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try setMeterStatus(request, active: false)
    }

    func reactivateBillingMeter(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        try setMeterStatus(request, active: true)
    }

    private func setMeterStatus(_ request: APIRequest, active: Bool) throws(StripeAPIError) -> APIResponse {
        try request.form().allowOnly([])
        let account = account(request.account)
        var meter = try existing(.billingMeter, request.id, in: account).value
        let eventName = meter["event_name"]?.stringValue ?? ""
        if active, meter["status"]?.stringValue != "active", activeMeter(eventName: eventName, in: account) != nil {
            throw .invalidRequest(
                "An active meter with event_name \(eventName) already exists; deactivate it first.", param: "event_name")
        }
        meter["status"] = active ? "active" : "inactive"
        meter["status_transitions"] = ["deactivated_at": active ? nil : .int(clock.now)]
        meter["updated"] = .int(clock.now)
        return APIResponse(bytes: save(meter, as: .billingMeter, in: account).json)
    }

    func createMeterEvent(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly(["event_name", "identifier", "payload", "timestamp"])
        let eventName = try form.requiredString("event_name")
        guard let payloadForm = try form.object("payload"), !payloadForm.members.isEmpty else {
            throw .missingParameter("payload")
        }
        var payload: [String: String] = [:]
        for key in payloadForm.members.keys {
            guard let value = try payloadForm.string(key) else { continue }
            payload[key] = value
        }
        let identifier = try form.string("identifier").flatMap { $0.isEmpty ? nil : $0 }
        let record = try recordMeterEvent(
            eventName: eventName, payload: payload, identifier: identifier, timestamp: try form.integer("timestamp"),
            in: account(request.account))
        return APIResponse(Self.eventJSON(record))
    }

    func listMeterEventSummaries(_ request: APIRequest) throws(StripeAPIError) -> APIResponse {
        let form = try request.form()
        try form.allowOnly([
            "customer", "end_time", "ending_before", "limit", "start_time", "starting_after", "value_grouping_window",
        ])
        let list = try ListParameters(form)
        let account = account(request.account)
        let meter = try existing(.billingMeter, request.id, in: account).value
        let customer = try form.requiredString("customer")
        guard let start = try form.integer("start_time") else { throw .missingParameter("start_time") }
        guard let end = try form.integer("end_time") else { throw .missingParameter("end_time") }
        for (name, time) in [("start_time", start), ("end_time", end)] where time % 60 != 0 {
            throw .invalidRequest("\(name) must be aligned with minute boundaries.", param: name)
        }
        guard start < end else { throw .invalidRequest("end_time must be after start_time.", param: "end_time") }
        var window = end - start
        if let grouping = try form.oneOf("value_grouping_window", ["day", "hour"]) {
            window = grouping == "day" ? 86_400 : 3_600
            for (name, time) in [("start_time", start), ("end_time", end)] where time % window != 0 {
                throw .invalidRequest(
                    "\(name) must be aligned with \(grouping == "day" ? "UTC day" : "hour") boundaries when value_grouping_window is \(grouping).",
                    param: name)
            }
        }
        let meterID = request.id
        // Newest window first, as Stripe lists them.
        var windows: [(id: String, start: Int64, end: Int64)] = []
        var windowEnd = end
        while windowEnd > start {
            let windowStart = max(start, windowEnd - window)
            windows.append(
                (BillingMeterObjects.summaryID(meter: meterID, customer: customer, start: windowStart, end: windowEnd),
                 windowStart, windowEnd))
            windowEnd = windowStart
        }
        var from = 0
        var to = windows.count
        if let after = list.startingAfter {
            guard let index = windows.firstIndex(where: { $0.id == after }) else {
                throw .invalidRequest("No such billing.meter_event_summary: '\(after)'", param: "starting_after", code: "resource_missing")
            }
            from = index + 1
        } else if let before = list.endingBefore {
            guard let index = windows.firstIndex(where: { $0.id == before }) else {
                throw .invalidRequest("No such billing.meter_event_summary: '\(before)'", param: "ending_before", code: "resource_missing")
            }
            to = index
            from = max(0, to - list.limit)
        }
        let page = windows[from..<min(to, from + list.limit)]
        let data: [JSONValue] = page.map { window in
            [
                "id": .string(window.id), "object": "billing.meter_event_summary",
                "aggregated_value": .int(meterSummaryValue(meter: meter, customer: customer, start: window.start, end: window.end, in: account)),
                "end_time": .int(window.end), "livemode": false, "meter": .string(meterID), "start_time": .int(window.start),
            ]
        }
        return APIResponse([
            "object": "list", "data": .array(data), "has_more": .bool(list.endingBefore != nil ? from > 0 : from + list.limit < to),
            "url": .string("/v1/billing/meters/\(meterID)/event_summaries"),
        ])
    }
}
