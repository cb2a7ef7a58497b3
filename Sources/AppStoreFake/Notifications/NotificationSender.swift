import Foundation
import Logging

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Sends queued notifications to the notification URL one at a time, in queue order, as
/// `POST {"signedPayload": "…"}`; runs until the store stops waking it.
struct NotificationSender: Sendable {
    let store: FakeAppStore
    let logger: Logger
    /// How long one send may take before it counts as `TIMED_OUT`.
    var timeout: TimeInterval = 10

    func run() async {
        let session = URLSession(configuration: .ephemeral)
        defer { session.finishTasksAndInvalidate() }
        for await _ in store.deliveryWakeups {
            while !Task.isCancelled, let (url, delay, batch) = await store.takeDeliveries() {
                for delivery in batch {
                    if delay > .zero { try? await Task.sleep(for: delay) }
                    let (result, status) = await send(delivery, to: url, session: session)
                    await store.finishDelivery(of: delivery.uuid, result: result, httpStatus: status)
                }
            }
        }
    }

    private func send(
        _ delivery: FakeAppStore.Delivery, to url: String, session: URLSession
    ) async -> (AppStoreFake.SendAttemptResult, Int?) {
        guard let url = URL(string: url) else { return (.other, nil) }
        var request = URLRequest(url: url, timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.httpBody = Data(delivery.body)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("App Store Server Notifications (billingd appstore-fake)", forHTTPHeaderField: "User-Agent")
        do {
            let (_, response) = try await session.data(for: request)
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            if (200..<300).contains(status) { return (.success, status) }
            logger.debug("notification refused", metadata: ["uuid": "\(delivery.uuid)", "status": "\(status)"])
            return (.unsuccessfulHTTPResponseCode, status)
        } catch let error as URLError {
            logger.debug("notification not delivered", metadata: ["uuid": "\(delivery.uuid)", "error": "\(error)"])
            switch error.code {
            case .timedOut: return (.timedOut, nil)
            case .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed: return (.socketIssue, nil)
            case .networkConnectionLost: return (.prematureClose, nil)
            case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate: return (.tlsIssue, nil)
            case .httpTooManyRedirects, .redirectToNonExistentLocation: return (.circularRedirect, nil)
            case .badServerResponse, .cannotParseResponse: return (.invalidResponse, nil)
            default: return (.noResponse, nil)
            }
        } catch {
            logger.debug("notification not delivered", metadata: ["uuid": "\(delivery.uuid)", "error": "\(error)"])
            return (.noResponse, nil)
        }
    }
}
