import BillingCore
import BillingStore
import Foundation
import Hummingbird

extension ConsoleCustomerSection {
    /// The user's history, newest first, a page at a time: `?timeline=CURSOR` on the customer
    /// page shows the page after that cursor, and "Older" links to the next.
    static let timeline = ConsoleCustomerSection(id: "timeline", title: "Timeline") { customer in
        let cursor: TimelineCursor?
        if let raw = customer.query["timeline"] {
            guard let parsed = TimelineCursor(encoded: raw) else {
                throw ConsoleError.refused(.badRequest, "The timeline cursor is not one this page handed out; open the customer page again.")
            }
            cursor = parsed
        } else {
            cursor = nil
        }
        let page = try await customer.store.timeline.timeline(
            of: customer.user, in: customer.scope, limit: ConsoleCustomerSection.timelinePageSize, after: cursor, now: customer.now)
        let rows: [[HTML]] = page.items.map { item in
            let access: HTML = item.entitlement.map { entitlement -> HTML in
                let until = entitlement.validUntil.map { " until \(ConsoleFormat.time($0))" } ?? ""
                return "<strong>\(entitlement.tier ?? "—")</strong> \(entitlement.source ?? "")\(until)"
            } ?? .empty
            return [
                "\(ConsoleFormat.time(item.at))", "<span class=\"tag\">\(item.kind.rawValue)</span>", "\(item.summary)",
                item.ref.map { ref -> HTML in "<code>\(ref)</code>" } ?? .empty, access,
            ]
        }
        let table = ConsolePages.table(
            ["At", "Kind", "What happened", "Ref", "Access after"], rows, id: "timeline-table", empty: "Nothing in the ledger for this user yet.")
        let user = ConsoleCustomerPage.query(customer.user)
        var links: [HTML] = []
        if cursor != nil { links.append("<a href=\"/console/customers?user=\(user)#timeline\" id=\"timeline-newest\">Newest</a>") }
        if let next = page.nextCursor {
            links.append("<a href=\"/console/customers?user=\(user)&amp;timeline=\(ConsoleCustomerPage.query(next.encoded))#timeline\" id=\"timeline-older\">Older</a>")
        }
        return links.isEmpty ? table : "\(table)<p class=\"pager\">\(HTML(links.map { link -> HTML in "\(link) " }))</p>"
    }

    static let timelinePageSize = 50
}
