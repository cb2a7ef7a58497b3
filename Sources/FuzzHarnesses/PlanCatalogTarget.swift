import BillingCore
import BillingServer

/// The plan catalog loader (`BILLINGD_PLANS`): YAML, the document's shape, and the catalog's rules.
enum PlanCatalogTarget {
    static func run(_ input: [UInt8]) -> FuzzVerdict {
        // The loader reads a file only if it is UTF-8 text.
        guard let text = String(validating: input, as: UTF8.self) else { return .rejected }
        let catalog: PlanCatalog
        do {
            catalog = try PlanCatalogLoader.parse(text)
        } catch {
            return .rejected
        }
        guard catalog.tiers.contains(where: { $0.id == catalog.defaultTier.id }) else {
            return .violated("the default tier is not one of the catalog's tiers")
        }
        for tier in catalog.tiers where catalog.tier(id: tier.id)?.id != tier.id {
            return .violated("tier \(tier.id) cannot be found by its own id")
        }
        for meter in catalog.meters where catalog.meter(id: meter.id)?.id != meter.id {
            return .violated("meter \(meter.id) cannot be found by its own id")
        }
        return .accepted
    }
}
