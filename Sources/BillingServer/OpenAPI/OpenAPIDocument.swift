import Hummingbird
import NIOCore

/// `GET /openapi.json`: the OpenAPI 3.1 description of every route billingd serves (the service
/// API, the webhook endpoints, health and metrics), so app teams can generate clients. It is
/// kept in the repository as `OpenAPI/openapi.json` and compiled in, so a deployed binary needs
/// no file beside it; a test holds it to the router's routes, and scripts/test runs schemathesis
/// against a running billingd with it. No token: it describes the API, it opens nothing.
enum OpenAPIDocument {
    static var bytes: [UInt8] { PackageResources.openapi_json }

    static func addRoutes<Context: RequestContext>(to router: Router<Context>) {
        let document = ByteBuffer(bytes: bytes)
        router.get("/openapi.json") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-cache"],
                body: .init(byteBuffer: document))
        }
    }
}
