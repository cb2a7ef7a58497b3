import Hummingbird
import NIOCore

/// billingd's request context: Hummingbird's basic one plus the client's address, which the
/// console's sign-in throttle counts failures by.
public struct BillingRequestContext: RequestContext, RemoteAddressRequestContext {
    public var coreContext: CoreRequestContextStorage
    public let remoteAddress: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }

    /// The client's IP address, without its port; "unknown" when there is none (tests).
    public var clientAddress: String {
        remoteAddress?.ipAddress ?? "unknown"
    }
}
