import FoundationEssentials
import Synchronization

extension OutboxEngine {
    /// SPEC R8: changes the endpoint, the app secret, the CA file or the request timeout of a running engine.
    /// Validated here, on the caller's thread, like start-up; applied on the loop before the next send. A channel that
    /// the server stopped (401, 403, 404, a redirect not followed) starts again; batches in flight finish under the
    /// old settings. Any other field is refused by name, and so is an endpoint for an engine started without one.
    /// `beforeStore` (SPEC H1) may be set, replaced or cleared: calls that start after `update` returns run the new one.
    ///
    /// ```swift
    /// try engine.update { $0.endpoint = "https://ingest.example.com"; $0.appSecret = newSecret }
    /// ```
    public func update(_ change: (inout Configuration) throws -> Void) throws {
        try updateLock.withLock { current in
            var updated = current
            try change(&updated)
            let fixed = updated.fixedFieldsChanged(from: current)
            guard fixed.isEmpty else {
                throw OutboxError.invalidConfiguration(
                    "update can change only \(Configuration.changeableFields.joined(separator: ", ")); refused: \(fixed.joined(separator: ", "))")
            }
            // SPEC D18: a list of destinations in place of the single one (or back) still delivers.
            guard current.namedDestinations.isEmpty == updated.namedDestinations.isEmpty else {
                throw OutboxError.invalidConfiguration(current.namedDestinations.isEmpty
                    ? "endpoint cannot be set on an engine started without one (it only stores): start a new engine"
                    : "endpoint cannot be removed at run time: use setEnabled(false) or pause()")
            }
            if current.storeKey != nil && updated.storeKey == nil {
                throw OutboxError.invalidConfiguration(
                    "storeKey cannot be removed from a sealed store: give a new key to rotate it, or keep the key")
            }
            try updated.validate()
            let previous = current
            current = updated
            // SPEC H1: the hook is the callers'; it changes at once, and a change of it alone touches nothing on the loop.
            if updated.beforeStoreHook !== previous.beforeStoreHook {
                beforeStore.publish(updated.beforeStoreHook)
                if updated.applyTargets(changedFrom: previous) == .beforeStore { return }
            }
            let installID = self.installID
            try submitToLoop { core in core.reconfigure(updated, installID: installID, previous: previous) }
        }
    }
}
