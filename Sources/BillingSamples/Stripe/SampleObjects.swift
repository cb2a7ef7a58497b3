import BillingCore

/// Stripe's example of every API object by resource name; realistic, coherent values for the ones
/// billingd keeps.
///
/// The data is `sample-objects.json` (written by `scripts/gen-fixtures` from Stripe's fixtures),
/// compiled into the binary with `.embedInCode`, so nothing needs to sit next to the executable.
public enum SampleObjects {
    /// Each resource's example as JSON text, exactly the bytes the file holds for it.
    public static let json: [String: String] = {
        let bytes = PackageResources.sample_objects_json
        // The file is generated and checked by the tests: one that does not read is a build defect.
        guard let members = RawObjectLocator.memberRanges(in: bytes) else {
            preconditionFailure("sample-objects.json is not one JSON object with each resource named once")
        }
        return members.mapValues { String(decoding: bytes[$0], as: UTF8.self) }
    }()
}
