/// The Stripe API version billingd is written against and pins on its API calls; events of
/// another version are still accepted, and counted.
public enum StripeAPIVersion {
    public static let pinned = "2026-10-28.clover"
}
