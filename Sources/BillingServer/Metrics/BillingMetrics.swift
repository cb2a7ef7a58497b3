import BillingCore
import CoreMetrics
import Prometheus

/// billingd's metrics, recorded through swift-metrics into a Prometheus registry that
/// `GET /metrics` renders. Built per process (no global bootstrap), so tests get their own.
public struct BillingMetrics: Sendable {
    public let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) {
        self.registry = registry
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
            .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
        ]
        self.factory = factory
    }

    /// Outcome labels of a webhook delivery.
    public enum DeliveryOutcome: String, Sendable {
        case accepted, duplicate, badSignature = "bad_signature", staleTimestamp = "stale_timestamp"
        case malformed, tooLarge = "too_large", storeFailed = "store_failed"
    }

    /// Counts one webhook delivery by outcome and event type: one of Stripe's types
    /// (``StripeEventTypes``) by name, any other as `other`, none read as `unknown`. A signed
    /// sender could otherwise make one series per distinct type and grow the exposition without end.
    public func delivery(_ outcome: DeliveryOutcome, eventType: String?) {
        Counter(
            label: "billingd_webhook_deliveries_total",
            dimensions: [("outcome", outcome.rawValue), ("type", Self.typeLabel(eventType))],
            factory: factory
        ).increment()
    }

    /// The `type` label of an event type: bounded by Stripe's list.
    static func typeLabel(_ eventType: String?) -> String {
        guard let eventType else { return "unknown" }
        return StripeEventTypes.all.contains(eventType) ? eventType : "other"
    }

    /// Records how long a webhook delivery took from first byte to the response.
    public func ingestLatency(_ duration: Duration) {
        CoreMetrics.Timer(label: "billingd_webhook_ingest_seconds", factory: factory)
            .recordNanoseconds(duration.nanoseconds)
    }

    /// Sets a gauge (inbox depth, age of the oldest pending event, reconcile figures …).
    public func gauge(_ name: String, _ value: Double, dimensions: [(String, String)] = []) {
        Gauge(label: name, dimensions: dimensions, factory: factory).record(value)
    }

    /// Adds to a counter.
    public func count(_ name: String, by amount: Int = 1, dimensions: [(String, String)] = []) {
        Counter(label: name, dimensions: dimensions, factory: factory).increment(by: amount)
    }

    /// Records a duration into a histogram.
    public func time(_ name: String, _ duration: Duration, dimensions: [(String, String)] = []) {
        CoreMetrics.Timer(label: name, dimensions: dimensions, factory: factory).recordNanoseconds(duration.nanoseconds)
    }

    /// The Prometheus text exposition of every metric.
    public func render() -> [UInt8] {
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return buffer
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
