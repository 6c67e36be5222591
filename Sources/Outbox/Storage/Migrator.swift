/// One forward step of a schema.
struct Migration: Sendable {
    /// The `user_version` the database has after this step.
    var version: Int
    var name: String
    var apply: @Sendable (Database) throws(OutboxError) -> Void
}

/// Forward-only migrations keyed by `PRAGMA user_version`, each step in its own transaction so that a
/// crash leaves the database at a whole version. A database newer than the code is refused
/// (`storeTooNew`) rather than guessed at: App Center's SDK downgraded blindly and failed on missing
/// columns (appcenter-sdk-apple#2003).
struct Migrator: Sendable {
    var migrations: [Migration]

    init(_ migrations: [Migration]) {
        self.migrations = migrations.sorted { $0.version < $1.version }
    }

    var latestVersion: Int { migrations.last?.version ?? 0 }

    /// Applies every step above the database's version. Returns the versions before and after.
    @discardableResult
    func migrate(_ db: Database) throws(OutboxError) -> (from: Int, to: Int) {
        let current = try db.userVersion
        if current > latestVersion {
            throw .storeTooNew(version: current, supported: latestVersion)
        }
        var version = current
        for migration in migrations where migration.version > version {
            try db.transaction { () throws(OutboxError) in
                try migration.apply(db)
                // PRAGMA takes no parameters; the value is our own integer.
                try db.exec("PRAGMA user_version = \(migration.version)")
            }
            version = migration.version
        }
        return (current, version)
    }
}
