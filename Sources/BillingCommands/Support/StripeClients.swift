import ArgumentParser
import BillingServer
import Logging
import StripeAPI

/// The Stripe client of a command that cannot run without one.
enum StripeClients {
    /// Throws a configuration failure that says what to set, for what, when there is no API key.
    /// - Parameter purpose: what the command does with the key and the access a restricted key
    ///   needs, e.g. "creates Checkout and portal sessions: a restricted key (rk_…) needs write
    ///   access to customers, Checkout Sessions and portal sessions".
    static func make(_ settings: Settings, logger: Logger, purpose: String, observer: (any StripeClientObserver)? = nil) throws -> StripeClient {
        guard let client = settings.stripe.client(logger: logger, observer: observer) else {
            throw CommandFailure.configuration("STRIPE_API_KEY is not set; this command \(purpose). Set it to a secret key (sk_…) or such a restricted key.")
        }
        return client
    }
}
