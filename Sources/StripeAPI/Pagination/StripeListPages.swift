import APITransport
import Foundation

/// One element of a list's `data`, as the exact bytes Stripe sent.
public struct StripeObjectJSON: Sendable {
    /// The object's top-level `id`, "" when it has none.
    public let id: String
    /// A slice of the page's body: keeping it keeps that page's buffer alive.
    public let bytes: ArraySlice<UInt8>

    public init(id: String, bytes: ArraySlice<UInt8>) {
        self.id = id
        self.bytes = bytes
    }

    /// Decodes the object with a plain `JSONDecoder`; throws `DecodingError`.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(type, from: Data(bytes))
    }
}

/// One page of a list.
public struct StripeListPage: Sendable {
    public let objects: [StripeObjectJSON]
    public let hasMore: Bool
    /// The `Date` header of this page's answer, as Unix seconds.
    public let date: Int64?
    public let requestID: String?

    public init(objects: [StripeObjectJSON], hasMore: Bool, date: Int64?, requestID: String?) {
        self.objects = objects
        self.hasMore = hasMore
        self.date = date
        self.requestID = requestID
    }

    /// Splits the answer to a list call into its objects; `.decoding` when it is not a list.
    public init(response: StripeResponse) throws(StripeError) {
        let scan: ListScanner.Result
        do {
            scan = try ListScanner.scan(response.body)
        } catch {
            throw StripeError(
                kind: .decoding, status: response.status,
                message: "the answer is not a Stripe list: \(error.reason) at byte \(error.offset)",
                requestID: response.requestID, method: response.method, path: response.path
            )
        }
        self.init(
            objects: scan.elements.map { StripeObjectJSON(id: $0.id, bytes: response.body[$0.range]) },
            hasMore: scan.hasMore, date: response.date, requestID: response.requestID
        )
        nextPage = scan.nextPage
    }

    /// `next_page` of a search result.
    var nextPage: String?
}

/// The pages of a Stripe list, fetched one at a time as the consumer asks for the next.
///
/// The first request carries the caller's parameters plus `limit=100` unless the caller set one.
/// Later requests add `starting_after=<last id>` (or `ending_before=<first id>` when the caller
/// paged backwards with `ending_before`, or `page=<next_page>` for `/search`) while `has_more`.
/// Iteration throws only `StripeError`.
public struct StripeListPages: AsyncSequence, Sendable {
    public typealias Element = StripeListPage
    public typealias Failure = StripeError

    let client: StripeClient
    let path: String
    let parameters: StripeParameters
    let account: String?
    let priority: RequestPriority

    public func makeAsyncIterator() -> Iterator {
        var first = parameters
        if first["limit"] == nil { first["limit"] = 100 }
        return Iterator(pages: self, next: first)
    }

    public struct Iterator: AsyncIteratorProtocol, Sendable {
        public typealias Element = StripeListPage
        public typealias Failure = StripeError

        let pages: StripeListPages
        /// The parameters of the next request, nil when the list is exhausted.
        var next: StripeParameters?

        public mutating func next() async throws(StripeError) -> StripeListPage? {
            try await next(isolation: nil)
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(StripeError) -> StripeListPage? {
            guard let parameters = next else { return nil }
            next = nil
            let response = try await pages.client.send(
                .get, pages.path, parameters: parameters, account: pages.account, priority: pages.priority
            )
            let page = try StripeListPage(response: response)
            guard page.hasMore else { return page }
            var following = parameters
            if let nextPage = page.nextPage {
                following["page"] = .string(nextPage)
            } else if parameters["ending_before"] != nil {
                guard let first = page.objects.first else { return page }
                following["ending_before"] = .string(try cursor(first.id, response))
            } else {
                guard let last = page.objects.last else { return page }
                following["starting_after"] = .string(try cursor(last.id, response))
            }
            next = following
            return page
        }

        private func cursor(_ id: String, _ response: StripeResponse) throws(StripeError) -> String {
            guard id.isEmpty else { return id }
            throw StripeError(
                kind: .decoding, status: response.status,
                message: "has_more is true but the page's edge object has no id to continue from",
                requestID: response.requestID, method: .get, path: response.path
            )
        }
    }
}
