import Foundation
import StripeAPI

/// The Stripe client's list scanner, which cuts each element of a list page out of the body
/// without re-encoding it.
enum StripeListTarget {
    static func run(_ body: [UInt8]) -> FuzzVerdict {
        let result: ListScanner.Result
        do {
            result = try ListScanner.scan(body)
        } catch {
            return .rejected
        }
        var previousEnd = 0
        for element in result.elements {
            let range = element.range
            guard range.lowerBound >= previousEnd, range.upperBound <= body.count, range.count >= 2,
                body[range.lowerBound] == UInt8(ascii: "{"), body[range.upperBound - 1] == UInt8(ascii: "}")
            else {
                return .violated("element range \(range) is not an object inside the body, after the one before")
            }
            previousEnd = range.upperBound
        }
        // Where Foundation reads the body as JSON, each element cut out is a JSON object too.
        if (try? JSONSerialization.jsonObject(with: Data(body))) != nil {
            for element in result.elements
            where (try? JSONSerialization.jsonObject(with: Data(body[element.range]))) as? [String: Any] == nil {
                return .violated("element \(element.range) of a valid JSON list is not a JSON object on its own")
            }
        }
        return .accepted
    }
}
