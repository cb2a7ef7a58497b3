import HTTPTypes
import Hummingbird

/// The Stripe endpoints the fake serves, each an operation of ``FakeStore``.
enum FakeRoutes {
    static func router(store: FakeStore, apiKey: String) -> Router<FakeRequestContext> {
        let router = Router(context: FakeRequestContext.self)
        router.add(middleware: StripeWireMiddleware(store: store, apiKey: apiKey))
        let v1 = router.group("v1")

        // Constant paths before `:id`, so that `/v1/customers/search` is not read as an id.
        v1.stripe(.get, "customers/search", store) { try $0.searchCustomers($1) }
        v1.stripe(.get, "customers", store) { try $0.listCustomers($1) }
        v1.stripe(.post, "customers", store) { try $0.createCustomer($1) }
        v1.stripe(.get, "customers/:id", store) { try $0.retrieveCustomer($1) }
        v1.stripe(.post, "customers/:id", store) { try $0.updateCustomer($1) }
        v1.stripe(.delete, "customers/:id", store) { try $0.deleteCustomer($1) }
        v1.stripe(.get, "customers/:id/payment_methods", store) { try $0.listCustomerPaymentMethods($1) }

        v1.stripe(.get, "subscriptions", store) { try $0.listSubscriptions($1) }
        v1.stripe(.post, "subscriptions", store) { try $0.createSubscription($1) }
        v1.stripe(.get, "subscriptions/:id", store) { try $0.retrieveSubscription($1) }
        v1.stripe(.post, "subscriptions/:id", store) { try $0.updateSubscription($1) }
        v1.stripe(.delete, "subscriptions/:id", store) { try $0.cancelSubscription($1) }

        v1.stripe(.get, "invoices", store) { try $0.listInvoices($1) }
        v1.stripe(.get, "invoices/:id", store) { try $0.retrieveInvoice($1) }

        v1.stripe(.get, "payment_methods/:id", store) { try $0.retrievePaymentMethod($1) }
        v1.stripe(.post, "payment_methods/:id/attach", store) { try $0.attachPaymentMethod($1) }
        v1.stripe(.post, "payment_methods/:id/detach", store) { try $0.detachPaymentMethod($1) }

        v1.stripe(.get, "prices", store) { try $0.listPrices($1) }
        v1.stripe(.get, "prices/:id", store) { try $0.retrievePrice($1) }
        v1.stripe(.get, "products", store) { try $0.listProducts($1) }
        v1.stripe(.get, "products/:id", store) { try $0.retrieveProduct($1) }

        v1.stripe(.get, "checkout/sessions", store) { try $0.listCheckoutSessions($1) }
        v1.stripe(.post, "checkout/sessions", store) { try $0.createCheckoutSession($1) }
        v1.stripe(.get, "checkout/sessions/:id", store) { try $0.retrieveCheckoutSession($1) }
        v1.stripe(.get, "checkout/sessions/:id/line_items", store) { try $0.listCheckoutLineItems($1) }
        v1.stripe(.post, "checkout/sessions/:id/expire", store) { try $0.expireCheckoutSession($1) }

        v1.stripe(.post, "billing_portal/sessions", store) { try $0.createBillingPortalSession($1) }
        v1.stripe(.get, "entitlements/active_entitlements", store) { try $0.listActiveEntitlements($1) }

        v1.stripe(.post, "billing/meters", store) { try $0.createBillingMeterRequest($1) }
        v1.stripe(.get, "billing/meters", store) { try $0.listBillingMeters($1) }
        v1.stripe(.get, "billing/meters/:id", store) { try $0.retrieveBillingMeter($1) }
        v1.stripe(.post, "billing/meters/:id", store) { try $0.updateBillingMeter($1) }
        v1.stripe(.post, "billing/meters/:id/deactivate", store) { try $0.deactivateBillingMeter($1) }
        v1.stripe(.post, "billing/meters/:id/reactivate", store) { try $0.reactivateBillingMeter($1) }
        v1.stripe(.get, "billing/meters/:id/event_summaries", store) { try $0.listMeterEventSummaries($1) }
        v1.stripe(.post, "billing/meter_events", store) { try $0.createMeterEvent($1) }

        v1.stripe(.get, "events", store) { try $0.listEvents($1) }
        v1.stripe(.get, "events/:id", store) { try $0.retrieveEvent($1) }
        v1.stripe(.post, "test_helpers/billingd/objects", store) { try $0.holdObject($1) }
        HostedPages(store: store).addRoutes(to: router)
        return router
    }
}

extension RouterGroup<FakeRequestContext> {
    /// Routes `method path` to a store operation, which runs with the decoded request.
    fileprivate func stripe(
        _ method: HTTPRequest.Method, _ path: RouterPath, _ store: FakeStore, _ operation: @escaping FakeStore.Operation
    ) {
        on(path, method: method) { _, context in
            guard var request = context.apiRequest else {
                throw StripeAPIError(
                    status: .internalServerError, type: "api_error", message: "The request was not decoded.")
            }
            request.id = context.parameters.get("id") ?? ""
            let response = try await store.perform(request, operation)
            var headers: HTTPFields = [.contentType: "application/json"]
            if let original = response.replayedFrom {
                headers[.idempotentReplayed] = "true"
                headers[.originalRequest] = original
            }
            return Response(status: response.status, headers: headers, body: .init(byteBuffer: response.body))
        }
    }
}
