import Outbox

/// Where a simulated install is in its one session (SPEC F1 "its own sessions", A2, A3): manual session tracking, a
/// session from the first event it tracks to its last, so that the mock sees a `startSession` and an `endSession`
/// log per device beside its events.
///
/// The session logs go into the store like the events, so they count as tracked, and as delivered once the mock
/// holds them (SPEC F2: tracked − delivered − pending − dead-lettered − evicted, where the last three are the store's
/// counts of all its logs). They carry no properties; `FleetAccounting` ties them to their device by their `sid`,
/// which the device's events carry too.
enum FleetSession: Equatable {
    case notStarted
    case open
    case ended
}

extension FleetDevice {
    /// Starts the device's session before its first event; the number of logs the store accepted (0 or 1).
    func beginSession() -> Int {
        guard session == .notStarted, let engine else { return 0 }
        session = .open
        do {
            try engine.startSession()
        } catch {
            // Refused like an event would be (a full intake): counted as rejected, and no session to end.
            rejected += 1
            session = .ended
            return 0
        }
        tracked += 1
        return 1
    }

    /// Ends the session after the device's last event; the number of logs the store accepted (0 or 1).
    func endSession() -> Int {
        guard session == .open, let engine else { return 0 }
        session = .ended
        do {
            try engine.endSession()
        } catch {
            rejected += 1
            return 0
        }
        tracked += 1
        return 1
    }
}
