import BillingStore
import Foundation
import Hummingbird

/// `/console/events`: the inbox's failed, dead and pending deliveries (filterable by store and
/// type) with a retry — `billingd events retry` — and the outbound endpoints with their backlog,
/// last error, retry and enable — `billingd outbox retry | enable`.
struct ConsoleEventsPage {
    let console: ConsoleController

    static let notices = [
        "retried": "Queued again; the applier applies it now.",
        "not-retried": "That event is not failed or dead any more: nothing to retry.",
        "outbox-retried": "Queued again for its endpoints; the sender sends it now.",
        "outbox-not-retried": "That outbound event is not failed or dead any more.",
        "enabled": "The endpoint is enabled; its waiting events go out in order.",
        "not-enabled": "That endpoint was not disabled.",
    ]

    func render(_ request: Request, csrf: String) async throws -> HTML {
        let parameters = request.uri.queryParameters
        let store = parameters["store"].map(String.init).flatMap { ["stripe", "app_store"].contains($0) ? $0 : nil }
        let type = parameters["type"].map(String.init).flatMap { $0.isEmpty ? nil : $0 }
        let inbox = console.store.inbox
        // The queue's depth, read through the partial index of events not applied: counting the
        // applied ones too would read the whole inbox (millions of rows on a large ledger).
        let counts = try await inbox.depth().counts
        let events = try await inbox.list(InboxFilter(statuses: [.failed, .dead, .pending], type: type, limit: 500)).filter { event in
            switch store {
            case "stripe": !event.source.isAppStore
            case "app_store": event.source.isAppStore
            default: true
            }
        }
        var body: [HTML] = []
        body.append("""
            <div class="figures">\(ConsolePages.figure("Pending", String(counts[.pending] ?? 0), id: "count-pending"))\
            \(ConsolePages.figure("Failed", String(counts[.failed] ?? 0), id: "count-failed"))\
            \(ConsolePages.figure("Dead", String(counts[.dead] ?? 0), id: "count-dead"))</div>
            <h2>Inbox deliveries not applied</h2>
            <form class="filters" method="get" action="/console/events">
            <select name="store" aria-label="Store"><option value="">both stores</option>\
            <option value="stripe"\(store == "stripe" ? HTML(" selected") : .empty)>Stripe</option>\
            <option value="app_store"\(store == "app_store" ? HTML(" selected") : .empty)>App Store</option></select>
            <input type="text" name="type" value="\(type)" placeholder="event type, e.g. invoice.paid" aria-label="Event type">
            <button type="submit" class="secondary">Filter</button></form>
            """)
        let rows: [[HTML]] = events.prefix(200).map { event in
            let retry: HTML = event.status == .pending ? "<span class=\"muted\">queued</span>" : """
                <form class="inline" method="post" action="/console/events/retry">\(ConsolePages.csrfField(csrf))\
                <input type="hidden" name="event_id" value="\(event.eventID)"><input type="hidden" name="account" value="\(event.account ?? "")">\
                <input type="hidden" name="livemode" value="\(event.livemode ? "true" : "false")">\
                <button type="submit" class="retry-event" data-event="\(event.eventID)">Retry</button></form>
                """
            let status: HTML = event.status == .pending ? "<span class=\"tag\">pending</span>" : "<span class=\"tag bad\">\(event.status.rawValue)</span>"
            return [
                "<code>\(event.eventID)</code>", "\(event.source.isAppStore ? "App Store" : "Stripe")",
                "\(event.type)\(event.subtype.map { " / \($0)" } ?? "")", status, "\(event.attempts)",
                ConsolePages.errorSummary(event.lastError), "\(ConsoleFormat.time(event.receivedAt / 1000))", retry,
            ]
        }
        body.append("<section class=\"card\">\(ConsolePages.table(["Event", "Store", "Type", "Status", "Tries", "Error", "Received", ""], rows, numeric: [4], id: "inbox", empty: "Every delivery is applied."))</section>")
        body.append(try await outbound(csrf: csrf))
        let notice = parameters["notice"].flatMap { Self.notices[String($0)] }
        return ConsolePages.layout(.events, title: "Events", csrf: csrf, notice: notice, body: HTML(body))
    }

    /// The outbound endpoints, their backlog and last error; the events that failed or died, each with a retry.
    func outbound(csrf: String) async throws -> HTML {
        let outbox = console.store.outbox
        let disabled = try await outbox.disabledEndpoints()
        var waiting: [OutboxMessage] = []
        for status in [OutboxStatus.pending, .failed, .dead] { waiting += try await outbox.list(status: status, limit: 1000) }
        let endpoints = Set(console.configuration.outboxEndpoints).union(disabled.keys).union(waiting.map(\.endpoint)).sorted()
        let endpointRows: [[HTML]] = endpoints.map { endpoint in
            let backlog = waiting.filter { $0.endpoint == endpoint && $0.status != .dead }.count
            let dead = waiting.filter { $0.endpoint == endpoint && $0.status == .dead }.count
            let lastError = waiting.filter { $0.endpoint == endpoint && $0.lastError != nil }.max { $0.seq < $1.seq }?.lastError
            let state: HTML
            if let at = disabled[endpoint] {
                state = """
                    <span class="tag bad">disabled \(ConsoleFormat.time(at / 1000))</span> \
                    <form class="inline" method="post" action="/console/outbox/enable">\(ConsolePages.csrfField(csrf))\
                    <input type="hidden" name="url" value="\(endpoint)"><button type="submit">Enable</button></form>
                    """
            } else {
                state = "<span class=\"tag good\">sending</span>"
            }
            return ["<code>\(Self.shown(endpoint))</code>", state, "\(backlog)", "\(dead)", ConsolePages.errorSummary(lastError)]
        }
        let failedRows: [[HTML]] = waiting.filter { $0.status == .failed || $0.status == .dead }.prefix(100).map { message in
            [
                "<code>\(message.event.id)</code>", "\(message.event.type)", "\(message.event.user)", "<span class=\"tag bad\">\(message.status.rawValue)</span>",
                "\(message.attempts)", ConsolePages.errorSummary(message.lastError),
                """
                <form class="inline" method="post" action="/console/outbox/retry">\(ConsolePages.csrfField(csrf))\
                <input type="hidden" name="id" value="\(message.event.id)"><button type="submit">Retry</button></form>
                """,
            ]
        }
        return """
            <h2>Outbound webhooks to the app</h2><section class="card">\
            \(ConsolePages.table(["Endpoint", "State", "Backlog", "Dead", "Last error"], endpointRows, numeric: [2, 3], id: "endpoints", empty: "No endpoint (BILLINGD_APP_WEBHOOK_URL is not set)."))\
            \(ConsolePages.table(["Event", "Type", "User", "Status", "Tries", "Last error", ""], failedRows, numeric: [4], id: "outbox-failed", empty: "No failed or dead outbound event."))\
            </section>
            """
    }

    /// `billingd events retry`: one failed or dead event of an account and mode, queued again.
    func retryInbox(_ form: [String: String]) async throws -> Response {
        guard let eventID = form["event_id"], !eventID.isEmpty, let livemode = form["livemode"].flatMap({ ["true": true, "false": false][$0] }) else {
            throw ConsoleError.refused(.badRequest, "The retry form needs event_id and livemode.")
        }
        let account = form["account"].flatMap { $0.isEmpty ? nil : $0 }
        let retried = try await console.store.inbox.retry(eventID: eventID, account: account, livemode: livemode)
        if retried { console.configuration.inboxRequeued() }
        return ConsoleController.redirect("/console/events?notice=\(retried ? "retried" : "not-retried")")
    }

    /// `billingd outbox retry ID`.
    func retryOutbox(_ form: [String: String]) async throws -> Response {
        guard let id = form["id"], !id.isEmpty else { throw ConsoleError.refused(.badRequest, "The retry form needs the event's id.") }
        let count = try await console.store.outbox.retry(id: id, now: Int64(console.configuration.now().timeIntervalSince1970 * 1000))
        if count > 0 { console.configuration.outboxRequeued() }
        return ConsoleController.redirect("/console/events?notice=\(count > 0 ? "outbox-retried" : "outbox-not-retried")")
    }

    /// `billingd outbox enable URL`.
    func enableEndpoint(_ form: [String: String]) async throws -> Response {
        guard let url = form["url"], !url.isEmpty else { throw ConsoleError.refused(.badRequest, "The enable form needs the endpoint's URL.") }
        let enabled = try await console.store.outbox.enableEndpoint(url)
        if enabled { console.configuration.outboxRequeued() }
        return ConsoleController.redirect("/console/events?notice=\(enabled ? "enabled" : "not-enabled")")
    }

    /// An endpoint URL with the credentials in it masked, as `billingd outbox` shows it.
    static func shown(_ url: String) -> String {
        guard var components = URLComponents(string: url) else { return url }
        if components.password != nil { components.password = "***" }
        components.queryItems = components.queryItems?.map { URLQueryItem(name: $0.name, value: $0.value == nil ? nil : "***") }
        return components.string ?? url
    }
}
