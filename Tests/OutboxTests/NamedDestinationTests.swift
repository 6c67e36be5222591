import Foundation
import Testing
@testable import Outbox

/// SPEC D15: a list of named destinations, in Swift and in C JSON; what the list refuses, naming it.
@Suite("Named destinations (SPEC D15)")
struct NamedDestinationTests {
    static func two() -> [NamedDestination] {
        let ops = NamedDestination(name: "ops", destination: .otlp, endpoint: "http://127.0.0.1:4318")
        var product = NamedDestination(name: "product", destination: .posthog, endpoint: "http://127.0.0.1:8000")
        product.apiKey = "phc_test"
        return [ops, product]
    }

    // SPEC D15: without a list, the single destination is a list of one named `default`; a list's unnamed first
    // element is `default` too; store-only has none.
    @Test func theSingleDestinationIsOneNamedDefault() throws {
        var single = Configuration(storePath: "/tmp/x")
        #expect(single.namedDestinations.isEmpty)
        single.endpoint = "http://127.0.0.1:1"
        single.destination = .segment
        single.writeKey = "wk"
        let named = single.namedDestinations
        #expect(named.count == 1)
        #expect(named.first?.name == "default")
        #expect(named.first?.destination == .segment && named.first?.writeKey == "wk")

        var list = Configuration(storePath: "/tmp/x")
        var unnamed = Self.two()
        unnamed[0].name = nil
        list.destinations = unnamed
        try list.validate()
        #expect(list.namedDestinations.map(\.name) == ["default", "product"])
        // Each destination's delivery is made from the configuration with that destination's fields.
        let product = list.delivering(to: list.namedDestinations[1])
        #expect(product.destination == .posthog && product.apiKey == "phc_test" && product.destinations.isEmpty)
    }

    // SPEC D15: bad input refused, naming it.
    @Test(arguments: [
        ("beside", "given together with the single destination's fields"),
        ("duplicate", "holds 'ops' twice"),
        ("folded", "the same name once '-' is read as '_'"),
        ("badName", "only a-z, 0-9"),
        ("longName", "1 to 32 characters"),
        ("laterUnnamed", "destinations[1] has no name"),
        ("noEndpoint", "destination 'product' has no endpoint"),
        ("noCredential", "destination 'product':"),
    ])
    func badListsAreRefusedNamingTheProblem(_ kind: String, _ expected: String) {
        var configuration = Configuration(storePath: "/tmp/x")
        var list = Self.two()
        switch kind {
        case "beside": configuration.endpoint = "http://127.0.0.1:1"
        case "duplicate": list[1].name = "ops"; list[1].apiKey = "phc_test"
        case "folded": list[0].name = "my-ops"; list[1].name = "my_ops"
        case "badName": list[1].name = "Product"
        case "longName": list[1].name = String(repeating: "p", count: 33)
        case "laterUnnamed": list[1].name = nil
        case "noEndpoint": list[1].endpoint = nil
        case "noCredential": list[1].apiKey = ""
        default: Issue.record("unknown case \(kind)")
        }
        configuration.destinations = list
        do {
            try configuration.validate()
            Issue.record("\(kind) was accepted")
        } catch {
            #expect("\(error)".contains(expected), "\(kind): \(error)")
        }
    }

    // SPEC D15: C JSON's `destinations` array reads each element's keys by the single destination's rows, and writes
    // back what it read; a key no destination takes is refused by name.
    @Test func cJSONReadsAndWritesTheList() throws {
        var configuration = Configuration(storePath: "/tmp/x")
        let json: JSONValue = .array([
            .object([(key: "name", value: .string("ops")), (key: "destination", value: .string("otlp")),
                     (key: "endpoint", value: .string("http://127.0.0.1:4318")), (key: "otlpEncoding", value: .string("json"))]),
            .object([(key: "name", value: .string("product")), (key: "destination", value: .string("posthog")),
                     (key: "endpoint", value: .string("http://127.0.0.1:8000")), (key: "apiKey", value: .string("phc_test")),
                     (key: "headers", value: .object([(key: "X-Tenant", value: .string("t"))]))]),
        ])
        #expect(try configuration.decode("destinations", json))
        try configuration.validate()
        #expect(configuration.destinations.map(\.name) == ["ops", "product"])
        #expect(configuration.destinations[0].otlpEncoding == .json)
        #expect(configuration.destinations[1].headers == [HeaderField("X-Tenant", "t")])
        let row = try #require(Configuration.schema.first { $0.name == "destinations" })
        var again = Configuration(storePath: "/tmp/x")
        let encode = try #require(row.encode)
        let written = encode(configuration)
        _ = try again.decode("destinations", written)
        #expect(again.destinations == configuration.destinations)

        var refused = Configuration(storePath: "/tmp/x")
        let batch: JSONValue = .array([.object([(key: "name", value: .string("ops")), (key: "batchSize", value: .integer(5))])])
        let batchRefusal = Self.refusal { () throws(ConfigurationValueError) -> Bool in try refused.decode("destinations", batch) }
        #expect(batchRefusal.contains("'destinations[0].batchSize' is not a destination's key"), "\(batchRefusal)")
        let wrong: JSONValue = .array([.object([(key: "destination", value: .integer(3))])])
        let wrongRefusal = Self.refusal { () throws(ConfigurationValueError) -> Bool in try refused.decode("destinations", wrong) }
        #expect(wrongRefusal.contains("destinations[0].destination"), "\(wrongRefusal)")
    }

    /// The message of the refusal `body` throws; empty when it throws none.
    static func refusal(_ body: () throws(ConfigurationValueError) -> Bool) -> String {
        do throws(ConfigurationValueError) {
            _ = try body()
            return ""
        } catch {
            return error.message
        }
    }

    // A destination's description names its wire and endpoint, never its credentials.
    @Test func theDescriptionHoldsNoSecret() {
        var ga4 = NamedDestination(name: "ga", destination: .ga4, endpoint: "https://user:pw@example.com/?api_secret=zzz")
        ga4.apiSecret = "zzz"
        #expect(!ga4.description.contains("zzz") && !ga4.description.contains("pw"))
        #expect(ga4.description.hasPrefix("ga=ga4"))
    }
}
