// The engine's two doors for a host: the `outbox` command line and the C interface's JSON.
import COutboxSupport
import ArgumentParser
import Glibc
@testable import Outbox
@testable import OutboxC
@testable import outbox

/// `outbox`'s arguments (swift-argument-parser over our commands and their `validate()`), then, for `emit`, the
/// engine configuration the options make and its validation (SPEC X3, X7). The input is argv: arguments separated
/// by NUL or newline bytes. A refusal must come with a message (what the CLI prints with its usage).
let cliTarget = FuzzTarget(name: "cli", summary: "outbox's argv through swift-argument-parser, the commands' validate() and Configuration.validate()") { input in
    let arguments = input.split(whereSeparator: { $0 == 0 || $0 == 0x0A }).map { String(decoding: $0, as: UTF8.self) }
    let command: ParsableCommand
    do {
        command = try OutboxCommand.parseAsRoot(arguments)
    } catch {
        // What `outbox` prints before it exits: help, version, or the error. Each of `message(for:)` and
        // `exitCode(for:)` renders the usage text again (and help in full), which costs more than the parse:
        // the exit code is asked only of the rare error without a message.
        invariant(!OutboxCommand.message(for: error).isEmpty || OutboxCommand.exitCode(for: error).isSuccess,
                  "a usage error without a message")
        return
    }
    guard let emit = command as? Emit else { return }
    do {
        let configuration = try emit.engineConfiguration()
        do {
            try configuration.validate()
        } catch {
            invariant(!"\(error)".isEmpty, "a configuration refused without a message")
        }
    } catch {
        invariant(!"\(error)".isEmpty, "options refused without a message")
    }
}

@_silgen_name("outbox_last_error")
private func outboxLastError() -> UnsafePointer<CChar>

/// A store-only engine that every `outbox_track` input goes to.
private nonisolated(unsafe) var cEngine: UnsafeMutableRawPointer?
private nonisolated(unsafe) var cDirectory = ""

/// The C interface's JSON readers and calls (SPEC E3, E5): `outbox_track`'s properties object, the analytics model's
/// functions (their names, paths, properties, traits, timers and coordinates), and `outbox_open` / `outbox_update`'s
/// configuration object. The first byte picks the call (odd: configuration; even: one of eight calls by its upper
/// bits), the rest is the C string (a NUL inside ends it early, as it would for a C caller). Every call returns, and a
/// failure leaves a message in `outbox_last_error()`. The calls go into a store-only engine; configurations through
/// the decoder and `Configuration.validate()` that `outbox_open` runs, without opening an engine per input.
let cJSONTarget = FuzzTarget(name: "c-json", summary: "outbox_track's properties, the analytics model's calls, outbox_open/outbox_update's configuration JSON", body: { input in
    guard let selector = input.first else { return }
    var text = Array(input.dropFirst()).map { CChar(bitPattern: $0) }
    text.append(0)
    _ = outboxc_fail(0, "", 0)
    if selector & 1 == 0 {
        func check(_ rc: Int32, _ call: String) {
            invariant(rc == 0 || outboxLastError().pointee != 0, "\(call) returned \(rc) without a message")
        }
        /// Three doubles from the input's first bytes (any bit pattern: NaN and infinities included).
        func number(_ index: Int) -> Double {
            var bits: UInt64 = 0
            for offset in 0..<8 where 1 + index * 8 + offset < input.count {
                bits |= UInt64(input[input.startIndex + 1 + index * 8 + offset]) << (8 * offset)
            }
            return Double(bitPattern: bits)
        }
        switch (selector >> 1) % 8 {
        case 0: check(outbox_track(cEngine, "fuzz", text, 0), "outbox_track")
        case 1: check(outbox_track_screen(cEngine, "fuzz", nil, text), "outbox_track_screen")
        case 2: check(outbox_track_screen(cEngine, text, text, nil), "outbox_track_screen (name, path)")
        case 3:
            check(outbox_set_user_properties(cEngine, text), "outbox_set_user_properties")
            check(outbox_identify(cEngine, "fuzz-user", text), "outbox_identify")
        case 4: check(outbox_track_category(cEngine, text, text, number(0), nil, Int32(selector >> 4) & 3), "outbox_track_category")
        case 5:
            let timer = outbox_start_timer(cEngine, text)
            guard timer > 0 else { check(Int32(clamping: timer), "outbox_start_timer"); return }
            check(outbox_pause_timer(cEngine, timer), "outbox_pause_timer")
            let first = outbox_end_timer(cEngine, timer, text, 0)
            check(first, "outbox_end_timer")
            let again = outbox_end_timer(cEngine, timer, nil, 0)
            if first == 0 {
                invariant(again == -1 && outboxLastError().pointee != 0, "an ended timer was not refused: \(again)")
            } else {
                // Refused properties leave the timer open, so that the caller can end it with good ones; storage
                // full or the event-name limit (-4, -5) refuse the event after the timer ended (then -1 here).
                invariant([0, -1, -4, -5].contains(again) && (again == 0 || outboxLastError().pointee != 0),
                          "a timer whose end was refused: \(again) on the second end")
            }
        case 6: check(outbox_send_location(cEngine, number(0), number(1), number(2)), "outbox_send_location")
        default:
            check(outbox_set_user_id(cEngine, text), "outbox_set_user_id")
            check(outbox_start_session(cEngine), "outbox_start_session")
            check(outbox_end_session(cEngine), "outbox_end_session")
        }
        return
    }
    do throws(CFailure) {
        let members = try text.withUnsafeBufferPointer { bytes throws(CFailure) in try ConfigDecoder.members(bytes.baseAddress) }
        // outbox_update: only its keys, applied onto a running engine's configuration.
        var updated = Configuration(storePath: "fuzz.outbox")
        for (key, value) in members where ConfigDecoder.updateKeys.contains(key) {
            try ConfigDecoder.apply(key, value, to: &updated)
        }
        let (configuration, _) = try ConfigDecoder.configuration(members)
        do {
            try configuration.validate()
        } catch {
            invariant(!"\(error)".isEmpty, "a configuration refused without a message")
        }
    } catch {
        invariant(!error.message.isEmpty, "a configuration refused without a message")
    }
}, setUp: {
    cDirectory = temporaryDirectory("c")
    // A cap that the million inputs outgrow: eviction (SPEC S3) runs too, as it would for a real host.
    let config = #"{"storePath":"\#(cDirectory)/fuzz.outbox","maxStorageSize":16777216,"maxDistinctEventNames":10000,"# +
        #""sessionTracking":"manual","logLevel":"critical"}"#
    cEngine = outbox_open(config, nil)
    invariant(cEngine != nil, "outbox_open: \(String(cString: outboxLastError()))")
})
