import Foundation
import StripeFake
import Testing

/// Billing Meters, meter events and event summaries, with Stripe's identifier and time rules.
@Suite("StripeFake: billing meters, meter events and summaries")
struct FakeBillingMeterTests {
    /// A fixed clock on a whole day, so that windows are easy to name.
    static let now: Int64 = 1_770_000_000 - 1_770_000_000 % 86_400 + 43_200

    private func start(_ body: (StripeFake, FakeClient) async throws -> Void) async throws {
        try await withFake(.init(clock: FakeClock(fixedAt: Self.now)), body)
    }

    @Test("A meter is created, listed, retrieved, renamed, deactivated and reactivated; event names are unique among active meters")
    func meters() async throws {
        try await start { fake, client in
            let created = try await client.post(
                "/v1/billing/meters",
                [("display_name", "Radars"), ("event_name", "radars_created"), ("default_aggregation[formula]", "sum")])
            #expect(created.status == 200)
            let id = try #require(created.json["id"]?.stringValue)
            #expect(id.hasPrefix("mtr_test_"))
            #expect(created.json["object"] == "billing.meter")
            #expect(created.json[path: "customer_mapping.event_payload_key"] == "stripe_customer_id")
            #expect(created.json[path: "value_settings.event_payload_key"] == "value")
            #expect(created.json["status"] == "active")

            let twice = try await client.post(
                "/v1/billing/meters",
                [("display_name", "Again"), ("event_name", "radars_created"), ("default_aggregation[formula]", "sum")])
            #expect(twice.status == 400)
            #expect(twice.error?["param"] == "event_name")
            let badFormula = try await client.post(
                "/v1/billing/meters", [("display_name", "X"), ("event_name", "x"), ("default_aggregation[formula]", "avg")])
            #expect(badFormula.status == 400)

            #expect(try await client.get("/v1/billing/meters").dataIDs == [id])
            #expect(try await client.get("/v1/billing/meters/\(id)").json["event_name"] == "radars_created")
            #expect(try await client.get("/v1/billing/meters/mtr_test_nope").status == 404)
            #expect(try await client.post("/v1/billing/meters/\(id)", [("display_name", "Radars made")]).json["display_name"] == "Radars made")

            let off = try await client.post("/v1/billing/meters/\(id)/deactivate")
            #expect(off.json["status"] == "inactive")
            #expect(off.json[path: "status_transitions.deactivated_at"] == .int(Self.now))
            #expect(try await client.get("/v1/billing/meters", [("status", "active")]).dataIDs.isEmpty)
            #expect(try await client.get("/v1/billing/meters", [("status", "inactive")]).dataIDs == [id])
            #expect(try await client.post("/v1/billing/meters/\(id)/reactivate").json["status"] == "active")
        }
    }

    @Test("A meter event is accepted once per identifier for 24 hours: the second is 400 with Stripe-Should-Retry: false")
    func identifierIsUniqueForADay() async throws {
        try await start { fake, client in
            let meter = try await fake.createBillingMeter(eventName: "radars_created")
            let customer = await fake.createCustomer(email: "a@example.com")
            let form = [
                ("event_name", "radars_created"), ("payload[stripe_customer_id]", customer), ("payload[value]", "3"),
                ("identifier", "billingd-ns-1"), ("timestamp", String(Self.now - 60)),
            ]
            let first = try await client.post("/v1/billing/meter_events", form)
            #expect(first.status == 200)
            #expect(first.json["object"] == "billing.meter_event")
            #expect(first.json["identifier"] == "billingd-ns-1")
            #expect(first.json["timestamp"] == .int(Self.now - 60))
            #expect(first.json[path: "payload.value"] == "3")

            // Even under a new Idempotency-Key, as a retry after a crash would come.
            let again = try await client.post("/v1/billing/meter_events", form, headers: [("Idempotency-Key", "other")])
            #expect(again.status == 400)
            #expect(again.error?["type"] == "invalid_request_error")
            #expect(again.error?["code"] == nil)
            #expect(again.error?["message"] == "An event already exists with identifier billingd-ns-1.")
            #expect(again.header("Stripe-Should-Retry") == "false")
            #expect(await fake.meterEvents().count == 1)

            fake.clock.advance(by: 86_400)
            let later = try await client.post(
                "/v1/billing/meter_events",
                [("event_name", "radars_created"), ("payload[stripe_customer_id]", customer), ("payload[value]", "3"), ("identifier", "billingd-ns-1")])
            #expect(later.status == 200, "Stripe promises uniqueness for 24 hours, no longer")
            let events = await fake.meterEvents()
            #expect(events.map(\.meter) == [meter, meter])
        }
    }

    @Test("Timestamps more than 35 days old or 5 minutes ahead are refused; a missing payload or event name too")
    func refusals() async throws {
        try await start { fake, client in
            _ = try await fake.createBillingMeter(eventName: "radars_created")
            let customer = await fake.createCustomer()
            func post(timestamp: Int64) async throws -> FakeAnswer {
                try await client.post(
                    "/v1/billing/meter_events",
                    [("event_name", "radars_created"), ("payload[stripe_customer_id]", customer), ("payload[value]", "1"), ("timestamp", String(timestamp))])
            }
            let old = try await post(timestamp: Self.now - 35 * 86_400 - 1)
            #expect(old.status == 400)
            #expect(old.error?["param"] == "timestamp")
            #expect(old.error?["code"] == "timestamp_too_far_in_past")
            #expect(try await post(timestamp: Self.now - 35 * 86_400).status == 200)
            #expect(try await post(timestamp: Self.now + 300).status == 200)
            let ahead = try await post(timestamp: Self.now + 301)
            #expect(ahead.status == 400)
            #expect(ahead.error?["code"] == "timestamp_in_future")
            #expect(try await client.post("/v1/billing/meter_events", [("event_name", "radars_created")]).error?["param"] == "payload")
            #expect(try await client.post("/v1/billing/meter_events", [("payload[value]", "1")]).error?["param"] == "event_name")
            let long = String(repeating: "x", count: 101)
            #expect(
                try await client.post(
                    "/v1/billing/meter_events",
                    [("event_name", "radars_created"), ("payload[stripe_customer_id]", customer), ("payload[value]", "1"), ("identifier", long)]
                ).error?["param"] == "identifier")
        }
    }

    @Test("What Stripe checks later is accepted and counted nowhere, with the error report's code")
    func asynchronousErrors() async throws {
        try await start { fake, client in
            let meter = try await fake.createBillingMeter(eventName: "radars_created")
            let customer = await fake.createCustomer()
            let cases: [([(String, String)], String)] = [
                ([("event_name", "nothing_here"), ("payload[stripe_customer_id]", customer), ("payload[value]", "1")], "no_meter"),
                ([("event_name", "radars_created"), ("payload[stripe_customer_id]", "cus_missing"), ("payload[value]", "1")], "meter_event_customer_not_found"),
                ([("event_name", "radars_created"), ("payload[value]", "1")], "meter_event_no_customer_defined"),
                ([("event_name", "radars_created"), ("payload[stripe_customer_id]", customer), ("payload[value]", "1.5")], "meter_event_invalid_value"),
                ([("event_name", "radars_created"), ("payload[stripe_customer_id]", customer)], "meter_event_value_not_found"),
            ]
            for (form, code) in cases {
                #expect(try await client.post("/v1/billing/meter_events", form).status == 200)
                #expect(await fake.meterEvents().last?.error == code)
                #expect(await fake.meterEvents().last?.meter == nil)
            }
            _ = try await client.post("/v1/billing/meters/\(meter)/deactivate")
            _ = try await client.post("/v1/billing/meter_events", [("event_name", "radars_created"), ("payload[stripe_customer_id]", customer), ("payload[value]", "1")])
            #expect(await fake.meterEvents().last?.error == "archived_meter")
            let summary = try await client.get(
                "/v1/billing/meters/\(meter)/event_summaries",
                [("customer", customer), ("start_time", String(Self.now - 3_600)), ("end_time", String(Self.now + 3_600))])
            #expect(summary.json[path: "data"]?[0]?["aggregated_value"] == .int(0))
        }
    }

    @Test("Summaries add up a customer's events by timestamp over [start, end), by the meter's formula, in windows newest first")
    func summaries() async throws {
        try await start { fake, client in
            let sum = try await fake.createBillingMeter(eventName: "radars_created")
            let count = try await fake.createBillingMeter(eventName: "logins", formula: "count")
            let last = try await fake.createBillingMeter(eventName: "seats", formula: "last")
            let customer = await fake.createCustomer()
            let other = await fake.createCustomer()
            let hour = Self.now - Self.now % 3_600
            for (offset, value) in [(-7_200 + 10, 2), (-3_600, 5), (-1, 7), (0, 100)] as [(Int64, Int64)] {
                for event in ["radars_created", "logins", "seats"] {
                    try await fake.recordMeterEvent(eventName: event, customer: customer, value: value, timestamp: hour + offset)
                }
            }
            try await fake.recordMeterEvent(eventName: "radars_created", customer: other, value: 1_000, timestamp: hour - 60)

            func summaries(_ meter: String, _ extra: [(String, String)] = []) async throws -> FakeAnswer {
                try await client.get(
                    "/v1/billing/meters/\(meter)/event_summaries",
                    [("customer", customer), ("start_time", String(hour - 7_200)), ("end_time", String(hour))] + extra)
            }
            let whole = try await summaries(sum)
            #expect(whole.status == 200)
            let summary = try #require(whole.json["data"]?[0])
            #expect(summary["object"] == "billing.meter_event_summary")
            #expect(summary["aggregated_value"] == .int(14), "the event at `end` belongs to the next window")
            #expect(summary["start_time"] == .int(hour - 7_200))
            #expect(summary["end_time"] == .int(hour))
            #expect(summary["meter"] == .string(sum))
            #expect(try await summaries(count).json[path: "data"]?[0]?["aggregated_value"] == .int(3))
            #expect(try await summaries(last).json[path: "data"]?[0]?["aggregated_value"] == .int(7))

            let hourly = try await summaries(sum, [("value_grouping_window", "hour")])
            let values = (hourly.json["data"]?.arrayValue ?? []).map { ($0["start_time"]?.intValue ?? 0, $0["aggregated_value"]?.intValue ?? 0) }
            #expect(values.map(\.0) == [hour - 3_600, hour - 7_200])
            #expect(values.map(\.1) == [12, 2])

            let first = try await summaries(sum, [("value_grouping_window", "hour"), ("limit", "1")])
            #expect(first.json["has_more"] == true)
            let next = try await summaries(sum, [("value_grouping_window", "hour"), ("limit", "1"), ("starting_after", first.dataIDs[0])])
            #expect(next.json["has_more"] == false)
            #expect(next.json[path: "data"]?[0]?["aggregated_value"] == .int(2))

            let unaligned = try await client.get(
                "/v1/billing/meters/\(sum)/event_summaries", [("customer", customer), ("start_time", String(hour - 30)), ("end_time", String(hour))])
            #expect(unaligned.status == 400)
            #expect(unaligned.error?["param"] == "start_time")
            let hourOff = try await summaries(sum, [("value_grouping_window", "day")])
            #expect(hourOff.status == 400, "day windows need UTC day boundaries")
            #expect(try await client.get("/v1/billing/meters/\(sum)/event_summaries", [("customer", customer)]).error?["param"] == "start_time")
        }
    }

    @Test("Meters, events and identifiers belong to one account")
    func accounts() async throws {
        try await start { fake, client in
            _ = try await fake.createBillingMeter(eventName: "radars_created", account: "acct_1Conn")
            let customer = await fake.createCustomer(account: "acct_1Conn")
            var connected = client
            connected.account = "acct_1Conn"
            let form = [("event_name", "radars_created"), ("payload[stripe_customer_id]", customer), ("payload[value]", "1"), ("identifier", "same")]
            #expect(try await connected.post("/v1/billing/meter_events", form).status == 200)
            #expect(try await client.post("/v1/billing/meter_events", form).status == 200, "the platform never saw the identifier")
            #expect(await fake.meterEvents(account: "acct_1Conn").first?.error == nil)
            #expect(await fake.meterEvents().first?.error == "no_meter")
            #expect(try await client.get("/v1/billing/meters").dataIDs.isEmpty)
        }
    }
}
