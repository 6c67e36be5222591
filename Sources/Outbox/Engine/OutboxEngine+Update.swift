import FoundationEssentials
import Synchronization

extension Configuration {
    /// SPEC R8: the fields `OutboxEngine.update` may change.
    static let runtimeFields: Set<String> = ["endpoint", "appSecret", "caFile", "requestTimeout"]

    /// The names of the fields that differ from `other`, among those fixed at start. The clock, the logger and the
    /// run mode are compared by identity of kind only: they cannot change at run time either.
    func fixedFieldsChanged(from other: Configuration) -> [String] {
        var changed: [String] = []
        func compare<T: Equatable>(_ name: String, _ a: T, _ b: T) { if a != b { changed.append(name) } }
        compare("storePath", storePath, other.storePath)
        compare("maxStorageSize", maxStorageSize, other.maxStorageSize)
        compare("maxLogCount", maxLogCount, other.maxLogCount)
        compare("maxLogAge", maxLogAge, other.maxLogAge)
        compare("maxDistinctEventNames", maxDistinctEventNames, other.maxDistinctEventNames)
        compare("groupCommitWindow", groupCommitWindow, other.groupCommitWindow)
        compare("intakeCapacity", intakeCapacity, other.intakeCapacity)
        compare("pageCacheSize", pageCacheSize, other.pageCacheSize)
        compare("diskReserveSize", diskReserveSize, other.diskReserveSize)
        compare("clock", ObjectIdentifier(type(of: clock)), ObjectIdentifier(type(of: other.clock)))
        compare("logger", logger.label, other.logger.label)
        compare("logger", logger.logLevel, other.logger.logLevel)
        compare("runMode", runMode.pointer, other.runMode.pointer)
        compare("batchSize", batchSize, other.batchSize)
        compare("transmissionInterval", transmissionInterval, other.transmissionInterval)
        compare("criticalTransmissionInterval", criticalTransmissionInterval, other.criticalTransmissionInterval)
        compare("retryIntervals", retryIntervals, other.retryIntervals)
        compare("maxRetryAfter", maxRetryAfter, other.maxRetryAfter)
        compare("probeInterval", probeInterval, other.probeInterval)
        compare("dispatchInterval", dispatchInterval, other.dispatchInterval)
        compare("bodyCompression", bodyCompression, other.bodyCompression)
        compare("clockSkewThreshold", clockSkewThreshold, other.clockSkewThreshold)
        compare("watchesNetwork", watchesNetwork, other.watchesNetwork)
        compare("appVersion", appVersion, other.appVersion)
        compare("appBuild", appBuild, other.appBuild)
        compare("appNamespace", appNamespace, other.appNamespace)
        compare("sessionTimeout", sessionTimeout, other.sessionTimeout)
        compare("sessionTracking", sessionTracking, other.sessionTracking)
        compare("tracksAppLifecycle", tracksAppLifecycle, other.tracksAppLifecycle)
        compare("testingIDSeed", testingIDSeed, other.testingIDSeed)
        compare("testingAllowsValuesBelowBounds", testingAllowsValuesBelowBounds, other.testingAllowsValuesBelowBounds)
        var seen = Set<String>()
        return changed.filter { seen.insert($0).inserted }
    }
}

extension RunMode {
    fileprivate var pointer: UnsafeMutableRawPointer? {
        if case .hostLoop(let loop) = self { return loop }
        return nil
    }
}

extension OutboxEngine {
    /// SPEC R8: changes the endpoint, the app secret, the CA file or the request timeout of a running engine.
    /// Validated here, on the caller's thread, like start-up; applied on the loop before the next send. A channel that
    /// the server stopped (401, 403, 404, a redirect not followed) starts again; batches in flight finish under the
    /// old settings. Any other field is refused by name, and so is an endpoint for an engine started without one.
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
                    "update can change only endpoint, appSecret, caFile and requestTimeout; refused: \(fixed.joined(separator: ", "))")
            }
            guard (current.endpoint == nil) == (updated.endpoint == nil) else {
                throw OutboxError.invalidConfiguration(current.endpoint == nil
                    ? "endpoint cannot be set on an engine started without one (it only stores): start a new engine"
                    : "endpoint cannot be removed at run time: use setEnabled(false) or pause()")
            }
            try updated.validate()
            let previous = current
            current = updated
            let installID = self.installID
            try submitToLoop { core in core.reconfigure(updated, installID: installID, previous: previous) }
        }
    }
}
