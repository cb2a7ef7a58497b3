import BillingCore
import BillingStore
import Foundation
import Hummingbird

/// What a section of the customer page is given: the user, their billing as the ledger holds it,
/// and their access resolved as `GET /v1/users/{user}/subscription` resolves it.
struct ConsoleCustomer: Sendable {
    var user: String
    var scope: ServiceScope
    var billing: UserBilling
    var resolution: PlanResolution
    /// Unix seconds.
    var now: Int64
    /// For a section's forms.
    var csrf: String
    var store: any LedgerStore
    var catalog: PlanCatalog
    /// The page's query parameters, for sections that page (the timeline's cursor).
    var query: [String: String] = [:]
    /// The "Grant access" form as last sent, with why it was refused (``ConsoleGrants``).
    var grantForm = ConsoleGrantForm()
}

/// One section of the customer page: a heading and what it shows of a user. A new section is one
/// more value in ``all``.
struct ConsoleCustomerSection: Sendable {
    var id: String
    var title: String
    var render: @Sendable (ConsoleCustomer) async throws -> HTML

    /// The customer page's sections, in order.
    static let all: [ConsoleCustomerSection] = [.entitlement, .subscriptions, .invoices, .usage, .grants, .timeline]
}

/// `/console/customers?q=TERM` finds users by app user id, e-mail, Stripe customer or
/// subscription id, or App Store original transaction id; `?user=ID` shows one user's page.
struct ConsoleCustomerPage {
    let console: ConsoleController

    func render(_ request: Request, csrf: String) async throws -> HTML {
        let parameters = request.uri.queryParameters
        let term = parameters["q"].map { String($0).trimmingCharacters(in: .whitespaces) } ?? ""
        let scope = console.configuration.scope
        let search = Self.search(term)
        var body: [HTML] = [search]
        var user = parameters["user"].map(String.init)
        if user == nil, !term.isEmpty {
            guard term.utf8.count <= 500 else { throw ConsoleError.refused(.badRequest, "The search term is longer than 500 characters.") }
            let matches = try await console.store.users.users(matching: term, in: scope, limit: 50)
            let users = Array(Set(matches.map(\.user))).sorted()
            if users.count == 1 {
                user = users[0]
            } else if users.isEmpty {
                body.append("""
                    <p class="muted" id="no-match">No customer matches “\(term)” in \(scope.description). \
                    <a href="/console/customers?user=\(Self.query(term))">Show the app user “\(term)”</a> (a user nobody paid for has the default tier).</p>
                    """)
            } else {
                body.append(ConsolePages.table(
                    ["User", "Matched by"],
                    users.map { found in
                        let fields = matches.filter { $0.user == found }.map(\.field.rawValue).joined(separator: ", ")
                        return ["<a href=\"/console/customers?user=\(Self.query(found))\">\(found)</a>", "\(fields)"]
                    }, id: "matches"))
            }
        }
        guard let user else {
            return ConsolePages.layout(.customers, title: "Customers", csrf: csrf, body: HTML(body))
        }
        let notice = parameters["notice"].flatMap { Self.notices[String($0)] }
        let query = Dictionary(parameters.map { (String($0.key), String($0.value)) }, uniquingKeysWith: { first, _ in first })
        return try await userPage(user, csrf: csrf, notice: notice, search: search, query: query)
    }

    /// Notices of `?notice=`, after a form of a section.
    static let notices = ConsoleGrants.notices

    /// One user's page: the search form, then every section; `query` is the page's query parameters.
    func userPage(
        _ user: String, csrf: String, notice: String? = nil, search: HTML? = nil, query: [String: String] = [:], grantForm: ConsoleGrantForm = .init()
    ) async throws -> HTML {
        let scope = console.configuration.scope
        let now = console.now
        let billing = try await console.store.users.billing(of: user, in: scope, stripeEntitlements: true)
        let customer = ConsoleCustomer(
            user: user, scope: scope, billing: billing, resolution: billing.resolve(console.configuration.catalog, now: now), now: now, csrf: csrf,
            store: console.store, catalog: console.configuration.catalog, query: query, grantForm: grantForm)
        var body: [HTML] = [search ?? Self.search("")]
        for section in ConsoleCustomerSection.all {
            body.append("<section class=\"card\" id=\"\(section.id)\"><h2>\(section.title)</h2>\(try await section.render(customer))</section>")
        }
        return ConsolePages.layout(.customers, title: "Customer \(user)", csrf: csrf, notice: notice, body: HTML(body))
    }

    /// The search form, holding `term`.
    static func search(_ term: String) -> HTML {
        """
        <form class="search" method="get" action="/console/customers" role="search">
        <input type="search" name="q" id="q" value="\(term)" placeholder="app user id, e-mail, cus_…, sub_…, original transaction id" aria-label="Search customers">
        <button type="submit" id="search">Search</button></form>
        """
    }

    /// A value for a query string.
    static func query(_ value: String) -> String {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "&=+#?/")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
    }
}

extension ConsoleCustomerSection {
    /// The access now, as the service API's subscription endpoint resolves it.
    static let entitlement = ConsoleCustomerSection(id: "entitlement", title: "Entitlement now") { customer in
        let resolution = customer.resolution
        let state: HTML = resolution.entitled ? "<span class=\"tag good\">entitled</span>" : "<span class=\"tag\">not entitled</span>"
        let rows: [[HTML]] = [
            ["Tier", "<strong id=\"tier\">\(resolution.tier.name)</strong> (\(resolution.tier.id)) \(state)"],
            ["Why", "\(resolution.why.rawValue)"],
            ["Source", "\(resolution.source?.rawValue ?? "none")"],
            ["Plan", "\(resolution.plan ?? "—")"],
            ["Valid until", "\(ConsoleFormat.time(resolution.validUntil))"],
            ["Ends at", "\(ConsoleFormat.time(resolution.endsAt))"],
            ["Features", "\(resolution.features.joined(separator: ", "))"],
            ["Stripe customers", "\(customer.billing.customers.map(\.id).joined(separator: ", "))"],
        ]
        return ConsolePages.table(["", ""], rows)
    }

    /// Subscriptions on Stripe and on the App Store, in any status.
    static let subscriptions = ConsoleCustomerSection(id: "subscriptions", title: "Subscriptions") { customer in
        let stripe: [[HTML]] = customer.billing.subscriptions.map { subscription in
            let prices = subscription.items.map { item in
                let amount = item.unitAmount.map { ConsoleFormat.money($0 * (item.quantity ?? 1), item.currency ?? subscription.currency ?? "usd") } ?? ""
                return "\(item.lookupKey ?? item.price ?? item.id) \(amount)"
            }.joined(separator: ", ")
            return ["Stripe", "<code>\(subscription.id)</code>", "\(subscription.status.rawValue)\(subscription.cancelAtPeriodEnd ? " (cancels at period end)" : "")",
                    "\(prices)", "\(ConsoleFormat.time(subscription.currentPeriodEnd ?? subscription.items.compactMap(\.currentPeriodEnd).max()))"]
        }
        let appStore: [[HTML]] = customer.billing.appStoreSubscriptions.map { record in
            let price = record.price.map { ConsoleFormat.money(milliunits: $0, record.currency ?? "usd") } ?? ""
            return ["App Store (\(record.environment))", "<code>\(record.originalTransactionID)</code>",
                    "\(record.revoked ? "revoked" : (record.expiresDate.map { $0 / 1000 > customer.now } ?? false) ? "active" : "expired")",
                    "\(record.productID) \(price)", "\(ConsoleFormat.time(record.expiresDate.map { $0 / 1000 }))"]
        }
        return ConsolePages.table(["Store", "Id", "Status", "Price", "Period end"], stripe + appStore, id: "subscription-table", empty: "No subscription on either store.")
    }

    /// The newest invoices of the user's Stripe customers.
    static let invoices = ConsoleCustomerSection(id: "invoices", title: "Invoices") { customer in
        let page = try await customer.store.users.invoices(of: customer.user, in: customer.scope, limit: 20, startingAfter: nil)
        let rows: [[HTML]] = (page?.invoices ?? []).map { invoice in
            ["<code>\(invoice.id)</code>", "\(invoice.number ?? "")", "\(invoice.status ?? "")", "\(ConsoleFormat.money(invoice.total, invoice.currency))",
             "\(ConsoleFormat.money(invoice.amountPaid, invoice.currency))", "\(ConsoleFormat.time(invoice.created))"]
        }
        let more: HTML = page?.hasMore == true ? "<p class=\"muted\">Only the newest 20 are shown.</p>" : .empty
        return "\(ConsolePages.table(["Invoice", "Number", "Status", "Total", "Paid", "Created"], rows, numeric: [3, 4], id: "invoice-table", empty: "No invoice."))\(more)"
    }

    /// Usage against the tier's limits in the current period.
    static let usage = ConsoleCustomerSection(id: "usage", title: "Usage") { customer in
        let states = try await UsageController.states(
            customer.store.usage, catalog: customer.catalog, of: customer.user, in: customer.scope, resolution: customer.resolution, now: customer.now)
        let rows: [[HTML]] = states.map { state in
            let limit = state.isUnlimited ? "unlimited" : String(state.limitCount ?? 0)
            let period = state.period.map { "\(ConsoleFormat.time($0.start)) – \(ConsoleFormat.time($0.end))" } ?? "—"
            return ["\(state.meter.id)", "\(state.used)", "\(limit)", "\(period)"]
        }
        return ConsolePages.table(["Meter", "Used", "Limit", "Period"], rows, numeric: [1, 2], empty: "The plan catalog has no meters.")
    }
}
