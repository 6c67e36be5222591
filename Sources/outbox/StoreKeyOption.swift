import ArgumentParser
import Outbox

/// SPEC K1: `--store-key-file`, on every command that opens a store (emit, status, dead-letters, fleet).
struct StoreKeyOption: ParsableArguments {
    @Option(name: .customLong("store-key-file"),
            help: ArgumentHelp("Seal the store with the key in this file: 32 raw bytes or 64 hex digits, mode 0600 (SPEC K1).",
                               valueName: "path"))
    var path: String?

    /// The key, read and checked now (the error names the file and what is wrong with it); nil without the option.
    func key() throws -> StoreKey? {
        guard let path else { return nil }
        do {
            return try StoreKey(contentsOfFile: path)
        } catch {
            throw ValidationError("--store-key-file: \(error)")
        }
    }
}
