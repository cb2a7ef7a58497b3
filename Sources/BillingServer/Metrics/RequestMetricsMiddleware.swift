import HTTPTypes
import Hummingbird

/// Counts every HTTP request by route pattern (never the raw path, so ids in URLs do not
/// multiply series), method and status, and records its latency.
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: BillingMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        do {
            let response = try await next(request, context)
            record(request, context: context, status: response.status.code, started: started)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            record(request, context: context, status: status, started: started)
            throw error
        }
    }

    private func record(_ request: Request, context: Context, status: Int, started: ContinuousClock.Instant) {
        let route = context.endpointPath ?? "unmatched"
        let dimensions = [("route", route), ("method", request.method.rawValue)]
        metrics.count("billingd_http_requests_total", dimensions: dimensions + [("status", String(status))])
        metrics.time("billingd_http_request_seconds", ContinuousClock.now - started, dimensions: dimensions)
    }
}
