import FoundationEssentials
import Logging
import Synchronization

/// The loop thread's side of the analytics model: sessions, lifecycle and user (SPEC A1–A3, A5, A8) applied in
/// queue order, and the device context (SPEC A10) that every new log is captured under.
extension EngineCore {
    /// Applies one command of the intake queue; the logs it writes join the current group commit, so they are
    /// stored in the order of the calls that caused them.
    func apply(_ command: AnalyticsCommand, into logs: inout [NewLog]) {
        if case .setCountryCode(let code) = command {
            updateDevice { device in
                device.countryCode = code
                device.sources["countryCode"] = code == nil ? nil : "setCountryCode"
            }
            return
        }
        // SPEC D3: a session at its longest ends before the command's own logs (`.sessionLimit` itself excepted).
        if case .sessionLimit = command {
        } else if let at = command.moment, analytics.sessionLimitReached(atMonoNs: at.monoNs) {
            apply(.sessionLimit(at), into: &logs)
        }
        let sessionBefore = analytics.session?.id
        defer {
            // The caller's own starts and ends set it when called: applied later, they would undo a newer call.
            switch command {
            case .startSession, .endSession: break
            default:
                if analytics.session?.id != sessionBefore { sessionOpen.store(analytics.session != nil, ordering: .relaxed) }
            }
        }
        for effect in analytics.apply(command, ids: &ids) {
            switch effect {
            case .log(let log):
                // SPEC T6: nothing is collected while disabled (callers' logs are refused at admission already).
                guard collecting else { continue }
                let draft = EventDraft(priority: .normal, wallMs: log.moment.wallMs, monoNs: log.moment.monoNs,
                                       body: log.body, newName: nil, waiter: nil, type: log.type)
                logs.append(makeLog(draft, stamp: log.stamp))
            case .persistUserID(let id):
                do {
                    try store.setMeta(MetaKey.userID, id)
                } catch {
                    logger.error("could not persist the user id; it holds until the engine stops",
                                 metadata: ["outbox.error": "\(error)"])
                }
            }
        }
        // Before the next log is made: a caller's payload under the old stamp is built again (`CallerPayloads`).
        publishForCallers()
    }

    // MARK: - Device context (SPEC A10)

    /// Completes the context collected at start with the network type — the watcher's, or read once when no
    /// watcher runs (store only, loopback endpoint) — and saves it as the context of new logs.
    func startDeviceContext(networkType: String?) {
        device.networkType = networkType ?? NetworkState.current().networkType
        device.sources["networkType"] = networkType == nil ? Self.networkTypeReadSource : Self.networkTypeWatchedSource
        publish(device)
    }

    /// Applies a change; a context that really changed becomes a new version (logs keep the one they were
    /// captured under).
    func updateDevice(_ change: (inout DeviceContext) -> Void) {
        var updated = device
        change(&updated)
        guard updated != device else { return }
        if updated.json() == device.json() {
            device = updated  // only a source changed: no new version
        } else {
            publish(updated)
        }
    }

    /// The watcher saw the network change (SPEC N1): the network type follows.
    func setNetworkType(_ type: String) {
        updateDevice { device in
            device.networkType = type
            device.sources["networkType"] = Self.networkTypeWatchedSource
        }
    }

    /// Housekeeping (every minute): re-reads the machine's facts, so that a time-zone change, a daylight-saving
    /// switch, an OS upgrade or (without a watcher) another network type reach the next logs. The host's
    /// overrides (country code) stay.
    func refreshDeviceContext() {
        var fresh = DeviceContext.collect(appVersion: configuration.appVersion, appBuild: configuration.appBuild,
                                          appNamespace: configuration.appNamespace)
        fresh.countryCode = device.countryCode
        fresh.sources["countryCode"] = device.sources["countryCode"]
        if device.sources["networkType"] == Self.networkTypeWatchedSource {
            fresh.networkType = device.networkType
            fresh.sources["networkType"] = Self.networkTypeWatchedSource
        } else {
            fresh.networkType = NetworkState.current().networkType
            fresh.sources["networkType"] = Self.networkTypeReadSource
        }
        updateDevice { $0 = fresh }
    }

    private func publish(_ updated: DeviceContext) {
        device = updated
        let json = updated.json()
        do {
            contextID = try store.saveContext(json: json)
        } catch {
            // Logs stored meanwhile carry version 0 and go out with the context current at send time.
            contextID = 0
            logger.warning("could not save the device context", metadata: ["outbox.error": "\(error)"])
        }
        delivery?.setDeviceContext(id: contextID, json: json)
    }

    static let networkTypeWatchedSource = "rtnetlink watcher (/proc/net/route, /sys/class/net/IF/wireless)"
    static let networkTypeReadSource = "/proc/net/route, /sys/class/net/IF/wireless (read at start and every minute)"
}
