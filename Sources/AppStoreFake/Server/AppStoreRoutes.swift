import Foundation
import HTTPTypes
import Hummingbird

/// The App Store Server API endpoints the fake serves, each an operation of ``FakeAppStore``.
enum AppStoreRoutes {
    static func router(store: FakeAppStore, tokens: BearerTokenVerifier) -> Router<FakeRequestContext> {
        let router = Router(context: FakeRequestContext.self)
        router.add(middleware: AppStoreWireMiddleware(store: store, tokens: tokens))
        let inApps = router.group("inApps")

        inApps.get("v1/subscriptions/:transactionId") { request, context in
            let id = try context.parameters.require("transactionId")
            var statuses: Set<Int> = []
            for value in request.uri.queryParameters.getAll("status") {
                guard let status = Int(value), (1...5).contains(status) else { throw AppStoreFake.APIError.invalidStatus }
                statuses.insert(status)
            }
            return WireJSON.response(try await store.allSubscriptionStatuses(id, statuses: statuses))
        }

        inApps.get("v2/history/:transactionId") { request, context in
            let id = try context.parameters.require("transactionId")
            let query = request.uri.queryParameters
            var history = FakeAppStore.HistoryQuery()
            history.revision = query.get("revision")
            history.sort = query.get("sort")
            history.revoked = query.get("revoked")
            history.productIDs = Set(query.getAll("productId"))
            history.productTypes = Set(query.getAll("productType"))
            history.subscriptionGroupIDs = Set(query.getAll("subscriptionGroupIdentifier"))
            if let start = query.get("startDate") {
                guard let value = Int64(start) else { throw AppStoreFake.APIError.invalidStartDate }
                history.startDate = value
            }
            if let end = query.get("endDate") {
                guard let value = Int64(end) else { throw AppStoreFake.APIError.invalidEndDate }
                history.endDate = value
            }
            return WireJSON.response(try await store.transactionHistory(id, history))
        }

        inApps.get("v1/transactions/:transactionId") { _, context in
            WireJSON.response(try await store.transactionInfo(try context.parameters.require("transactionId")))
        }

        inApps.post("v1/notifications/history") { request, context in
            guard let body = try? JSONDecoder().decode(NotificationHistoryRequest.self, from: Data(context.body)) else {
                throw AppStoreFake.APIError.generalBadRequest
            }
            let token = request.uri.queryParameters.get("paginationToken")
            return WireJSON.response(try await store.notificationHistory(body, paginationToken: token))
        }

        inApps.post("v1/notifications/test") { _, _ in
            WireJSON.response(try await store.sendTestNotification())
        }

        inApps.get("v1/notifications/test/:token") { _, context in
            WireJSON.response(try await store.testNotificationStatus(try context.parameters.require("token")))
        }

        inApps.get("v1/lookup/:orderId") { _, context in
            WireJSON.response(await store.lookUpOrder(try context.parameters.require("orderId")))
        }

        inApps.put("v2/transactions/consumption/:transactionId") { _, context in
            try await store.sendConsumptionInformation(try context.parameters.require("transactionId"), body: context.body)
            return Response(status: .accepted)
        }

        inApps.get("v2/refund/lookup/:transactionId") { request, context in
            let id = try context.parameters.require("transactionId")
            return WireJSON.response(try await store.refundHistory(id, revision: request.uri.queryParameters.get("revision")))
        }
        // Not Apple's: billingd's local mode acts out a notification (`billingd appstore trigger`).
        inApps.post("v1/test_helpers/billingd/trigger") { _, context in
            guard let body = try? JSONDecoder().decode(FakeAppStore.TriggerRequest.self, from: Data(context.body)) else {
                throw AppStoreFake.APIError.generalBadRequest
            }
            return WireJSON.response(try await store.trigger(body))
        }
        return router
    }
}
