import BillingCore
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// Promotional grants, for the app (referrals) and operators (support) alike:
///
/// - `POST /v1/users/{user}/grants` `{"tier", "expires_at" | "duration", "reason"}`: 201 with the
///   grant; with an `Idempotency-Key` used before for the user, 200 with that grant
///   (`Idempotent-Replayed: true`) when the body is the same, else 409 `idempotency_key_reused`.
/// - `GET /v1/users/{user}/grants`: every grant of the user, newest first.
/// - `DELETE /v1/users/{user}/grants/{id}`: revokes it (kept, marked by whom); again: the same answer.
///
/// Served with a token of either `BILLINGD_API_TOKENS` or `BILLINGD_CONSOLE_TOKENS`; the grant
/// records which (``TokenCaller/name``). A grant entitles like a subscription of its tier
/// (`source: "grant"` in the subscription and entitlements views) until its expiry.
public struct GrantController: Sendable {
    let grants: any GrantStore
    let tokens: CallerTokens
    let configuration: UserController.Configuration
    let metrics: BillingMetrics
    let rejections: RejectionLog

    public init(
        store: any LedgerStore, tokens: CallerTokens, configuration: UserController.Configuration, metrics: BillingMetrics,
        rejections: RejectionLog
    ) {
        grants = store.grants
        self.tokens = tokens
        self.configuration = configuration
        self.metrics = metrics
        self.rejections = rejections
    }

    static let fields = ["tier", "expires_at", "duration", "reason"]
    static let replayedHeader = HTTPField.Name("Idempotent-Replayed")!

    public func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        guard !tokens.isEmpty else { return }
        let users = router.group("v1/users")
            .add(middleware: CallerTokenMiddleware<Context>(tokens: tokens, metrics: metrics, rejections: rejections))
        users.post(":user/grants") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.scope)
            let caller = try caller(request)
            let now = Int64(configuration.now().timeIntervalSince1970)
            let body = try await SessionRequestBody.read(request, allowed: Self.fields)
            let key = try request.headers[SessionController.idempotencyKeyHeader].map { key throws(APIError) in
                try CheckoutInput.idempotencyKey(key)
            }
            let grantRequest = try Self.grantRequest(body, catalog: configuration.catalog, caller: caller, idempotencyKey: key, now: now)
            switch try await grants.create(grantRequest, for: user.user, in: user.scope, now: now) {
            case .created(let grant):
                context.logger.info("promotional grant given", metadata: ["grant": "\(grant.id)", "tier": "\(grant.tier)"])
                return GrantView(grant: grant, now: now).response(status: .created)
            case .replayed(let grant):
                var response = GrantView(grant: grant, now: now).response(status: .ok)
                response.headers[Self.replayedHeader] = "true"
                return response
            case .keyReused(let grant):
                throw APIError(
                    .conflict, code: "idempotency_key_reused",
                    message: "This Idempotency-Key was used for this user with a different request (it made \(grant.id)); use a new key for a new grant.",
                    extra: ["grant_id": grant.id])
            }
        }
        users.get(":user/grants") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.scope)
            let list = try await grants.grants(of: user.user, in: user.scope)
            return GrantListView(user: user.user, scope: user.scope, grants: list, now: Int64(configuration.now().timeIntervalSince1970))
                .response()
        }
        users.delete(":user/grants/:grant") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.scope)
            let caller = try caller(request)
            let id = try Self.grantID(context.parameters.get("grant"))
            let now = Int64(configuration.now().timeIntervalSince1970)
            guard let grant = try await grants.revoke(id, of: user.user, in: user.scope, by: caller.name, now: now) else {
                throw APIError(.notFound, code: "grant_not_found", message: "This user has no grant \(id) in \(user.scope).")
            }
            context.logger.info("promotional grant revoked", metadata: ["grant": "\(grant.id)"])
            return GrantView(grant: grant, now: now).response(status: .ok)
        }
    }

    /// The caller the middleware admitted.
    private func caller(_ request: Request) throws -> TokenCaller {
        guard let caller = tokens.caller(request.headers[.authorization]) else {
            throw APIError(.unauthorized, code: "unauthorized", message: "This endpoint needs a token of BILLINGD_API_TOKENS or BILLINGD_CONSOLE_TOKENS.")
        }
        return caller
    }

    /// A grant id of the path: `grant_` and up to 64 letters or digits.
    static func grantID(_ raw: String?) throws -> String {
        guard let raw, raw.hasPrefix("grant_"), (7...70).contains(raw.utf8.count),
            raw.utf8.dropFirst(6).allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x7A).contains($0) || (0x41...0x5A).contains($0) })
        else {
            throw APIError(.notFound, code: "grant_not_found", message: "No grant has this id; grant ids look like grant_0123456789abcdefghjkmnpq.")
        }
        return raw
    }

    /// The checked request of a body, at `now` (Unix seconds).
    static func grantRequest(
        _ body: SessionRequestBody, catalog: PlanCatalog, caller: TokenCaller, idempotencyKey: String?, now: Int64
    ) throws(APIError) -> GrantRequest {
        let tier = try body.requiredString("tier", hint: "give the id of a tier of the plan catalog, e.g. \"pro\"")
        guard catalog.tier(id: tier) != nil else {
            let tiers = catalog.tiers.map(\.id).filter { $0 != catalog.defaultTier.id }
            throw .invalidField("tier", "a tier of the plan catalog (\(tiers.isEmpty ? "it has only the default tier" : tiers.joined(separator: ", "))); \(CheckoutInput.printable(tier)) is none")
        }
        guard tier != catalog.defaultTier.id else {
            throw .invalidField("tier", "a tier above the default tier \(tier), which every user has without a grant")
        }
        let expiresAt: Int64
        let latest = now + PromotionalGrant.longestDuration
        switch (body.has("expires_at"), body.has("duration")) {
        case (true, true):
            throw APIError(.badRequest, code: "conflicting_fields", message: "Give expires_at or duration, not both.")
        case (false, false):
            throw .missingField("expires_at", "give expires_at (Unix seconds) or duration (ISO 8601, e.g. P7D, P1M, PT12H)")
        case (true, false):
            guard let value = try body.integer("expires_at") else { throw .missingField("expires_at") }
            guard value > now else {
                throw .invalidField("expires_at", "a time in the future (Unix seconds); \(value) has passed")
            }
            guard value <= latest else {
                throw .invalidField("expires_at", "a time at most ten years ahead (Unix seconds up to \(latest))")
            }
            expiresAt = value
        case (false, true):
            let text = try body.requiredString("duration")
            guard let duration = GrantDuration(iso8601: text) else {
                throw .invalidField(
                    "duration", "an ISO 8601 duration such as P7D, P2W, P1M, P1Y or PT12H (whole numbers, no sign); \(CheckoutInput.printable(text)) is not one")
            }
            let end = duration.end(from: now)
            guard end > now, end <= latest else { throw .invalidField("duration", "a duration of at most ten years") }
            expiresAt = end
        }
        let reason = try body.requiredString("reason", hint: "say why the grant is given, e.g. \"support ticket 4411\"")
        guard !reason.allSatisfy(\.isWhitespace) else {
            throw .invalidField("reason", "a reason that is not empty, e.g. \"support ticket 4411\"")
        }
        guard reason.count <= PromotionalGrant.longestReason else {
            throw .invalidField("reason", "at most \(PromotionalGrant.longestReason) characters; this one has \(reason.count)")
        }
        guard !reason.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw .invalidField("reason", "text without control characters (line breaks, tabs)")
        }
        // What makes two requests with one key the same request: the body's fields as sent.
        let fingerprint = [
            "tier=\(tier)", "expires_at=\((try? body.integer("expires_at")).flatMap { $0 }.map(String.init) ?? "")",
            "duration=\((try? body.string("duration")).flatMap { $0 } ?? "")", "reason=\(reason)",
        ].joined(separator: "\n")
        return GrantRequest(
            tier: tier, expiresAt: expiresAt, reason: reason, createdBy: caller.name, idempotencyKey: idempotencyKey, fingerprint: fingerprint)
    }
}

/// One grant as JSON: `{"id", "object": "grant", "tier", "starts_at", "expires_at", "active",
/// "reason", "created_by", "revoked_at", "revoked_by"}`.
struct GrantView {
    let grant: PromotionalGrant
    let now: Int64

    func write(into json: inout JSONBytesWriter) {
        json.beginObject()
        json.field("id", grant.id)
        json.field("object", "grant")
        json.field("tier", grant.tier)
        json.field("starts_at", grant.startsAt)
        json.field("expires_at", grant.expiresAt)
        json.field("active", grant.isActive(now: now))
        json.field("reason", grant.reason)
        json.field("created_by", grant.createdBy)
        json.field("revoked_at", grant.revokedAt)
        json.field("revoked_by", grant.revokedBy)
        json.endObject()
    }

    func response(status: HTTPResponse.Status) -> Response {
        var json = JSONBytesWriter()
        write(into: &json)
        return UserJSONResponse.response(json.bytes, status: status)
    }
}

/// `GET /v1/users/{user}/grants`: `{"object": "list", "user", "livemode", "account", "data": [grant…]}`.
struct GrantListView {
    let user: String
    let scope: ServiceScope
    let grants: [PromotionalGrant]
    let now: Int64

    func response() -> Response {
        var json = JSONBytesWriter(capacity: 256 + grants.count * 320)
        json.beginObject()
        json.field("object", "list")
        UserJSONResponse.scope(scope, user: user, into: &json)
        json.key("data")
        json.beginArray()
        for grant in grants { GrantView(grant: grant, now: now).write(into: &json) }
        json.endArray()
        json.endObject()
        return UserJSONResponse.response(json.bytes)
    }
}
