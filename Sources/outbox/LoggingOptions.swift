import ArgumentParser
import Logging
import Synchronization

/// SPEC X7: `--log-level`, shared by the commands that run an engine or open a store. The CLI is an application,
/// so it may bootstrap swift-log (a library never does): its lines go to stderr, leaving stdout to the JSON output.
struct LoggingOptions: ParsableArguments {
    @Option(name: .customLong("log-level"),
            help: "Lowest level written to stderr: trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "warning"

    static let levels = Logger.Level.allCases.map(\.rawValue)

    func validate() throws { _ = try level() }

    func level() throws -> Logger.Level {
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw ValidationError("--log-level takes one of \(Self.levels.joined(separator: ", ")); got '\(logLevel)'")
        }
        return level
    }

    /// Bootstraps swift-log with a stderr handler at the chosen level and returns the logger to give the engine.
    func makeLogger(label: String = "outbox") throws -> Logger {
        let level = try level()
        Self.bootstrapped.withLock { done in
            // swift-log allows one bootstrap per process.
            guard !done else { return }
            done = true
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        }
        var logger = Logger(label: label)
        logger.logLevel = level
        return logger
    }

    private static let bootstrapped = Mutex(false)
}
