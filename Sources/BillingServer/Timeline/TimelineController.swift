import BillingCore
import BillingStore
import Foundation
import Hummingbird

/// A user's history across both stores, for support and for the app:
///
/// - `GET /v1/users/{user}/timeline?limit=&cursor=`: newest first, `limit` items (default 50, at
///   most 500), `next_cursor` for the page after; a user the ledger does not know has an empty one.
///
/// Served with a token of either `BILLINGD_API_TOKENS` or `BILLINGD_CONSOLE_TOKENS`, as grants are.
public struct TimelineController: Sendable {
    let timeline: any TimelineStore
    let tokens: CallerTokens
    let configuration: UserController.Configuration
    let metrics: BillingMetrics
    let rejections: RejectionLog

    public init(
        store: any LedgerStore, tokens: CallerTokens, configuration: UserController.Configuration, metrics: BillingMetrics,
        rejections: RejectionLog
    ) {
        timeline = store.timeline
        self.tokens = tokens
        self.configuration = configuration
        self.metrics = metrics
        self.rejections = rejections
    }

    public func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        guard !tokens.isEmpty else { return }
        let users = router.group("v1/users")
            .add(middleware: CallerTokenMiddleware<Context>(tokens: tokens, metrics: metrics, rejections: rejections))
        users.get(":user/timeline") { request, context in
            let user = try UserRequest(request, context: context, scope: configuration.scope, allowed: ["limit", "cursor"])
            let parameters = request.uri.queryParameters
            let limit = try Self.limit(UserRequest.single(parameters, "limit"))
            let cursor = try Self.cursor(UserRequest.single(parameters, "cursor"))
            let now = Int64(configuration.now().timeIntervalSince1970)
            let page = try await timeline.timeline(of: user.user, in: user.scope, limit: limit, after: cursor, now: now)
            return UserJSONResponse.response(TimelineView(user: user.user, scope: user.scope, page: page).json())
        }
    }

    /// `limit`: 1 to 500, 50 when absent.
    static func limit(_ raw: String?) throws(APIError) -> Int {
        guard let raw else { return TimelinePage.defaultLimit }
        guard raw.utf8.count <= 6, let limit = Int(raw), (1...TimelinePage.maximumLimit).contains(limit) else {
            throw APIError(
                .badRequest, code: "invalid_parameter",
                message: "limit=\(UserRequest.printable(raw)) is not a number from 1 to \(TimelinePage.maximumLimit); leave it out for \(TimelinePage.defaultLimit).")
        }
        return limit
    }

    /// `cursor`: a page's `next_cursor`, as it was handed out.
    static func cursor(_ raw: String?) throws(APIError) -> TimelineCursor? {
        guard let raw else { return nil }
        guard let cursor = TimelineCursor(encoded: raw) else {
            throw APIError(
                .badRequest, code: "invalid_cursor",
                message: "cursor is not one this endpoint handed out; pass a page's next_cursor unchanged, or leave it out for the newest items.")
        }
        return cursor
    }
}

/// A timeline page as JSON: `{"object": "list", "user", "livemode", "account", "data": [item…],
/// "has_more", "next_cursor"}`, each item `{"at", "kind", "source", "summary", "ref",
/// "entitlement"}` (`entitlement` `{"tier", "source", "valid_until"}` on `entitlement.changed`,
/// else null). The service API and `billingd timeline --json` write the same.
public struct TimelineView: Sendable {
    public let user: String
    public let scope: ServiceScope
    public let page: TimelinePage

    public init(user: String, scope: ServiceScope, page: TimelinePage) {
        self.user = user
        self.scope = scope
        self.page = page
    }

    public func json() -> [UInt8] {
        var json = JSONBytesWriter(capacity: 256 + page.items.count * 256)
        json.beginObject()
        json.field("object", "list")
        UserJSONResponse.scope(scope, user: user, into: &json)
        json.key("data")
        json.beginArray()
        for item in page.items {
            json.beginObject()
            json.field("at", item.at)
            json.field("kind", item.kind.rawValue)
            json.field("source", item.source)
            json.field("summary", item.summary)
            json.field("ref", item.ref)
            json.key("entitlement")
            if let entitlement = item.entitlement {
                json.beginObject()
                json.field("tier", entitlement.tier)
                json.field("source", entitlement.source)
                json.field("valid_until", entitlement.validUntil)
                json.endObject()
            } else {
                json.null()
            }
            json.endObject()
        }
        json.endArray()
        json.field("has_more", page.nextCursor != nil)
        json.field("next_cursor", page.nextCursor?.encoded)
        json.endObject()
        return json.bytes
    }
}
