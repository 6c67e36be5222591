import Outbox

/// An app's analytics, as a Swift app would write them with Outbox: one engine, its events named in one place.
public final class PlayerAnalytics: Sendable {
    public let engine: OutboxEngine

    /// `storePath`: where the app keeps its store; `endpoint`: the server (nil: store only, send later).
    public init(storePath: String, endpoint: String?, appSecret: String, configure: (inout Configuration) -> Void = { _ in }) throws {
        var configuration = Configuration(storePath: storePath)
        configuration.endpoint = endpoint
        configuration.appSecret = appSecret
        configure(&configuration)
        engine = try OutboxEngine(configuration: configuration)
    }

    public func played(track: String, seconds: Int) throws {
        try engine.trackEvent("play", properties: ["track": .string(track), "seconds": .int(Int64(seconds))])
    }

    public func openedScreen(_ name: String) throws {
        try engine.trackScreen(title: name)
    }

    public func signedIn(_ user: String) throws {
        try engine.identify(userId: user, traits: ["plan": "pro"])
    }

    /// Sends what it can within `seconds`; the rest stays stored for the next start.
    public func close(seconds: Int = 5) async {
        await engine.shutdown(drainFor: .seconds(seconds))
    }
}
