import FoundationEssentials

/// One destination, declared once beside its wire (SPEC D1): the configuration fields only it reads, the credential
/// it cannot send without, the headers its wire sets, and how its wire is made. `Configuration.wire`, the required
/// credential of `validate()` and of the command line, the C configuration's keys of one destination, the reserved
/// headers and the encode bench all read it, so that a new wire is its spec, its wire and a case of `Destination`
/// (docs/ARCHITECTURE.md, "Destinations").
package struct DestinationSpec: Sendable {
    package let destination: Destination
    /// The names of the `Configuration.schema` rows only this destination reads: given with another destination, the
    /// C configuration refuses them by key and the command line by flag (the credential is one of them).
    package let fields: [String]
    /// The credential the destination cannot send without, if it has one.
    package let credential: DestinationCredential?
    /// SPEC D1: every header its wire sets on a request (the driver's `Content-Encoding` included): a user header of
    /// one of these names, in any case, is refused at configuration for this destination.
    package let headers: [String]
    /// The wire that speaks the destination, its credentials taken from `configuration`.
    let makeWire: @Sendable (_ configuration: Configuration, _ installID: UUID) -> any DeliveryWire
    /// Why the configuration cannot send to this destination when one credential alone does not say it (Mixpanel's
    /// token or service account), or nil; checked by `validate()` beside `credential.missing`.
    var problem: (@Sendable (_ configuration: Configuration) -> String?)? = nil
    /// What is wrong with the destination's own fields in `configuration` (Sensors' endpoint without its project,
    /// GA4's measurement id): the schema row's name of the field at fault and what is wrong with it; nil: nothing.
    /// `validate()` says it naming the field, the command line naming its flag.
    package var fieldProblem: (@Sendable (_ configuration: Configuration) -> (field: String, message: String)?)? = nil
    /// The endpoint for a server of this wire at `base` (the mock's URL): Sensors' endpoint is a whole URL with
    /// its project; nil: the base URL itself.
    package var endpointAtBase: (@Sendable (_ base: String) -> String)? = nil
}

/// A destination's credential: the field that holds it, and what `Configuration.validate()` says when it is empty.
package struct DestinationCredential: Sendable {
    /// The `Configuration.schema` row's name (`apiKey`).
    package let field: String
    package let keyPath: WritableKeyPath<Configuration, String> & Sendable
    /// `validate()`'s refusal of an endpoint without the credential; nil: the library sends without it (App Center's
    /// secret: its server answers 401, and R1 stops the channel), only the command line requires it.
    package let missing: String?
}

extension Configuration {
    /// The wire that speaks this configuration's destination.
    func wire(installID: UUID) -> any DeliveryWire {
        destination.spec.makeWire(self, installID)
    }

    /// SPEC D11, D12: what is wrong with the destination's own fields, naming the field; nil: nothing.
    var destinationFieldProblem: String? {
        destination.spec.fieldProblem?(self).map { "\($0.field) \($0.message)" }
    }

    /// SPEC D1: why this configuration cannot send for lack of its destination's credential, or nil.
    var missingCredential: String? {
        if let problem = destination.spec.problem { return problem(self) }
        guard endpoint != nil, let credential = destination.spec.credential, let missing = credential.missing,
              self[keyPath: credential.keyPath].isEmpty else { return nil }
        return missing
    }
}
