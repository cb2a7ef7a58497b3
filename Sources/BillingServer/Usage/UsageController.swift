import BillingCore
import BillingStore
import Foundation
import Hummingbird

/// Usage metering and quotas in the service API (the meters of the plan catalog):
///
/// - `POST /v1/users/{user}/usage/{meter}/events` `{"quantity", "idempotency_key", "timestamp"?}`:
///   usage that happened, never refused for the limit;
/// - `POST /v1/users/{user}/usage/{meter}/consume` `{"quantity", "idempotency_key"}`: checked
///   and recorded at once; 402 `limit_exceeded` past a hard limit;
/// - `PUT /v1/users/{user}/usage/{meter}` `{"value"}`: a gauge's level;
/// - `GET /v1/users/{user}/usage`: every meter's state;
/// - `POST /v1/usage/events` `{"events": [{"user", "meter", …}]}`: up to 1,000 records.
///
/// Every write is durable before the answer (a group commit, as for webhooks).
public struct UsageController: Sendable {
    static let maximumBodySize = 1 << 20
    package static let maximumBatch = 1000
    /// How old a usage record may be: Stripe's own window for meter events, so that every record
    /// can still be reported.
    static let lateWindow = MeterEventPolicy.pastWindow
    /// How far ahead of billingd's clock a record may be (clock skew), as Stripe allows.
    static let futureWindow = MeterEventPolicy.futureWindow
    static let maximumQuantity: Int64 = 1_000_000_000_000
    static let maximumKeyBytes = 255

    let users: any UserLedgerStore
    let usage: any UsageStore
    let committer: BatchCommitter<[UsageOperation], Result<[UsageOutcome], UsageRefusal>>
    let configuration: UserController.Configuration

    public init(store: any LedgerStore, configuration: UserController.Configuration) {
        users = store.users
        usage = store.usage
        committer = usage.committer()
        self.configuration = configuration
    }

    var catalog: PlanCatalog { configuration.catalog }
    var now: Int64 { Int64(configuration.now().timeIntervalSince1970) }

    public func addRoutes<Methods: RouterMethods>(to router: Methods) {
        router.post("users/:user/usage/:meter/events") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.scope)
            let meter = try counter(context.parameters.get("meter"), field: "the meter in the path", for: "events")
            let body = try await JSONObjectBody(request, limit: Self.maximumBodySize, allowed: ["quantity", "idempotency_key", "timestamp"])
            let now = now
            let input = try recordInput(body, user: user.user, scope: user.scope, meter: meter, resolution: try await resolve(user.user, user.scope, now), now: now)
            let outcome = try await submit(.record(input))
            return UsageJSON.response(outcome, user: user.user, scope: user.scope)
        }
        router.post("users/:user/usage/:meter/consume") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.scope)
            let meter = try counter(context.parameters.get("meter"), field: "the meter in the path", for: "consume")
            let body = try await JSONObjectBody(request, limit: Self.maximumBodySize, allowed: ["quantity", "idempotency_key"])
            let now = now
            let resolution = try await resolve(user.user, user.scope, now)
            let input = try recordInput(body, user: user.user, scope: user.scope, meter: meter, resolution: resolution, now: now)
            let outcome = try await submit(.consume(input))
            if case .refused(let state) = outcome {
                return UsageJSON.limitExceeded(state, requested: input.quantity, upgrade: upgrade(for: state, adding: input.quantity, resolution: resolution))
            }
            return UsageJSON.response(outcome, user: user.user, scope: user.scope)
        }
        router.put("users/:user/usage/:meter") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.scope)
            let meter = try self.meter(context.parameters.get("meter"), field: "the meter in the path")
            guard meter.kind == .gauge else {
                throw APIError(
                    .badRequest, code: "meter_is_counter",
                    message: "\(meter.id) is a counter: it adds up usage records (POST …/usage/\(meter.id)/events or /consume); PUT sets gauges only.")
            }
            let body = try await JSONObjectBody(request, limit: Self.maximumBodySize, allowed: ["value"])
            let value = try body.integer("value", in: 0...Int64.max, required: true, "the gauge's level, a whole number 0 or more")!
            let resolution = try await resolve(user.user, user.scope, now)
            let outcome = try await submit(
                .setGauge(scope: user.scope, user: user.user, meter: meter, value: value, limit: resolution.limit(of: meter)))
            return UsageJSON.response(outcome, user: user.user, scope: user.scope)
        }
        router.get("users/:user/usage") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.scope)
            let now = now
            let states = try await states(of: user.user, in: user.scope, resolution: try await resolve(user.user, user.scope, now), now: now)
            var json = JSONBytesWriter()
            json.beginObject()
            UserJSONResponse.scope(user.scope, user: user.user, into: &json)
            UsageJSON.meters(states, into: &json)
            json.endObject()
            return UserJSONResponse.response(json.bytes)
        }
        router.post("usage/events") { request, context in
            try UserRequest.refuseParameters(request, allowed: [])
            let scope = configuration.scope.account(try UserRequest.account(request))
            let body = try await JSONObjectBody(request, limit: Self.maximumBodySize * 4, allowed: ["events"])
            let items = try body.objects("events", maximum: Self.maximumBatch, allowed: ["user", "meter", "quantity", "idempotency_key", "timestamp"])
            let now = now
            var resolutions: [String: PlanResolution] = [:]
            var inputs: [UsageRecordInput] = []
            for item in items {
                let user = try item.string("user", maximumBytes: UserRequest.maximumUserBytes, "the app user id, 1 to 255 bytes")
                let meter = try counter(
                    try item.string("meter", maximumBytes: 100, "a meter id of the plan catalog"), field: item.place + "meter", for: "events")
                if resolutions[user] == nil { resolutions[user] = try await resolve(user, scope, now) }
                inputs.append(try recordInput(item, user: user, scope: scope, meter: meter, resolution: resolutions[user]!, now: now))
            }
            // One batch: every record is written, or (one refused) none.
            let outcomes = try await submit(inputs.map(UsageOperation.record), place: "events")
            var json = JSONBytesWriter()
            json.beginObject()
            json.field("livemode", scope.livemode)
            json.field("account", scope.account.isEmpty ? nil : scope.account)
            json.field("recorded", Int64(outcomes.count { if case .recorded(_, false) = $0 { true } else { false } }))
            json.key("results")
            json.beginArray()
            for (input, outcome) in zip(inputs, outcomes) {
                json.beginObject()
                json.field("user", input.user)
                UsageJSON.state(outcome.state, into: &json)
                if case .recorded(_, let duplicate) = outcome { json.field("duplicate", duplicate) }
                json.endObject()
            }
            json.endArray()
            json.endObject()
            return UserJSONResponse.response(json.bytes)
        }
    }

    // MARK: - Pieces

    /// Writes one request's operations durably, all or none; a refusal is a JSON 400 naming the
    /// record (`events[3].quantity` in a batch, under `place`).
    func submit(_ operations: [UsageOperation], place: String? = nil) async throws -> [UsageOutcome] {
        do {
            return try await committer.submit(operations).get()
        } catch let refusal as UsageRefusal {
            throw Self.error(refusal, place: place.map { "\($0)[\(refusal.index)]." } ?? "")
        }
    }

    func submit(_ operation: UsageOperation) async throws -> UsageOutcome {
        try await submit([operation])[0]
    }

    /// The 400 for a refused record.
    static func error(_ refusal: UsageRefusal, place: String) -> APIError {
        switch refusal.reason {
        case .totalCeiling(let used):
            APIError(
                .badRequest, code: "usage_total_too_large",
                message: "\(place)quantity \(refusal.quantity) would take \(refusal.meter)'s total past \(UsageMeter.maximumTotal), the most a meter counts in one period (now \(used)); nothing was recorded.",
                extra: ["field": place + "quantity"])
        case .idempotencyKeyReused(let recorded):
            APIError(
                .badRequest, code: "idempotency_key_reused",
                message: "\(place)idempotency_key \(UserRequest.printable(refusal.idempotencyKey)) was recorded for \(refusal.meter) with quantity \(recorded), not \(refusal.quantity); a retry sends the same quantity, other usage a new key. Nothing was recorded.",
                extra: ["field": place + "idempotency_key"])
        }
    }

    /// The user's access now, which decides each meter's period and limit.
    func resolve(_ user: String, _ scope: ServiceScope, _ now: Int64) async throws -> PlanResolution {
        try await users.billing(of: user, in: scope, stripeEntitlements: false).resolve(catalog, now: now)
    }

    /// Every meter's state for a user.
    func states(of user: String, in scope: ServiceScope, resolution: PlanResolution, now: Int64) async throws -> [UsageMeterState] {
        try await Self.states(usage, catalog: catalog, of: user, in: scope, resolution: resolution, now: now)
    }

    /// Every meter of `catalog` for a user (`GET …/usage`, embedded in `…/entitlements`, and
    /// `billingd usage show`).
    public static func states(
        _ usage: any UsageStore, catalog: PlanCatalog, of user: String, in scope: ServiceScope, resolution: PlanResolution, now: Int64
    ) async throws -> [UsageMeterState] {
        guard !catalog.meters.isEmpty else { return [] }
        let period = resolution.usagePeriod(now: now)
        return try await usage.states(
            scope: scope, user: user,
            meters: catalog.meters.map { ($0, $0.kind == .counter ? period : nil, resolution.limit(of: $0)) })
    }

    func meter(_ id: String?, field: String) throws -> UsageMeter {
        guard let id, let meter = catalog.meter(id: id) else {
            let known = catalog.meters.map(\.id)
            throw APIError(
                .badRequest, code: "unknown_meter",
                message: "\(field) (\(UserRequest.printable(id ?? ""))) is not a meter of the plan catalog; \(known.isEmpty ? "BILLINGD_PLANS defines no meters" : "known: \(known.joined(separator: ", "))").",
                extra: ["field": field])
        }
        return meter
    }

    func counter(_ id: String?, field: String, for action: String) throws -> UsageMeter {
        let meter = try meter(id, field: field)
        guard meter.kind == .counter else {
            throw APIError(
                .badRequest, code: "meter_is_gauge",
                message: "\(meter.id) is a gauge: set its level with PUT /v1/users/{user}/usage/\(meter.id) {\"value\": …}; \(action) add up counters only.",
                extra: ["field": field])
        }
        return meter
    }

    /// A usage record from a request's members; consumes take no timestamp (they happen now).
    func recordInput(
        _ body: JSONObjectBody, user: String, scope: ServiceScope, meter: UsageMeter, resolution: PlanResolution, now: Int64
    ) throws -> UsageRecordInput {
        let (quantity, key, timestamp) = try Self.recordFields(body, now: now)
        return UsageRecordInput(
            scope: scope, user: user, meter: meter, quantity: quantity, timestamp: timestamp, idempotencyKey: key,
            period: resolution.usagePeriod(now: now), limit: resolution.limit(of: meter))
    }

    /// A usage record's own members, checked: pure, so that the usage fuzz target reaches it
    /// without a server or a ledger.
    package static func recordFields(_ body: JSONObjectBody, now: Int64) throws -> (quantity: Int64, idempotencyKey: String, timestamp: Int64) {
        let quantity = try body.integer("quantity", in: 1...Self.maximumQuantity, required: true, "a whole number from 1 to \(Self.maximumQuantity)")!
        let key = try body.string(
            "idempotency_key", maximumBytes: Self.maximumKeyBytes,
            "a string of 1 to \(Self.maximumKeyBytes) bytes naming this usage, the same on a retry (e.g. the id of the radar created)")
        let earliest = now - Self.lateWindow
        let latest = now + Self.futureWindow
        let timestamp = try body.integer("timestamp", in: Int64.min...Int64.max, required: false, "Unix seconds") ?? now
        guard (earliest...latest).contains(timestamp) else {
            throw APIError(
                .badRequest, code: "timestamp_out_of_range",
                message: "\(body.place)timestamp \(timestamp) is \(timestamp < earliest ? "more than 35 days ago" : "more than 5 minutes ahead of billingd's clock"); usage is accepted from \(earliest) to \(latest) (Unix seconds), as Stripe accepts meter events.",
                extra: ["field": body.place + "timestamp"])
        }
        return (quantity, key, timestamp)
    }

    /// The cheapest tier that would allow a refused consume, at the user's seat count.
    func upgrade(for state: UsageMeterState, adding quantity: Int64, resolution: PlanResolution) -> PlanTier? {
        let (total, overflow) = state.used.addingReportingOverflow(quantity)
        guard !overflow else { return nil }
        return catalog.cheapestTier(allowing: total, of: state.meter, above: resolution.tier.rank, quantity: resolution.quantity ?? 1)
    }
}

/// The JSON of meter states.
enum UsageJSON {
    static func state(_ state: UsageMeterState, into json: inout JSONBytesWriter) {
        json.field("meter", state.meter.id)
        json.field("kind", state.meter.kind.rawValue)
        json.field("used", state.used)
        json.field("limit", state.limitCount)
        json.field("unlimited", state.isUnlimited)
        json.field("remaining", state.remaining)
        json.field("overage", state.overage)
        json.field("enforcement", state.meter.enforcement.rawValue)
        json.field("period_start", state.period?.start)
        json.field("period_end", state.period?.end)
    }

    /// `"meters": [...]`.
    static func meters(_ states: [UsageMeterState], into json: inout JSONBytesWriter) {
        json.key("meters")
        json.beginArray()
        for meter in states {
            json.beginObject()
            state(meter, into: &json)
            json.endObject()
        }
        json.endArray()
    }

    /// A write's answer: the meter's state and whether the key was seen before.
    static func response(_ outcome: UsageOutcome, user: String, scope: ServiceScope) -> Response {
        var json = JSONBytesWriter()
        json.beginObject()
        UserJSONResponse.scope(scope, user: user, into: &json)
        state(outcome.state, into: &json)
        if case .recorded(_, let duplicate) = outcome { json.field("duplicate", duplicate) }
        json.endObject()
        return UserJSONResponse.response(json.bytes)
    }

    /// 402: the consume does not fit under a hard limit. Says what is used, the limit, when the
    /// period resets, and the cheapest tier that would allow it.
    static func limitExceeded(_ state: UsageMeterState, requested: Int64, upgrade: PlanTier?) -> Response {
        var json = JSONBytesWriter()
        json.beginObject()
        json.key("error")
        json.beginObject()
        json.field("code", "limit_exceeded")
        let resets = state.period.map { " It resets at \(UTCTimestamp.string($0.end))." } ?? ""
        let offer = upgrade.map { " The \($0.name) plan allows it." } ?? ""
        json.field(
            "message",
            "\(state.meter.id): \(state.used) of \(state.limitCount ?? 0) used; \(requested) more does not fit.\(resets)\(offer)")
        json.field("meter", state.meter.id)
        json.field("used", state.used)
        json.field("limit", state.limitCount)
        json.field("requested", requested)
        json.field("remaining", state.remaining)
        json.field("resets_at", state.period?.end)
        json.key("upgrade_to")
        if let upgrade {
            json.beginObject()
            json.field("plan", upgrade.id)
            json.field("plan_name", upgrade.name)
            json.endObject()
        } else {
            json.null()
        }
        json.endObject()
        json.endObject()
        return UserJSONResponse.response(json.bytes, status: HTTPResponse.Status(code: 402, reasonPhrase: "Payment Required"))
    }
}
