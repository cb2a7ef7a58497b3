import Foundation
import HTTPTypes

/// The console's page frame: the head with its stylesheet, the navigation and the sign-out form.
enum ConsolePages {
    enum Section: String, CaseIterable {
        case overview, customers, events, reconcile

        var title: String {
            switch self {
            case .overview: "Overview"
            case .customers: "Customers"
            case .events: "Events"
            case .reconcile: "Reconcile"
            }
        }
    }

    static func head(_ title: String) -> HTML {
        """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="referrer" content="same-origin">
        <link rel="icon" href="data:,">
        <title>\(title) · billingd</title>
        <link rel="stylesheet" href="/console/static/console.css">
        </head>
        """
    }

    /// A signed-in page: navigation, the sign-out form, `body`.
    static func layout(_ section: Section, title: String, csrf: String, notice: String? = nil, body: HTML) -> HTML {
        let links = HTML(Section.allCases.map { item in
            "<a href=\"/console/\(item.rawValue)\"\(item == section ? HTML(" class=\"current\" aria-current=\"page\"") : .empty)>\(item.title)</a>"
        })
        let banner: HTML = notice.map { "<p class=\"notice\" role=\"status\">\($0)</p>" } ?? .empty
        return """
            \(head(title))<body>
            <header><span class="brand">billingd console</span><nav>\(links)</nav>
            <form class="inline" method="post" action="/console/sign-out">\(csrfField(csrf))<button class="secondary" type="submit" id="sign-out">Sign out</button></form>
            </header>
            <main><h1>\(title)</h1>\(banner)\(body)</main>
            </body></html>
            """
    }

    static func csrfField(_ csrf: String) -> HTML {
        "<input type=\"hidden\" name=\"csrf\" value=\"\(csrf)\">"
    }

    static func signIn(error: String?) -> HTML {
        let problem: HTML = error.map { "<p class=\"alert\" role=\"alert\" id=\"sign-in-error\">\($0)</p>" } ?? .empty
        return """
            \(head("Sign in"))<body><main><div class="signin">
            <h1>billingd console</h1>\(problem)
            <form method="post" action="/console/sign-in">
            <label for="token">Operator token (BILLINGD_CONSOLE_TOKENS)</label>
            <input type="password" id="token" name="token" autocomplete="current-password" required>
            <button type="submit" id="sign-in">Sign in</button>
            </form></div></main></body></html>
            """
    }

    static func problem(status: HTTPResponse.Status, message: String) -> HTML {
        """
        \(head(status.reasonPhrase))<body><main><div class="signin">
        <h1>\(status.code) \(status.reasonPhrase)</h1><p class="alert" role="alert">\(message)</p>
        <p><a href="/console/overview">Back to the console</a></p>
        </div></main></body></html>
        """
    }

    /// A table: header cells, then rows of cells (already HTML); `numeric` columns align right.
    static func table(_ headers: [String], _ rows: [[HTML]], numeric: Set<Int> = [], id: String? = nil, empty: String = "None.") -> HTML {
        guard !rows.isEmpty else { return "<p class=\"muted\">\(empty)</p>" }
        let head = HTML(headers.enumerated().map { index, title in
            "<th scope=\"col\"\(numeric.contains(index) ? HTML(" class=\"number\"") : .empty)>\(title)</th>"
        })
        let body = HTML(rows.map { cells in
            "<tr>\(HTML(cells.enumerated().map { index, cell in "<td\(numeric.contains(index) ? HTML(" class=\"number\"") : .empty)>\(cell)</td>" }))</tr>"
        })
        let identifier: HTML = id.map { " id=\"\($0)\"" } ?? .empty
        // Each table scrolls sideways on its own when its ids do not fit (a phone), not the page.
        return "<div class=\"scroll\"><table\(identifier)><thead><tr>\(head)</tr></thead><tbody>\(body)</tbody></table></div>"
    }

    /// An error as one line: its first line, without the statement a database error quotes
    /// (`… - while executing `INSERT …``), at most 120 characters; the whole text behind it in a
    /// `<details>` when that is longer.
    static func errorSummary(_ error: String?) -> HTML {
        guard let error, !error.isEmpty else { return .empty }
        let summary = summary(of: error)
        guard summary != error else { return "<span class=\"error\">\(error)</span>" }
        return "<details class=\"error\"><summary>\(summary)</summary><pre>\(error)</pre></details>"
    }

    static func summary(of error: String) -> String {
        var line = error.split(whereSeparator: \.isNewline).first.map(String.init) ?? error
        if let statement = line.range(of: " - while executing `") { line = String(line[..<statement.lowerBound]) }
        line = line.trimmingCharacters(in: .whitespaces)
        if line.count > 120 { line = String(line.prefix(119)).trimmingCharacters(in: .whitespaces) + "…" }
        return line
    }

    static func figure(_ label: String, _ value: String, id: String? = nil) -> HTML {
        let identifier: HTML = id.map { " id=\"\($0)\"" } ?? .empty
        return "<div class=\"figure\"\(identifier)><div class=\"label\">\(label)</div><div class=\"value\">\(value)</div></div>"
    }
}
