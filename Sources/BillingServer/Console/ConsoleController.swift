import BillingCore
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore

/// The operator console, `/console`: server-rendered pages for operators behind a sign-in with a
/// console token (`BILLINGD_CONSOLE_TOKENS`), off — no route registered — without one. Every
/// page needs a signed session cookie (``ConsoleSessions``); every form that changes something
/// carries the session's CSRF token; every answer carries a strict Content-Security-Policy, and
/// the CSS is served from the binary (no CDN, no script). See docs/console.md.
public struct ConsoleController: Sendable {
    public struct Configuration: Sendable {
        public var tokens: [ConsoleToken]
        /// Marks the cookie `Secure` even on a plain-HTTP request (`BILLINGD_CONSOLE_SECURE_COOKIE`),
        /// for a TLS proxy that does not say `X-Forwarded-Proto: https`.
        public var secureCookie: Bool
        public var scope: ServiceScope
        public var catalog: PlanCatalog
        public var exchangeRates: ExchangeRates?
        /// The app's webhook endpoints (`BILLINGD_APP_WEBHOOK_URL`), listed even when idle.
        public var outboxEndpoints: [String]
        public var now: @Sendable () -> Date
        /// Wakes the applier after a retry queued an inbox event again.
        public var inboxRequeued: @Sendable () -> Void
        /// Wakes the outbox sender after a retry or an enable.
        public var outboxRequeued: @Sendable () -> Void
        /// Starts dry-run reconciles; nil without a Stripe key (no reconciler).
        public var reconcile: ConsoleReconcileRunner?
        /// The overview's figures as `serve` keeps them (recomputed by the revenue gauges); nil:
        /// the controller keeps its own, recomputed by visits.
        public var overviewFigures: ConsoleOverviewFigures?

        public init(
            tokens: [ConsoleToken], secureCookie: Bool = false, scope: ServiceScope = .test, catalog: PlanCatalog = .freeOnly,
            exchangeRates: ExchangeRates? = nil, outboxEndpoints: [String] = [], now: @escaping @Sendable () -> Date = Date.init,
            inboxRequeued: @escaping @Sendable () -> Void = {}, outboxRequeued: @escaping @Sendable () -> Void = {},
            reconcile: ConsoleReconcileRunner? = nil, overviewFigures: ConsoleOverviewFigures? = nil
        ) {
            self.tokens = tokens
            self.secureCookie = secureCookie
            self.scope = scope
            self.catalog = catalog
            self.exchangeRates = exchangeRates
            self.outboxEndpoints = outboxEndpoints
            self.now = now
            self.inboxRequeued = inboxRequeued
            self.outboxRequeued = outboxRequeued
            self.reconcile = reconcile
            self.overviewFigures = overviewFigures
        }
    }

    let store: any LedgerStore
    let facts: any MetricsFactStore
    let configuration: Configuration
    let sessions: ConsoleSessions
    let throttle: ConsoleSignInThrottle
    let rejections: RejectionLog
    /// The overview page's figures, kept between visits.
    let overviewFigures: ConsoleOverviewFigures

    public init(
        store: any LedgerStore, facts: (any MetricsFactStore)? = nil, configuration: Configuration, throttle: ConsoleSignInThrottle = .init(),
        rejections: RejectionLog
    ) {
        self.store = store
        self.facts = facts ?? store.metrics
        self.configuration = configuration
        sessions = ConsoleSessions(tokens: configuration.tokens)
        self.throttle = throttle
        self.rejections = rejections
        overviewFigures = configuration.overviewFigures ?? ConsoleOverviewFigures(reader: Self.reader(self.facts, configuration))
    }

    /// The revenue metrics as the console reads them: in serve's mode, with its catalog and rates.
    static func reader(_ facts: any MetricsFactStore, _ configuration: Configuration) -> RevenueMetricsReader {
        RevenueMetricsReader(
            facts: facts,
            configuration: .init(scope: configuration.scope, catalog: configuration.catalog, exchangeRates: configuration.exchangeRates, now: configuration.now))
    }

    var now: Int64 { Int64(configuration.now().timeIntervalSince1970) }

    public func addRoutes(to router: Router<BillingRequestContext>) {
        guard !configuration.tokens.isEmpty else { return }
        let group = router.group("console").add(middleware: ConsoleHeadersMiddleware())
        group.get("static/console.css") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/css; charset=utf-8", .cacheControl: "max-age=300"],
                body: .init(byteBuffer: ByteBuffer(bytes: PackageResources.console_css)))
        }
        group.get { request, _ in
            Self.redirect(session(request) == nil ? "/console/sign-in" : "/console/overview")
        }
        group.get("sign-in") { request, _ in
            if session(request) != nil { return Self.redirect("/console/overview") }
            return Self.page(ConsolePages.signIn(error: nil))
        }
        group.post("sign-in") { request, context in try await signIn(request, context: context) }
        group.post("sign-out") { request, context in
            let (_, _) = try await authorizedForm(request, context: context)
            var response = Self.redirect("/console/sign-in")
            response.headers[.setCookie] = ConsoleSessions.clearCookie(secure: isSecure(request))
            return response
        }
        group.get("overview") { request, _ in
            let session = try authorized(request)
            return Self.page(try await ConsoleOverviewPage(console: self).render(csrf: sessions.csrfToken(for: session)))
        }
        group.get("customers") { request, _ in
            let session = try authorized(request)
            return Self.page(try await ConsoleCustomerPage(console: self).render(request, csrf: sessions.csrfToken(for: session)))
        }
        let grants = ConsoleGrants(console: self)
        group.post("customers/grants") { request, context in
            let (session, form) = try await authorizedForm(request, context: context)
            return try await grants.grant(form, session: session, context: context)
        }
        group.post("customers/grants/revoke") { request, context in
            let (session, form) = try await authorizedForm(request, context: context)
            return try await grants.revoke(form, session: session, context: context)
        }
        let events = ConsoleEventsPage(console: self)
        group.get("events") { request, _ in
            let session = try authorized(request)
            return Self.page(try await events.render(request, csrf: sessions.csrfToken(for: session)))
        }
        group.post("events/retry") { request, context in
            let (_, form) = try await authorizedForm(request, context: context)
            return try await events.retryInbox(form)
        }
        group.post("outbox/retry") { request, context in
            let (_, form) = try await authorizedForm(request, context: context)
            return try await events.retryOutbox(form)
        }
        group.post("outbox/enable") { request, context in
            let (_, form) = try await authorizedForm(request, context: context)
            return try await events.enableEndpoint(form)
        }
        let reconcile = ConsoleReconcilePage(console: self)
        group.get("reconcile") { request, _ in
            let session = try authorized(request)
            return Self.page(try await reconcile.render(request, csrf: sessions.csrfToken(for: session)))
        }
        group.post("reconcile/dry-run") { request, context in
            let (_, _) = try await authorizedForm(request, context: context)
            return reconcile.startDryRun()
        }
    }

    // MARK: Sign-in

    func signIn(_ request: Request, context: BillingRequestContext) async throws -> Response {
        try checkOrigin(request)
        let address = context.clientAddress
        if let wait = throttle.retryAfter(address, now: now) {
            rejections.notice("console sign-in throttled", reason: "console_sign_in_throttled", metadata: [:], to: context.logger)
            var response = Self.page(ConsolePages.signIn(error: "Too many wrong tokens from your address. Try again in \(wait) seconds."), status: .tooManyRequests)
            response.headers[.retryAfter] = String(wait)
            return response
        }
        let form = try await Self.form(request, context: context)
        guard let token = form["token"], let signed = sessions.signIn(token: token, now: now) else {
            throttle.failed(address, now: now)
            rejections.notice("console sign-in refused", reason: "console_wrong_token", metadata: [:], to: context.logger)
            return Self.page(ConsolePages.signIn(error: "That is not an operator token (BILLINGD_CONSOLE_TOKENS)."), status: .unauthorized)
        }
        throttle.succeeded(address)
        context.logger.notice("console sign-in", metadata: ["console_token": "\(signed.session.label ?? "unlabelled")"])
        var response = Self.redirect("/console/overview")
        response.headers[.setCookie] = ConsoleSessions.setCookie(signed.value, secure: isSecure(request))
        return response
    }

    /// Whether the cookie must be `Secure`: the setting, or a request that came over TLS (itself,
    /// or to a proxy that says so).
    func isSecure(_ request: Request) -> Bool {
        configuration.secureCookie || request.uri.scheme == .https
            || request.headers[HTTPField.Name("X-Forwarded-Proto")!]?.lowercased() == "https"
    }

    // MARK: Sessions and forms

    func session(_ request: Request) -> ConsoleSessions.Session? {
        ConsoleSessions.cookieValue(request.headers[.cookie]).flatMap { sessions.verify($0, now: now) }
    }

    /// The session of a page request; without one, a redirect to the sign-in.
    func authorized(_ request: Request) throws(ConsoleError) -> ConsoleSessions.Session {
        guard let session = session(request) else { throw .redirect("/console/sign-in") }
        return session
    }

    /// The session and form of a state-changing request: 403 without a session or without the
    /// session's CSRF token, or from another origin.
    func authorizedForm(_ request: Request, context: BillingRequestContext) async throws -> (ConsoleSessions.Session, [String: String]) {
        try checkOrigin(request)
        guard let session = session(request) else {
            throw ConsoleError.refused(.forbidden, "Sign in again: this form needs a session of the console.")
        }
        let form = try await Self.form(request, context: context)
        guard sessions.checkCSRF(form["csrf"], for: session) else {
            rejections.notice("console form refused", reason: "console_csrf", metadata: ["path": "\(request.uri.path)"], to: context.logger)
            throw ConsoleError.refused(.forbidden, "This form's CSRF token is missing or wrong: reload the page and try again.")
        }
        return (session, form)
    }

    /// A form posted from another site is refused (the CSRF token refuses it too; this says so sooner).
    func checkOrigin(_ request: Request) throws(ConsoleError) {
        guard let origin = request.headers[HTTPField.Name("Origin")!] else { return }
        let host = request.headers[HTTPField.Name("Host")!] ?? request.head.authority
        guard let originHost = URLComponents(string: origin)?.host, let host,
            originHost + (URLComponents(string: origin)?.port.map { ":\($0)" } ?? "") == host || originHost == host
        else { throw .refused(.forbidden, "This form was posted from another site.") }
    }

    /// An `application/x-www-form-urlencoded` body of at most 16 KB; each name once.
    static func form(_ request: Request, context: BillingRequestContext) async throws -> [String: String] {
        let body: ByteBuffer
        do { body = try await request.body.collect(upTo: 16 * 1024) } catch {
            throw ConsoleError.refused(.contentTooLarge, "The form is larger than 16 KB.")
        }
        return parseForm(String(decoding: body.readableBytesView, as: UTF8.self))
    }

    static func parseForm(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String? { part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard let name = decode(parts[0]), fields[name] == nil else { continue }
            fields[name] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }

    // MARK: Responses

    static func page(_ html: HTML, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: html.text)))
    }

    static func redirect(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location, .contentType: "text/html; charset=utf-8"])
    }
}

/// What stops a console request: a redirect (to the sign-in) or a refusal with a page.
enum ConsoleError: Error {
    case redirect(String)
    case refused(HTTPResponse.Status, String)
}

/// The security headers of every console answer, and errors rendered as pages: the CSP allows
/// the console's own CSS and nothing else (no script at all), no framing, no referrer.
struct ConsoleHeadersMiddleware: RouterMiddleware {
    typealias Context = BillingRequestContext

    static let contentSecurityPolicy =
        "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch ConsoleError.redirect(let location) {
            response = ConsoleController.redirect(location)
        } catch ConsoleError.refused(let status, let message) {
            response = ConsoleController.page(ConsolePages.problem(status: status, message: message), status: status)
        } catch let error as APIError {
            response = ConsoleController.page(ConsolePages.problem(status: error.status, message: error.message), status: error.status)
        } catch {
            context.logger.error("console page failed", metadata: ["error": "\(error)", "path": "\(request.uri.path)"])
            response = ConsoleController.page(
                ConsolePages.problem(status: .internalServerError, message: "The page could not be read from the ledger; the log says why."),
                status: .internalServerError)
        }
        response.headers[.contentSecurityPolicy] = Self.contentSecurityPolicy
        response.headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        // same-origin, not no-referrer: under no-referrer a browser sends `Origin: null` with the
        // console's own forms, which ``ConsoleController/checkOrigin(_:)`` must refuse; other
        // sites still get no referrer.
        response.headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        response.headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        if response.headers[.cacheControl] == nil { response.headers[.cacheControl] = "no-store" }
        return response
    }
}
