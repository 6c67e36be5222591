/// Every error Outbox reports. Each message says what went wrong and what to do; none carries a secret
/// or a bound SQL value.
public enum OutboxError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A `Configuration` field is out of its documented range.
    case invalidConfiguration(String)
    /// An event name is empty (SPEC T2).
    case emptyEventName
    /// A property value cannot be stored (NaN, infinity) (SPEC T3).
    case invalidPropertyValue(key: String, reason: String)
    /// A new event name beyond the distinct-name limit (SPEC T4).
    case tooManyEventNames(name: String, limit: Int)
    /// Storage is full of logs of a higher priority than the new one (SPEC S3).
    case storageFull
    /// A single log is larger than the whole storage cap.
    case logTooLarge(bytes: Int, limit: Int)
    /// Another engine (in this or another process) holds the store file.
    case storeLocked(path: String)
    /// The store was written by a newer version of Outbox.
    case storeTooNew(version: Int, supported: Int)
    /// The file at a store path is not an Outbox store (SPEC S7); it was left untouched.
    case notAStore(path: String, reason: String)
    /// SPEC K1: the store is sealed and the key given is not its key, or no key was given; or a key was given
    /// to read a sealed store whose keys do not open. The store was left untouched.
    case storeKeyInvalid(path: String, reason: String)
    /// SQLite failed; `code` is SQLite's extended result code.
    case storage(code: Int32, message: String)
    /// A file-system operation failed (`errno` text).
    case io(path: String, message: String)
    /// The engine was shut down; the call had no effect.
    case shutDown
    /// A screen title is empty (SPEC A6).
    case emptyScreenTitle
    /// `setUserProperties` was given no property (SPEC A8).
    case emptyUserProperties
    /// A user id is empty or longer than 256 characters (SPEC A8).
    case invalidUserID(String)
    /// A location out of range or not finite.
    case invalidLocation(String)
    /// A country code that is not two letters (SPEC A10).
    case invalidCountryCode(String)
    /// A negative or otherwise unusable duration (SPEC A6, A7).
    case invalidDuration(String)
    /// SPEC H1: what the before-store hook returned cannot be read (the C interface's replacement JSON, a C or Node
    /// hook's answer other than store or drop).
    case beforeStoreHook(String)

    public var description: String {
        switch self {
        case .invalidConfiguration(let message):
            return "invalid configuration: \(message)"
        case .emptyEventName:
            return "event name is empty: give every event a name of 1–256 characters (nothing was stored)"
        case .invalidPropertyValue(let key, let reason):
            return "property '\(key)' is invalid: \(reason) (nothing was stored)"
        case .tooManyEventNames(let name, let limit):
            return "event name '\(name)' rejected: this install already used \(limit) distinct event names (SPEC T4); reuse an existing name"
        case .storageFull:
            return "storage is full of critical logs; the normal log was not stored (raise maxStorageSize or deliver first)"
        case .logTooLarge(let bytes, let limit):
            return "log of \(bytes) bytes cannot fit in storage capped at \(limit) bytes"
        case .storeLocked(let path):
            return "store \(path) is already open by another Outbox engine; use one engine per store file"
        case .storeTooNew(let version, let supported):
            return "store schema version \(version) is newer than this Outbox supports (\(supported)); upgrade Outbox"
        case .notAStore(let path, let reason):
            return "\(path) is not an Outbox store: \(reason); it was left untouched (check the store path)"
        case .storeKeyInvalid(let path, let reason):
            return "store key invalid for \(path): \(reason); the store was left untouched"
        case .storage(let code, let message):
            return "storage error \(code): \(message)"
        case .io(let path, let message):
            return "\(path): \(message)"
        case .shutDown:
            return "the engine is shut down"
        case .emptyScreenTitle:
            return "screen title is empty: give every screen a title of 1–256 characters (nothing was stored)"
        case .emptyUserProperties:
            return "no user property given: pass 1–20 properties (nothing was stored)"
        case .invalidUserID(let reason):
            return "user id rejected: \(reason) (the previous user id stays)"
        case .invalidLocation(let reason):
            return "location rejected: \(reason) (nothing was stored)"
        case .invalidCountryCode(let code):
            return "country code '\(code)' rejected: give a two-letter ISO 3166-1 code such as \"TR\", or nil to remove it"
        case .invalidDuration(let reason):
            return "duration rejected: \(reason) (nothing was stored)"
        case .beforeStoreHook(let reason):
            return "the before-store hook's answer was refused: \(reason) (nothing was stored)"
        }
    }
}
