import HTTPTypes

extension HTTPField.Name {
    static let requestID = Self("Request-Id")!
    static let stripeVersion = Self("Stripe-Version")!
    static let stripeAccount = Self("Stripe-Account")!
    static let idempotencyKey = Self("Idempotency-Key")!
    static let idempotentReplayed = Self("Idempotent-Replayed")!
    static let originalRequest = Self("Original-Request")!
    static let stripeShouldRetry = Self("Stripe-Should-Retry")!
    static let stripeSignature = Self("Stripe-Signature")!
}
