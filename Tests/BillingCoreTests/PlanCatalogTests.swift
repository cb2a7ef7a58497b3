import BillingCore
import Foundation
import Testing

/// Decodes a catalog document from JSON (the same model the YAML loader decodes into) and
/// validates it.
func planCatalog(_ json: String) throws -> PlanCatalog {
    do {
        return try PlanCatalog(document: JSONDecoder().decode(PlanCatalogDocument.self, from: Data(json.utf8)))
    } catch let error as DecodingError {
        throw PlanCatalogError(decoding: error)
    }
}

/// The problem a catalog document has, or nil when it is valid.
func planCatalogProblem(_ json: String) -> PlanCatalogError? {
    do {
        _ = try planCatalog(json)
        return nil
    } catch let error as PlanCatalogError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

/// A valid catalog with `free` and `pro`, where `pro` has the given members (JSON fragment,
/// without braces) instead of the usual ones.
private func catalogWithPro(_ members: String) -> String {
    """
    {"tiers": [
      {"id": "free", "name": "Free", "rank": 0, "limits": {"projects": 3}},
      {"id": "pro", "name": "Pro", "rank": 10, \(members)}
    ]}
    """
}

@Suite("Plan catalog: model and validation")
struct PlanCatalogTests {
    static let valid = """
        {"version": 1, "default_tier": "free", "tiers": [
          {"id": "free", "name": "Free", "rank": 0, "features": ["read"], "limits": {"projects": 3}},
          {"id": "pro", "name": "Pro", "rank": 10, "description": "For pros",
           "stripe": {"prices": [{"lookup_key": "pro_monthly", "interval": "month"}, {"id": "price_ProYearly", "interval": "year"},
                                 {"id": "price_Legacy", "lookup_key": "pro_legacy"}],
                      "products": ["prod_Pro"]},
           "features": ["read", "export"],
           "limits": {"projects": 100, "storage": "unlimited", "seats": "quantity", "storage_gb": {"per_quantity": 5}},
           "past_due_grace_days": 7},
          {"id": "team", "name": "Team", "rank": 20, "stripe": {"prices": [{"id": "price_Team"}]}, "past_due_grace_days": "unlimited"}
        ]}
        """

    @Test("A valid catalog keeps every member of every tier")
    func validCatalog() throws {
        let catalog = try planCatalog(Self.valid)
        #expect(catalog.tiers.map(\.id) == ["free", "pro", "team"])
        #expect(catalog.defaultTier.id == "free")
        let pro = try #require(catalog.tier(id: "pro"))
        #expect(pro.name == "Pro")
        #expect(pro.rank == 10)
        #expect(pro.description == "For pros")
        #expect(pro.prices == [
            PlanPrice(lookupKey: "pro_monthly", interval: .month), PlanPrice(id: "price_ProYearly", interval: .year),
            PlanPrice(id: "price_Legacy", lookupKey: "pro_legacy"),
        ])
        #expect(pro.products == ["prod_Pro"])
        #expect(pro.features == ["read", "export"])
        #expect(Set(pro.limits) == [
            PlanLimit(key: "projects", value: .count(100)), PlanLimit(key: "storage", value: .unlimited),
            PlanLimit(key: "seats", value: .perQuantity(1)), PlanLimit(key: "storage_gb", value: .perQuantity(5)),
        ])
        #expect(pro.pastDueGrace == .days(7))
        #expect(catalog.tier(id: "team")?.pastDueGrace == .unlimited)
        #expect(catalog.tier(id: "free")?.pastDueGrace == .days(0))
        #expect(pro.price(for: .year) == PlanPrice(id: "price_ProYearly", interval: .year))
        #expect(pro.price(for: .week) == nil)
    }

    @Test("A price grants its tier by id, then lookup key, then product")
    func matching() throws {
        let catalog = try planCatalog(Self.valid)
        #expect(catalog.tier(price: "price_ProYearly", lookupKey: nil, product: nil)?.id == "pro")
        #expect(catalog.tier(price: "price_Other", lookupKey: "pro_monthly", product: nil)?.id == "pro")
        #expect(catalog.tier(price: "price_Other", lookupKey: "other", product: "prod_Pro")?.id == "pro")
        #expect(catalog.tier(price: "price_Team", lookupKey: "pro_monthly", product: "prod_Pro")?.id == "team")
        #expect(catalog.tier(price: "price_Other", lookupKey: "other", product: "prod_Other") == nil)
        #expect(catalog.tier(price: nil, lookupKey: nil, product: nil) == nil)
    }

    @Test("An App Store product is an id, or an id with the period it renews for")
    func appStoreProductPeriods() throws {
        let catalog = try planCatalog(catalogWithPro(
            #""app_store": {"products": ["com.example.pro.monthly", {"id": "com.example.pro.yearly", "period": "P1Y"}, {"id": "com.example.pro.weekly"}]}"#))
        let pro = try #require(catalog.tier(id: "pro"))
        #expect(pro.appStoreProducts == ["com.example.pro.monthly", "com.example.pro.yearly", "com.example.pro.weekly"])
        #expect(catalog.tier(appStoreProduct: "com.example.pro.yearly")?.id == "pro")
        #expect(catalog.period(appStoreProduct: "com.example.pro.yearly") == .oneYear)
        #expect(catalog.period(appStoreProduct: "com.example.pro.monthly") == nil)
        #expect(catalog.period(appStoreProduct: "com.example.pro.weekly") == nil)
        #expect(catalog.period(appStoreProduct: "com.example.other") == nil)
        for period in AppStorePeriod.allCases {
            let catalog = try planCatalog(catalogWithPro(#""app_store": {"products": [{"id": "p", "period": "\#(period.rawValue)"}]}"#))
            #expect(catalog.period(appStoreProduct: "p") == period)
        }
    }

    @Test("sample_content_provided is the tier's, for each of its App Store products; false when not given or not in the catalog")
    func sampleContentProvided() throws {
        let catalog = try planCatalog("""
            {"tiers": [
              {"id": "free", "name": "Free", "rank": 0},
              {"id": "pro", "name": "Pro", "rank": 10,
               "app_store": {"products": ["com.example.pro.monthly", {"id": "com.example.pro.yearly", "period": "P1Y"}], "sample_content_provided": true}},
              {"id": "max", "name": "Max", "rank": 20, "app_store": {"products": ["com.example.max.monthly"], "sample_content_provided": false}},
              {"id": "team", "name": "Team", "rank": 30, "app_store": {"products": ["com.example.team.monthly"]}}
            ]}
            """)
        #expect(catalog.tier(id: "pro")?.appStoreSampleContentProvided == true)
        #expect(catalog.sampleContentProvided(appStoreProduct: "com.example.pro.monthly"))
        #expect(catalog.sampleContentProvided(appStoreProduct: "com.example.pro.yearly"))
        #expect(!catalog.sampleContentProvided(appStoreProduct: "com.example.max.monthly"))
        #expect(!catalog.sampleContentProvided(appStoreProduct: "com.example.team.monthly"))
        #expect(!catalog.sampleContentProvided(appStoreProduct: "com.example.coins.100"))
        #expect(!PlanCatalog.freeOnly.sampleContentProvided(appStoreProduct: "com.example.pro.monthly"))
    }

    @Test("Without a catalog file there is one tier, free, with nothing in it")
    func freeOnly() {
        let catalog = PlanCatalog.freeOnly
        #expect(catalog.tiers.map(\.id) == ["free"])
        #expect(catalog.defaultTier.features.isEmpty && catalog.defaultTier.limits.isEmpty)
    }

    @Test("default_tier names another tier")
    func otherDefaultTier() throws {
        let catalog = try planCatalog(#"{"default_tier": "basic", "tiers": [{"id": "basic", "name": "Basic", "rank": 1}]}"#)
        #expect(catalog.defaultTier.id == "basic")
    }

    @Test("An App Store product's consumption_meter names a counter of the catalog; the product then answers its meter and its tier's limit")
    func consumptionMeter() throws {
        func catalog(meters: String, product: String) -> String {
            """
            {"meters": [\(meters)],
             "tiers": [
              {"id": "free", "name": "Free", "rank": 0, "limits": {"exports": 0, "seats": 1}},
              {"id": "pro", "name": "Pro", "rank": 10, "limits": {"exports": 200, "seats": 5},
               "app_store": {"products": ["com.example.pro.yearly", \(product)]}}
            ]}
            """
        }
        let counter = #"{"id": "exports", "kind": "counter", "limit": "exports"}"#
        let gauge = #"{"id": "seats_used", "kind": "gauge", "limit": "seats"}"#
        let parsed = try planCatalog(catalog(meters: counter, product: #"{"id": "com.example.pro.monthly", "consumption_meter": "exports"}"#))
        let metered = try #require(parsed.consumptionMeter(appStoreProduct: "com.example.pro.monthly"))
        #expect(metered.meter.id == "exports" && metered.limit == .count(200))
        #expect(parsed.consumptionMeter(appStoreProduct: "com.example.pro.yearly") == nil)
        #expect(parsed.consumptionMeter(appStoreProduct: "com.example.other") == nil)

        let unknown = try #require(planCatalogProblem(catalog(meters: counter, product: #"{"id": "com.example.pro.monthly", "consumption_meter": "export"}"#)))
        #expect(unknown.pathDescription == "tiers[1].app_store.products[1].consumption_meter")
        #expect(unknown.message == #"no meter has the id "export"; name a counter of the catalog's meters (exports) or remove consumption_meter"#)
        let level = try #require(planCatalogProblem(catalog(
            meters: counter + ", " + gauge, product: #"{"id": "com.example.pro.monthly", "consumption_meter": "seats_used"}"#)))
        #expect(level.pathDescription == "tiers[1].app_store.products[1].consumption_meter")
        #expect(level.message.hasPrefix("seats_used is a gauge"))
    }

    @Test("Each problem is reported with the path of its key and what is expected", arguments: [
        // The default tier.
        (#"{"tiers": [{"id": "pro", "name": "Pro", "rank": 1}]}"#, "default_tier",
         #"no tier has the id "free"; users without a subscription get the default tier, so add one (id: free, rank below the paid tiers, no Stripe prices) or set default_tier to one of: pro"#),
        (#"{"default_tier": "basic", "tiers": [{"id": "free", "name": "Free", "rank": 0}]}"#, "default_tier",
         #"no tier has the id "basic"; users without a subscription get the default tier, so add one (id: basic, rank below the paid tiers, no Stripe prices) or set default_tier to one of: free"#),
        (#"{"tiers": []}"#, "tiers", "the catalog has no tiers; it needs at least the default tier (id: free)"),
        (#"{"tiers": [{"id": "free", "name": "Free", "rank": 0, "limits": {"seats": "quantity"}}]}"#, "tiers[0].limits.seats",
         "the default tier (free) is what users without a subscription get, so it has no quantity to count; give a number or unlimited"),
        // Duplicates across tiers.
        (#"{"tiers": [{"id": "free", "name": "Free", "rank": 0}, {"id": "pro", "name": "Pro", "rank": 0}]}"#, "tiers[1].rank",
         "0 is already the rank of tiers[0] (free); ranks decide which tier a user with several subscriptions gets, so they must differ"),
        (#"{"tiers": [{"id": "free", "name": "Free", "rank": 0}, {"id": "free", "name": "Again", "rank": 1}]}"#, "tiers[1].id",
         #""free" is already the id of tiers[0] (free); tier ids must be unique"#),
        (#"{"tiers": [{"id": "free", "name": "Free", "rank": 0, "stripe": {"prices": [{"id": "price_A"}]}}, {"id": "pro", "name": "Pro", "rank": 1, "stripe": {"prices": [{"id": "price_B"}, {"id": "price_A"}]}}]}"#,
         "tiers[1].stripe.prices[1].id", "price price_A already grants tiers[0] (free); a price can grant only one tier"),
        (#"{"tiers": [{"id": "free", "name": "Free", "rank": 0}, {"id": "pro", "name": "Pro", "rank": 1, "stripe": {"prices": [{"lookup_key": "k"}, {"lookup_key": "k"}]}}]}"#,
         "tiers[1].stripe.prices[1].lookup_key", "lookup key k already grants tiers[1] (pro); a lookup key can grant only one tier"),
        (#"{"tiers": [{"id": "free", "name": "Free", "rank": 0, "stripe": {"products": ["prod_X"]}}, {"id": "pro", "name": "Pro", "rank": 1, "stripe": {"products": ["prod_X"]}}]}"#,
         "tiers[1].stripe.products[0]", "product prod_X already grants tiers[0] (free); a product can grant only one tier"),
        // One tier's members.
        (catalogWithPro(#""features": ["export", "export"]"#), "tiers[1].features[1]", #""export" is listed twice"#),
        (catalogWithPro(#""features": ["has space"]"#), "tiers[1].features[0]",
         #""has space" is not a feature key; expected 1 to 100 letters, digits, _ . : or -, starting with a letter or digit"#),
        (catalogWithPro(#""limits": {"-bad": 1}"#), "tiers[1].limits.-bad",
         #""-bad" is not a limit key; expected 1 to 100 letters, digits, _ . : or -, starting with a letter or digit"#),
        (#"{"tiers": [{"id": "free", "name": "Free", "rank": 0}, {"id": "Pro Plan", "name": "Pro", "rank": 1}]}"#, "tiers[1].id",
         #""Pro Plan" is not a tier id; expected 1 to 64 lowercase letters, digits, _ or -, starting with a letter or digit"#),
        (#"{"tiers": [{"id": "free", "name": " ", "rank": 0}]}"#, "tiers[0].name", #"is empty; expected the tier's display name, e.g. "Pro""#),
        (catalogWithPro(#""stripe": {"prices": [{"id": "prod_Pro"}]}"#), "tiers[1].stripe.prices[0].id",
         #""prod_Pro" is a product id; list products under stripe.products, prices here"#),
        (catalogWithPro(#""stripe": {"products": ["price_Pro"]}"#), "tiers[1].stripe.products[0]",
         #""price_Pro" is a price id; list prices under stripe.prices, products here"#),
        (catalogWithPro(#""stripe": {"prices": [{"id": "price with space"}]}"#), "tiers[1].stripe.prices[0].id",
         #""price with space" is not a Stripe price id; expected an id such as price_1QabcXYZ"#),
        (catalogWithPro(#""stripe": {"prices": [{"lookup_key": "two words"}]}"#), "tiers[1].stripe.prices[0].lookup_key",
         #""two words" is not a lookup key; expected 1 to 200 characters without spaces or control characters"#),
        (catalogWithPro(#""stripe": {"prices": [{"interval": "month"}]}"#), "tiers[1].stripe.prices[0]",
         "a price needs id (price_…) or lookup_key, or both"),
        (catalogWithPro(#""stripe": {"prices": [{"lookup_key": "pro_m", "interval": "monthly"}]}"#), "tiers[1].stripe.prices[0].interval",
         #""monthly" is not an interval; expected month, year, week or day"#),
        // Limits.
        (catalogWithPro(#""limits": {"projects": -1}"#), "tiers[1].limits.projects",
         "-1 is negative; expected a whole number (0 or more), unlimited, quantity (the subscription's quantity, e.g. seats) or {per_quantity: N}"),
        (catalogWithPro(#""limits": {"projects": 1.5}"#), "tiers[1].limits.projects",
         "not a limit; expected a whole number (0 or more), unlimited, quantity (the subscription's quantity, e.g. seats) or {per_quantity: N}"),
        (catalogWithPro(#""limits": {"projects": "lots"}"#), "tiers[1].limits.projects",
         #""lots" is not a limit; expected a whole number (0 or more), unlimited, quantity (the subscription's quantity, e.g. seats) or {per_quantity: N}"#),
        (catalogWithPro(#""limits": {"projects": true}"#), "tiers[1].limits.projects",
         "not a limit; expected a whole number (0 or more), unlimited, quantity (the subscription's quantity, e.g. seats) or {per_quantity: N}"),
        (catalogWithPro(#""limits": {"storage": {"per_quantity": 0}}"#), "tiers[1].limits.storage.per_quantity",
         "0 is not a factor; expected a whole number of 1 or more"),
        (catalogWithPro(#""limits": {"storage": {"per_seat": 5}}"#), "tiers[1].limits.storage.per_seat", "unknown key; expected one of: per_quantity"),
        (catalogWithPro(#""limits": ["projects"]"#), "tiers[1].limits", "expected a mapping (key: value lines)"),
        // Grace.
        (catalogWithPro(#""past_due_grace_days": 400"#), "tiers[1].past_due_grace_days",
         "400 is out of range; expected a number of days from 0 (no grace: access ends when a payment fails) to 366, or unlimited (as long as Stripe keeps retrying)"),
        (catalogWithPro(#""past_due_grace_days": "forever""#), "tiers[1].past_due_grace_days",
         #""forever" is not a grace period; expected a number of days from 0 (no grace: access ends when a payment fails) to 366, or unlimited (as long as Stripe keeps retrying)"#),
        // Unknown keys, at every level.
        (#"{"tiers": [{"id": "free", "name": "Free", "rank": 0}], "tier": []}"#, "tier", "unknown key; expected one of: version, default_tier, tiers, meters"),
        (catalogWithPro(#""limts": {"projects": 1}"#), "tiers[1].limts",
         "unknown key; expected one of: id, name, rank, description, stripe, app_store, features, limits, past_due_grace_days"),
        (catalogWithPro(#""stripe": {"price": [{"id": "price_A"}]}"#), "tiers[1].stripe.price", "unknown key; expected one of: prices, products"),
        // App Store products.
        (catalogWithPro(#""app_store": {"product": ["com.example.pro"]}"#), "tiers[1].app_store.product",
         "unknown key; expected one of: products, subscription_group, sample_content_provided"),
        (catalogWithPro(#""app_store": {"products": ["com.example.pro"], "sample_content_provided": "yes"}"#), "tiers[1].app_store.sample_content_provided",
         "not true or false; expected true (the app offered a free sample, a trial or a description of the content before purchase) or false"),
        (catalogWithPro(#""app_store": {"products": ["com.example.pro"], "sample_content_provided": 1}"#), "tiers[1].app_store.sample_content_provided",
         "not true or false; expected true (the app offered a free sample, a trial or a description of the content before purchase) or false"),
        (catalogWithPro(#""app_store": {"products": ["com example pro"]}"#), "tiers[1].app_store.products[0]",
         #""com example pro" is not an App Store product id; expected the id from App Store Connect, such as com.example.pro.monthly (letters, digits, . _ and -)"#),
        (catalogWithPro(#""app_store": {"products": ["com.example.pro", "com.example.pro"]}"#), "tiers[1].app_store.products[1]",
         "App Store product com.example.pro already grants tiers[1] (pro); a product can grant only one tier"),
        (catalogWithPro(#""app_store": {"products": [{"id": "com.example.pro", "period": "P2W"}]}"#), "tiers[1].app_store.products[0].period",
         #""P2W" is not a subscription period; expected P1W, P1M, P2M, P3M, P6M or P1Y"#),
        (catalogWithPro(#""app_store": {"products": [{"id": "com.example.pro", "length": "P1M"}]}"#), "tiers[1].app_store.products[0].length",
         "unknown key; expected one of: id, period, promotional_offers, eligibility, consumption_meter"),
        (catalogWithPro(#""app_store": {"products": [{"period": "P1M"}]}"#), "tiers[1].app_store.products[0].id", "is missing; it is required"),
        (catalogWithPro(#""app_store": {"products": [7]}"#), "tiers[1].app_store.products[0]",
         "not a product; expected a product id or {id: com.example.pro.monthly, period: P1M}"),
        (catalogWithPro(#""stripe": {"prices": [{"id": "price_A", "amount": 2900}]}"#), "tiers[1].stripe.prices[0].amount",
         "unknown key; expected one of: id, lookup_key, interval"),
        // Missing keys and wrong types.
        (#"{"default_tier": "free"}"#, "tiers", "is missing; it is required"),
        (#"{"tiers": [{"id": "free", "rank": 0}]}"#, "tiers[0].name", "is missing; it is required"),
        (#"{"tiers": [{"name": "Free", "rank": 0}]}"#, "tiers[0].id", "is missing; it is required"),
        (#"{"tiers": [{"id": "free", "name": "Free"}]}"#, "tiers[0].rank", "is missing; it is required"),
        (#"{"tiers": [{"id": "free", "name": "Free", "rank": "first"}]}"#, "tiers[0].rank", "expected a whole number"),
        (#"{"tiers": [{"id": "free", "name": "Free", "rank": 0, "features": "read"}]}"#, "tiers[0].features", "expected a list"),
        (#"{"tiers": {"id": "free"}}"#, "tiers", "expected a list"),
        (#"{"version": 2, "tiers": [{"id": "free", "name": "Free", "rank": 0}]}"#, "version",
         "2 is not a catalog version this billingd reads; expected 1"),
    ])
    func problems(json: String, path: String, message: String) throws {
        let problem = try #require(planCatalogProblem(json), "\(json) should be refused")
        #expect(problem.pathDescription == path)
        #expect(problem.message == message)
        #expect(problem.description == "\(path): \(message)")
    }

    @Test("Tiers built in code are validated the same way")
    func tiersInCode() {
        #expect(throws: PlanCatalogError.self) {
            try PlanCatalog(tiers: [PlanTier(id: "free", name: "Free", rank: 0, pastDueGrace: .days(-1))])
        }
        #expect(throws: PlanCatalogError.self) {
            try PlanCatalog(tiers: [PlanTier(id: "free", name: "Free", rank: 0), PlanTier(id: "pro", name: "Pro", rank: 0)])
        }
    }

    @Test("Paths render keys and list indices")
    func pathRendering() {
        #expect(PlanCatalogError.describe([]) == "(the document)")
        #expect(PlanCatalogError.describe([.key("tiers"), .index(2), .key("limits"), .key("seats")]) == "tiers[2].limits.seats")
        #expect(PlanCatalogError.describe([.index(0)]) == "[0]")
    }
}
