import Hummingbird
import NIOCore

/// The request context of the fake's router: Hummingbird's core context, the connection's channel
/// (so that a `.dropConnection` fault can close it), and the request as the middleware decoded it.
struct FakeRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel
    /// Set by ``StripeWireMiddleware`` once the request is authenticated and its parameters read.
    var apiRequest: APIRequest?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
