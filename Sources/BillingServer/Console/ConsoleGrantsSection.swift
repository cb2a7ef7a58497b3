import BillingCore
import BillingStore
import Foundation
import Hummingbird
import Logging

/// What the "Grant access" form held when the console refused it, shown again with the refusal
/// so that nothing typed is lost.
struct ConsoleGrantForm: Sendable, Equatable {
    var tier = ""
    var length = ConsoleGrants.defaultLength
    var expiresOn = ""
    var reason = ""
    /// Why the console refused it; nil for a fresh form.
    var problem: String?
}

/// The customer page's promotional grants: `POST /console/customers/grants` gives one and
/// `POST /console/customers/grants/revoke` revokes one, with the checks and the store of
/// `POST` / `DELETE /v1/users/{user}/grants`, recorded as given or revoked by `console:LABEL`.
/// Both answer 303 to the customer page with a notice; a refused grant shows the page again
/// (400) with the reason beside the form.
struct ConsoleGrants {
    let console: ConsoleController

    /// The lengths the form offers (ISO 8601 durations, as the API takes them), and a date.
    static let lengths: [(value: String, label: String)] = [
        ("P1D", "1 day"), ("P7D", "7 days"), ("P14D", "14 days"), ("P1M", "1 month"), ("P3M", "3 months"), ("P1Y", "1 year"),
        (untilDate, "until the date below"),
    ]
    static let defaultLength = "P7D"
    static let untilDate = "date"

    static let notices = [
        "granted": "Access granted; the entitlement above includes it.",
        "granted-again": "That form was sent twice; the grant was given once.",
        "revoked": "Grant revoked; the entitlement above no longer includes it.",
    ]

    /// Gives the grant the form describes, or shows the customer page again with why not.
    func grant(_ form: [String: String], session: ConsoleSessions.Session, context: BillingRequestContext) async throws -> Response {
        let user = try Self.user(form["user"])
        var entered = ConsoleGrantForm(
            tier: form["tier"] ?? "", length: form["length"] ?? Self.defaultLength, expiresOn: form["expires_on"] ?? "", reason: form["reason"] ?? "")
        let scope = console.configuration.scope
        let now = console.now
        let caller = console.sessions.caller(of: session)
        do {
            let request = try grantRequest(entered, caller: caller, idempotencyKey: form["idempotency_key"], now: now)
            switch try await console.store.grants.create(request, for: user, in: scope, now: now) {
            case .created(let grant):
                context.logger.info("promotional grant given", metadata: ["grant": "\(grant.id)", "tier": "\(grant.tier)", "caller": "\(caller.name)"])
                return Self.redirect(user, notice: "granted")
            case .replayed:
                return Self.redirect(user, notice: "granted-again")
            case .keyReused(let grant):
                throw APIError(
                    .conflict, code: "idempotency_key_reused",
                    message: "This form was already used for another grant (\(grant.id)); reload the page and fill it in again.")
            }
        } catch let error as APIError {
            entered.problem = error.message
            let page = try await ConsoleCustomerPage(console: console).userPage(
                user, csrf: console.sessions.csrfToken(for: session), grantForm: entered)
            return ConsoleController.page(page, status: error.status)
        }
    }

    /// Revokes one of the user's grants; an unknown one is a 404 page.
    func revoke(_ form: [String: String], session: ConsoleSessions.Session, context: BillingRequestContext) async throws -> Response {
        let user = try Self.user(form["user"])
        let id = try GrantController.grantID(form["grant"])
        let caller = console.sessions.caller(of: session)
        guard let grant = try await console.store.grants.revoke(id, of: user, in: console.configuration.scope, by: caller.name, now: console.now) else {
            throw ConsoleError.refused(.notFound, "\(user) has no grant \(id) in \(console.configuration.scope.description).")
        }
        context.logger.info("promotional grant revoked", metadata: ["grant": "\(grant.id)", "caller": "\(caller.name)"])
        return Self.redirect(user, notice: "revoked")
    }

    /// The API's grant request for what the form holds: a length becomes `duration`, a date
    /// `expires_at` (the grant lasts through that day, UTC), and the API's checks do the rest.
    func grantRequest(_ form: ConsoleGrantForm, caller: TokenCaller, idempotencyKey: String?, now: Int64) throws(APIError) -> GrantRequest {
        var fields: [String: SessionRequestBody.Value] = [:]
        if !form.tier.isEmpty { fields["tier"] = .string(form.tier) }
        if !form.reason.isEmpty { fields["reason"] = .string(form.reason) }
        let date = form.expiresOn.trimmingCharacters(in: .whitespaces)
        if form.length == Self.untilDate {
            guard !date.isEmpty else {
                throw APIError(.badRequest, code: "missing_field", message: "Choose the date the grant ends, or a length instead of “until the date below”.")
            }
            guard let day = Self.day(date) else {
                throw APIError(.badRequest, code: "invalid_field", message: "“\(CheckoutInput.printable(date))” is not a date: give it as YYYY-MM-DD.")
            }
            let end = day + 86_400
            guard end > now else {
                throw APIError(.badRequest, code: "invalid_field", message: "The end date \(date) has passed: choose today or a later day.")
            }
            guard end <= now + PromotionalGrant.longestDuration else {
                throw APIError(.badRequest, code: "invalid_field", message: "A grant lasts at most ten years: choose an end date up to \(Self.date(now + PromotionalGrant.longestDuration - 86_400)).")
            }
            fields["expires_at"] = .integer(end)
        } else {
            guard Self.lengths.contains(where: { $0.value == form.length }) else {
                throw APIError(.badRequest, code: "invalid_field", message: "Choose one of the form's lengths, or “until the date below”.")
            }
            guard date.isEmpty else {
                throw APIError(
                    .badRequest, code: "conflicting_fields",
                    message: "Give a length or an end date, not both: choose “until the date below” to end the grant on \(date), or clear the date.")
            }
            fields["duration"] = .string(form.length)
        }
        let key = try idempotencyKey.flatMap { $0.isEmpty ? nil : $0 }.map { key throws(APIError) in try CheckoutInput.idempotencyKey(key) }
        return try GrantController.grantRequest(
            SessionRequestBody(fields: fields), catalog: console.configuration.catalog, caller: caller, idempotencyKey: key, now: now)
    }

    /// The user of a form, checked as the API checks a path's user.
    static func user(_ raw: String?) throws -> String {
        guard let raw, !raw.isEmpty else { throw ConsoleError.refused(.badRequest, "The form does not say which user: reload the customer page.") }
        if let problem = UserRequest.userProblem(raw) { throw ConsoleError.refused(.badRequest, "The app user id \(problem).") }
        return raw
    }

    static func redirect(_ user: String, notice: String) -> Response {
        ConsoleController.redirect("/console/customers?user=\(ConsoleCustomerPage.query(user))&notice=\(notice)#grants")
    }

    /// The start (00:00 UTC) of a `YYYY-MM-DD` day, in Unix seconds.
    static func day(_ text: String) -> Int64? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2])
        else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let components = DateComponents(year: year, month: month, day: day)
        guard components.isValidDate(in: calendar), let date = calendar.date(from: components) else { return nil }
        return Int64(date.timeIntervalSince1970)
    }

    /// `2026-11-27`.
    static func date(_ seconds: Int64) -> String {
        String(ConsoleFormat.time(seconds).prefix(10))
    }

    /// The section: the user's grants, active and past, a revoke button on each active one, and
    /// the "Grant access" form.
    static func render(_ customer: ConsoleCustomer) -> HTML {
        let catalog = customer.catalog
        let rows: [[HTML]] = customer.billing.grants.map { grant in
            let state: HTML
            if grant.revokedAt != nil {
                state = "<span class=\"tag bad\">revoked</span>"
            } else if grant.isActive(now: customer.now) {
                state = "<span class=\"tag good\">active</span>"
            } else if grant.startsAt > customer.now {
                state = "<span class=\"tag\">not started</span>"
            } else {
                state = "<span class=\"tag\">expired</span>"
            }
            let revoked: HTML = grant.revokedAt.map { "\(ConsoleFormat.time($0)) by \(grant.revokedBy ?? "—")" } ?? "—"
            let action: HTML = grant.revokedAt == nil && grant.expiresAt > customer.now ? """
                <form class="inline" method="post" action="/console/customers/grants/revoke">\(ConsolePages.csrfField(customer.csrf))\
                <input type="hidden" name="user" value="\(customer.user)"><input type="hidden" name="grant" value="\(grant.id)">\
                <button type="submit" class="danger revoke-grant" data-grant="\(grant.id)">Revoke</button></form>
                """ : .empty
            return [
                "<code>\(grant.id)</code>", "\(catalog.tier(id: grant.tier)?.name ?? grant.tier)", state, "\(ConsoleFormat.time(grant.startsAt))",
                "\(ConsoleFormat.time(grant.expiresAt))", "\(grant.reason)", "\(grant.createdBy)", revoked, action,
            ]
        }
        let table = ConsolePages.table(
            ["Grant", "Tier", "State", "Starts", "Expires", "Reason", "Given by", "Revoked", ""], rows, id: "grant-table", empty: "No grant.")
        // The table scrolls sideways on its own on a phone; the form below it does not.
        return "<div class=\"scroll\">\(table)</div>\(form(customer))"
    }

    static func form(_ customer: ConsoleCustomer) -> HTML {
        let catalog = customer.catalog
        let tiers = catalog.tiers.filter { $0.id != catalog.defaultTier.id }
        guard !tiers.isEmpty else {
            return "<p class=\"muted\">The plan catalog (BILLINGD_PLANS) has only the default tier: there is no tier to grant.</p>"
        }
        let entered = customer.grantForm
        let tierOptions = HTML(tiers.map { tier in
            "<option value=\"\(tier.id)\"\(tier.id == entered.tier ? HTML(" selected") : .empty)>\(tier.name)</option>"
        })
        let lengthOptions = HTML(lengths.map { length in
            "<option value=\"\(length.value)\"\(length.value == entered.length ? HTML(" selected") : .empty)>\(length.label)</option>"
        })
        let problem: HTML = entered.problem.map { "<p class=\"alert\" role=\"alert\" id=\"grant-error\">\($0)</p>" } ?? .empty
        var random = SystemRandomNumberGenerator()
        let key = "console_" + ConsoleSessions.base64URL((0..<18).map { _ in UInt8.random(in: 0...255, using: &random) })
        return """
            <h3>Grant access</h3>\(problem)
            <form method="post" action="/console/customers/grants" id="grant-form" class="grant">\(ConsolePages.csrfField(customer.csrf))\
            <input type="hidden" name="user" value="\(customer.user)"><input type="hidden" name="idempotency_key" value="\(key)">
            <div class="field"><label for="grant-tier">Tier</label><select id="grant-tier" name="tier">\(tierOptions)</select></div>
            <div class="field"><label for="grant-length">Length</label><select id="grant-length" name="length">\(lengthOptions)</select></div>
            <div class="field"><label for="grant-expires-on">End date (through this day, UTC)</label>\
            <input type="date" id="grant-expires-on" name="expires_on" value="\(entered.expiresOn)"></div>
            <div class="field wide"><label for="grant-reason">Reason</label>\
            <input type="text" id="grant-reason" name="reason" value="\(entered.reason)" maxlength="\(PromotionalGrant.longestReason)" required \
            placeholder="support ticket 4411"></div>
            <div class="field"><button type="submit" id="grant">Grant access</button></div>
            </form>
            """
    }
}

extension ConsoleCustomerSection {
    /// The user's promotional grants, with "Grant access" and "Revoke".
    static let grants = ConsoleCustomerSection(id: "grants", title: "Grants") { customer in ConsoleGrants.render(customer) }
}
