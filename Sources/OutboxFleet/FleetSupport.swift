import Glibc

// Small helpers of the CLI's that the fleet writes its output with too (the CLI imports them from here).

/// A JSON string literal for `text`.
package func jsonString(_ text: String) -> String {
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
package func cFormat(_ format: String, _ arguments: CVarArg...) -> String {
    let length = withVaList(arguments) { vsnprintf(nil, 0, format, $0) }
    guard length > 0 else { return "" }
    var buffer = [CChar](repeating: 0, count: Int(length) + 1)
    _ = withVaList(arguments) { vsnprintf(&buffer, buffer.count, format, $0) }
    return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

package func writeStandardError(_ text: String) {
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
package func startThread(_ body: @escaping () -> Void) {
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

/// What stops a fleet run, said to the user as it is.
package struct FleetError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Ends a fleet run with this exit status, having said why on standard error already (`--metrics-port` taken: 3).
package struct FleetExit: Error {
    package var code: Int32
}
