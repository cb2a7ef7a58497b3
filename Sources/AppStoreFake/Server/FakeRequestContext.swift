import Hummingbird
import NIOCore

/// The request context of the fake's router: Hummingbird's core context and the connection's
/// channel, so that a `.dropConnection` fault can close it.
struct FakeRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    let channel: any Channel
    /// The request's body, read once by the middleware under its size limit.
    var body: [UInt8] = []

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
