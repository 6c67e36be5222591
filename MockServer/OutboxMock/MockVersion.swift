/// The release, as `VERSION` says (SPEC P2): the mock ships with the engine and carries the same version;
/// `scripts/set-version.sh` writes it, `VersionTests` checks it.
public enum MockVersion {
    public static let string = "0.2.0"
}
