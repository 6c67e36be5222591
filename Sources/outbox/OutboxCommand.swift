import ArgumentParser
import Dispatch
import FoundationEssentials
import Glibc
import Outbox

@main
struct OutboxCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "outbox",
        abstract: "Outbox: durable analytics logs in SQLite, delivered in batches.",
        version: OutboxVersion.string,
        subcommands: [Emit.self, Status.self, Demo.self, DeadLetters.self, Fleet.self]
    )
}

/// Prints a JSON object with keys in a stable order (scripts and acceptance tests read it).
func printJSON(_ object: [(String, Any?)]) {
    var parts: [String] = []
    for (key, value) in object {
        let rendered: String
        switch value {
        case nil: rendered = "null"
        case let text as String: rendered = jsonString(text)
        case let flag as Bool: rendered = flag ? "true" : "false"
        case let number as Int: rendered = String(number)
        case let number as Double: rendered = cFormat("%.3f", number)
        case let json as RawJSON: rendered = json.text
        default: rendered = jsonString("\(value!)")
        }
        parts.append("\(jsonString(key)):\(rendered)")
    }
    print("{" + parts.joined(separator: ",") + "}")
}

/// JSON text to embed as it is (a value that is already JSON, such as a log object).
struct RawJSON {
    var text: String
    init(_ text: String) { self.text = text }
}

func jsonString(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case _ where scalar.value < 0x20: out += cFormat("\\u%04x", scalar.value)
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}

/// printf-style formatting of numbers by libc. Foundation's `String(format:)` would link Foundation proper, and
/// with it CoreFoundation and ICU, megabytes of start-up memory in every `outbox` process: the CLI imports
/// FoundationEssentials only.
func cFormat(_ format: String, _ arguments: CVarArg...) -> String {
    let length = withVaList(arguments) { vsnprintf(nil, 0, format, $0) }
    guard length > 0 else { return "" }
    var buffer = [CChar](repeating: 0, count: Int(length) + 1)
    _ = withVaList(arguments) { vsnprintf(&buffer, buffer.count, format, $0) }
    return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func writeStandardError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let n = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            offset += n
        }
    }
}

/// Runs `body` on a new detached thread (Foundation's `Thread` without Foundation).
func startThread(_ body: @escaping () -> Void) {
    final class Body { let run: () -> Void; init(_ run: @escaping () -> Void) { self.run = run } }
    let context = Unmanaged.passRetained(Body(body)).toOpaque()
    var thread = pthread_t()
    let rc = pthread_create(&thread, nil, { context in
        Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
        return nil
    }, context)
    precondition(rc == 0, "outbox: pthread_create failed (\(rc))")
    pthread_detach(thread)
}

/// Runs async work to its end while the calling thread waits. The commands are synchronous and call this: with
/// an async `main`, Swift parks the main thread in `dispatch_main()`, whose `pthread_exit` unwinds the main
/// thread's stack through the unwind tables, which then stay resident in every `outbox` process.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let outcome = Outcome<T>()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do { outcome.result = .success(try await body()) } catch { outcome.result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try outcome.result!.get()
}

private final class Outcome<T>: @unchecked Sendable {
    var result: Result<T, Error>?
}

struct CLIError: Error, CustomStringConvertible {
    var description: String
}
