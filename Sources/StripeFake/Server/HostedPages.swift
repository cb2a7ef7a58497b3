import Foundation
import HTTPTypes
import Hummingbird

/// What a buyer's browser does on Stripe's hosted pages, on the fake's own address (when
/// ``StripeFake/Configuration/hostedPages`` is on): opening a Checkout URL pays the session, as a
/// buyer with a test card would, and redirects to its `success_url`; opening a portal URL
/// redirects to its `return_url`. Platform account only.
struct HostedPages {
    static let prefix = "/hosted/"

    let store: FakeStore

    func addRoutes(to router: Router<FakeRequestContext>) {
        router.get("hosted/pay/:id") { _, context in
            let id = try context.parameters.require("id")
            do {
                let session = try await store.run { store throws(StripeAPIError) in
                    try store.completeCheckout(id, email: nil, name: nil, in: store.account(nil)).value
                }
                let success = session["success_url"]?.stringValue ?? ""
                return Self.redirect(to: success.replacingOccurrences(of: "{CHECKOUT_SESSION_ID}", with: id), or: "Paid: \(id).")
            } catch {
                return Self.page(.notFound, "This Checkout Session cannot be paid: \((error as? StripeAPIError)?.message ?? "\(error)")")
            }
        }
        router.get("hosted/portal/:id") { _, context in
            let id = try context.parameters.require("id")
            guard let returnURL = await store.portalReturnURL(id) else {
                return Self.page(.notFound, "No portal session \(id).")
            }
            return Self.redirect(to: returnURL, or: "The local portal has nothing to manage.")
        }
    }

    /// 303 to `location` when it is an http(s) URL, else a short page saying `text`.
    static func redirect(to location: String, or text: String) -> Response {
        guard let url = URL(string: location), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
            return page(.ok, text)
        }
        return Response(status: .seeOther, headers: [.location: location])
    }

    static func page(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(
            status: status, headers: [.contentType: "text/plain; charset=utf-8"],
            body: .init(byteBuffer: .init(string: text + "\n")))
    }
}

extension FakeStore {
    func setHostedPagesBase(_ base: String?) { hostedPagesBase = base }
    func portalReturnURL(_ id: String) -> String? { portalReturnURLs[id] }
}
