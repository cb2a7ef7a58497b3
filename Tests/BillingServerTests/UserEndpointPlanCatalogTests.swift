import BillingCore
import BillingServer
import BillingStore
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

private func loadError(_ yaml: String) -> PlanCatalogLoadError? {
    do {
        _ = try PlanCatalogLoader.parse(yaml, path: "plans.yaml")
        return nil
    } catch {
        return error
    }
}

@Suite("Plan catalog files (BILLINGD_PLANS, YAML)")
struct UserEndpointPlanCatalogTests {
    @Test("The example catalogs in Fixtures/plans load", arguments: [
        "free-pro-enterprise", "free-plus-storage", "seats-starter-growth-enterprise", "free-pro-team", "usage",
    ])
    func examples(name: String) throws {
        let catalog = try fixtureCatalog(name)
        #expect(catalog.tiers.count >= 2)
        #expect(catalog.tiers.dropFirst().allSatisfy { !$0.prices.isEmpty })
    }

    @Test("Free / Pro / Enterprise: item limit and refresh interval, in the file's order")
    func freeProEnterprise() throws {
        let catalog = try fixtureCatalog("free-pro-enterprise")
        #expect(catalog.tiers.map(\.id) == ["free", "pro", "enterprise"])
        let pro = try #require(catalog.tier(id: "pro"))
        #expect(pro.limits == [PlanLimit(key: "items_per_month", value: .count(5000)), PlanLimit(key: "refresh_interval_minutes", value: .count(15))])
        #expect(pro.price(for: .year)?.lookupKey == "pro_yearly")
        #expect(pro.pastDueGrace == .days(7))
        #expect(catalog.tier(id: "enterprise")?.limits.first == PlanLimit(key: "items_per_month", value: .unlimited))
        #expect(catalog.tier(price: "price_1EnterpriseLegacy49", lookupKey: nil, product: nil)?.id == "enterprise")
        #expect(catalog.tier(price: "price_Any", lookupKey: nil, product: "prod_ProFeedReader")?.id == "pro")
    }

    @Test("Free / Plus: 500 MB against 50 GB")
    func freePlus() throws {
        let catalog = try fixtureCatalog("free-plus-storage")
        #expect(catalog.defaultTier.limits.first == PlanLimit(key: "storage_mb", value: .count(500)))
        #expect(catalog.tier(id: "plus")?.limits.first == PlanLimit(key: "storage_mb", value: .count(51_200)))
    }

    @Test("Seat-based tiers resolve their limits from the subscription's quantity")
    func seats() throws {
        let catalog = try fixtureCatalog("seats-starter-growth-enterprise")
        #expect(catalog.defaultTier.id == "trial_expired")
        let subscription = LedgerSubscription(
            id: "sub_1", customer: "cus_1", status: .active,
            items: [.init(id: "si_1", lookupKey: "growth_seat_yearly", quantity: 12, interval: .year, currentPeriodEnd: 1_900_000_000)])
        let resolution = catalog.resolve([subscription], now: 1_800_000_000)
        #expect(resolution.plan == "growth")
        #expect(resolution.limits.map(\.key) == ["seats", "max_seats", "projects", "storage_gb"])
        #expect(resolution.limits.map(\.value) == [.count(12), .count(100), .unlimited, .count(240)])
        #expect(catalog.tier(id: "enterprise")?.pastDueGrace == .unlimited)
    }

    @Test("Free (2 connections) / Pro / Team per seat")
    func freeProTeam() throws {
        let catalog = try fixtureCatalog("free-pro-team")
        #expect(catalog.defaultTier.limits.first == PlanLimit(key: "connections", value: .count(2)))
        #expect(catalog.tier(id: "pro")?.prices.compactMap(\.interval) == [.month, .year])
        #expect(catalog.tier(id: "team")?.limits.first(where: { $0.key == "connections" })?.value == .perQuantity(10))
    }

    @Test("Errors name the file, the line and column, the key's path and what is expected", arguments: [
        ("""
         tiers:
           - id: free
             name: Free
             rank: 0
           - id: pro
             name: Pro
             rank: 10
             limts:
               projects: 5
         """,
         "Plan catalog (BILLINGD_PLANS) plans.yaml:8:5: tiers[1].limts: unknown key; expected one of: id, name, rank, description, stripe, app_store, features, limits, past_due_grace_days"),
        ("""
         tiers:
           - id: free
             name: Free
             rank: 0
             limits:
               projects: 5
               seats: many
         """,
         "Plan catalog (BILLINGD_PLANS) plans.yaml:7:7: tiers[0].limits.seats: \"many\" is not a limit; expected a whole number (0 or more), unlimited, quantity (the subscription's quantity, e.g. seats) or {per_quantity: N}"),
        ("""
         tiers:
           - id: free
             name: Free
             rank: 0
           - id: pro
             name: Pro
             rank: 0
         """,
         "Plan catalog (BILLINGD_PLANS) plans.yaml:7:5: tiers[1].rank: 0 is already the rank of tiers[0] (free); ranks decide which tier a user with several subscriptions gets, so they must differ"),
        ("""
         tiers:
           - id: pro
             name: Pro
             rank: 1
         """,
         "Plan catalog (BILLINGD_PLANS) plans.yaml:1:1: default_tier: no tier has the id \"free\"; users without a subscription get the default tier, so add one (id: free, rank below the paid tiers, no Stripe prices) or set default_tier to one of: pro"),
        ("""
         tiers:
           - id: free
             name: Free
             rank: 0
             stripe:
               prices:
                 - lookup_key: a
                 - lookup_key: a
         """,
         "Plan catalog (BILLINGD_PLANS) plans.yaml:8:11: tiers[0].stripe.prices[1].lookup_key: lookup key a already grants tiers[0] (free); a lookup key can grant only one tier"),
        ("""
         tiers:
           - id: free
             rank: 0
         """,
         "Plan catalog (BILLINGD_PLANS) plans.yaml:2:5: tiers[0].name: is missing; it is required"),
        ("""
         tiers:
           - id: free
             name: Free
             rank: first
         """,
         "Plan catalog (BILLINGD_PLANS) plans.yaml:4:5: tiers[0].rank: expected a whole number"),
        ("tiers: free\n", "Plan catalog (BILLINGD_PLANS) plans.yaml:1:1: tiers: expected a list"),
        ("", "Plan catalog (BILLINGD_PLANS) plans.yaml: the file is empty; it needs tiers: with at least the default tier (id: free)"),
    ])
    func errors(yaml: String, expected: String) {
        #expect(loadError(yaml)?.description == expected)
    }

    @Test("YAML that does not parse, or repeats a key, is refused with its line")
    func syntax() throws {
        let broken = try #require(loadError("tiers:\n  - id: free\n   name: Free\n"))
        #expect(broken.line == 3)
        #expect(broken.message.hasPrefix("not valid YAML:"))
        let duplicate = try #require(loadError("tiers:\n  - id: free\n    name: Free\n    rank: 0\n    rank: 1\n"))
        #expect(duplicate.message == "a key is written twice in the same mapping (rank); each key may appear once")
        #expect(duplicate.line != nil)
    }

    @Test("A missing file is named")
    func missingFile() {
        #expect(throws: PlanCatalogLoadError.self) { try PlanCatalogLoader.load(path: "/nonexistent/plans.yaml") }
        do {
            _ = try PlanCatalogLoader.load(path: "/nonexistent/plans.yaml")
        } catch {
            #expect(error.description == "Plan catalog (BILLINGD_PLANS) /nonexistent/plans.yaml: no such file; BILLINGD_PLANS must name a readable YAML plan catalog")
        }
    }

    @Test("A missing relative path says where it was looked for: the working directory differs between a shell, systemd and cron (issue 17 item 6)")
    func missingRelativeFile() {
        let name = "no-such-plans-\(UUID().uuidString).yaml"
        let directory = FileManager.default.currentDirectoryPath
        let error = #expect(throws: PlanCatalogLoadError.self) { try PlanCatalogLoader.load(path: name) }
        let message = error?.description ?? ""
        #expect(message.contains("relative to the working directory \(directory)"), "\(message)")
        #expect(message.contains(URL(fileURLWithPath: name).standardizedFileURL.path), "\(message)")
        #expect(message.contains("absolute path"), "\(message)")
    }

    @Test("Comments, flow style and anchors are plain YAML")
    func yamlFeatures() throws {
        let catalog = try PlanCatalogLoader.parse("""
            # comment
            tiers:
              - {id: free, name: Free, rank: 0, limits: &base {projects: 3}}   # flow style
              - id: pro
                name: "Pro (yearly or monthly)"
                rank: 10
                stripe: {prices: [{lookup_key: pro_monthly, interval: month}]}
                limits:
                  <<: *base
                  storage: unlimited
            """)
        #expect(catalog.tier(id: "pro")?.name == "Pro (yearly or monthly)")
        #expect(try PlanCatalogLoader.parse("""
            tiers:
              - {id: free, name: Free, rank: 0}
              - id: pro
                name: Pro
                rank: 10
                app_store:
                  products: [com.example.pro.monthly]
                  sample_content_provided: true   # a free week, and screenshots of every feature
            """).sampleContentProvided(appStoreProduct: "com.example.pro.monthly"))
        #expect(Set(catalog.tier(id: "pro")?.limits ?? []) == [PlanLimit(key: "projects", value: .count(3)), PlanLimit(key: "storage", value: .unlimited)])
    }
}
