import CLibUV
import Foundation
@_exported import OutboxTestSupport
@testable import Outbox

func testConfiguration(_ path: String) -> Configuration {
    var configuration = Configuration(storePath: path)
    configuration.testingAllowsValuesBelowBounds = true
    configuration.sessionTracking = .manual
    return configuration
}

/// The `i` property of an event payload (the tests' ordinal), read with JSONSerialization (slow, fine here).
func properties(of log: StoredLog) -> [String: Any] {
    guard let object = try? JSONSerialization.jsonObject(with: Data(log.payload)) as? [String: Any],
          let typed = object["typedProperties"] as? [[String: Any]] else { return [:] }
    var result: [String: Any] = [:]
    for property in typed {
        if let name = property["name"] as? String { result[name] = property["value"] }
    }
    return result
}

func payloadObject(_ log: StoredLog) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(log.payload)) as? [String: Any]) ?? [:]
}

/// A host program, run on the calling thread: its own libuv loop with the engine registered on it
/// (`runMode = .hostLoop`) and a one-shot 10 ms timer standing for the host's own work, which calls `onTimer` on
/// the loop thread. Returns whether the first `uv_run` returned (no engine handle keeps a host's loop alive) and
/// what `uv_loop_close` said after `shutdown()`; nil when the loop or the engine could not be made.
func runHostProgram(path: String, configure: (inout Configuration) -> Void = { _ in },
                    onTimer: @escaping (OutboxEngine) -> Void) -> (firstRunReturned: Bool, closeResult: Int32)? {
    final class TimerContext {
        let engine: OutboxEngine
        let onTimer: (OutboxEngine) -> Void
        init(engine: OutboxEngine, onTimer: @escaping (OutboxEngine) -> Void) {
            self.engine = engine
            self.onTimer = onTimer
        }
    }
    let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
    defer { loop.deallocate() }
    guard uv_loop_init(loop) == 0 else { return nil }
    var configuration = testConfiguration(path)
    configuration.runMode = .hostLoop(UnsafeMutableRawPointer(loop))
    configure(&configuration)
    guard let engine = try? OutboxEngine(configuration: configuration) else { return nil }

    let timer = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
    defer { timer.deallocate() }
    uv_timer_init(loop, timer)
    timer.pointee.data = Unmanaged.passRetained(TimerContext(engine: engine, onTimer: onTimer)).toOpaque()
    uv_timer_start(timer, { timer in
        guard let timer, let data = timer.pointee.data else { return }
        let context = Unmanaged<TimerContext>.fromOpaque(data).takeRetainedValue()
        context.onTimer(context.engine)
        uv_close(UnsafeMutableRawPointer(timer).assumingMemoryBound(to: uv_handle_t.self), nil)
    }, 10, 0)

    uv_run(loop, UV_RUN_DEFAULT)   // returns once the host's timer is done: the engine's handles are unref'd
    engine.shutdown()
    uv_run(loop, UV_RUN_DEFAULT)   // lets the close callbacks run
    return (true, uv_loop_close(loop))
}

/// A value a task on the loop hands back to the test that queued it (read after `persisted()`).
final class LoopResultBox<T>: @unchecked Sendable {
    var value: T?
}
