import CLibUV
import CNetlink
import Dispatch
import FoundationEssentials
import Glibc

/// How the engine runs its libuv loop (docs/ARCHITECTURE.md, "Who owns what, on which thread").
public enum RunMode: @unchecked Sendable {
    /// The engine starts a thread that runs its own `uv_loop_t`.
    case dedicatedThread
    /// The engine registers its handles on the host's `uv_loop_t *` and never runs it. Create the engine and
    /// call `shutdown()` on the thread that runs that loop (libuv handles are not thread-safe). The engine's
    /// timers, sockets and watchers are unref'd, so an idle engine never keeps the host's loop alive; a pending
    /// dispatch, idle wait or drain holds it until its callback ran, as a pending libuv request does (SPEC C7).
    case hostLoop(UnsafeMutableRawPointer)
}

/// The engine's libuv loop: owns it (dedicated mode) or borrows it (host mode), tracks every handle the engine
/// opened so that shutdown closes them all.
final class EventLoop: @unchecked Sendable {
    let raw: UnsafeMutablePointer<uv_loop_t>
    let isHosted: Bool
    private var threadStarted = false
    private let finished = DispatchSemaphore(value: 0)
    /// `uv_loop_close`'s result after a dedicated loop stopped (0 = no handle leaked).
    private(set) var closeResult: Int32?
    /// The thread that runs the loop; in host mode the thread that created the engine.
    private var loopThread: pthread_t
    private var handles: [ObjectIdentifier: LoopHandle] = [:]
    /// SPEC C7, host mode: the one handle that is referenced while a callback the host waits for is pending
    /// (`pendingCallback()`), so that the host's `uv_run` returns only after it ran. An async handle: active
    /// without waking the loop. Made at the first hold; nil in dedicated mode.
    private var keepAlive: LoopAsync?
    private var pendingCallbacks = 0
    private var isClosed = false

    init(mode: RunMode) throws {
        switch mode {
        case .dedicatedThread:
            raw = .allocate(capacity: 1)
            let rc = uv_loop_init(raw)
            guard rc == 0 else {
                raw.deallocate()
                throw OutboxError.io(path: "uv_loop_init", message: String(cString: uv_strerror(rc)))
            }
            isHosted = false
        case .hostLoop(let pointer):
            raw = pointer.assumingMemoryBound(to: uv_loop_t.self)
            isHosted = true
        }
        loopThread = pthread_self()
    }

    /// Starts the dedicated thread (no-op in host mode). Handles created before this are registered on a loop
    /// that is not running yet, which libuv allows from any thread.
    /// Throws if the system refuses a thread (resource exhaustion): the caller then closes its handles and calls
    /// `runHereUntilClosed`.
    func startThread(name: String) throws(OutboxError) {
        guard !isHosted else { return }
        let started = DispatchSemaphore(value: 0)
        // Set before the thread exists (pthread_create orders it before everything the thread does): the loop
        // thread reads it in `isOnLoopThread`, so writing it after the start raced that read (TSan).
        threadStarted = true
        // A plain pthread, not Foundation's `Thread`: the library must not link Foundation proper (see Text.swift).
        let rc = startDetachedThread(stackSize: 1 << 20) { [self] in
            self.loopThread = pthread_self()
            // The kernel's name (top -H, perf, /proc).
            outbox_set_thread_name(name)
            started.signal()
            uv_run(self.raw, UV_RUN_DEFAULT)
            // Close callbacks of handles closed in the last iteration have run: the loop must be empty now.
            self.closeResult = uv_loop_close(self.raw)
            self.raw.deallocate()
            self.finished.signal()
        }
        guard rc == 0 else {
            threadStarted = false
            throw .io(path: "pthread_create", message: "no thread for the engine's loop: \(String(cString: strerror(rc)))")
        }
        // The loop thread's id must be known before any caller asks `isOnLoopThread`.
        started.wait()
    }

    /// After a failed `startThread`, once every handle was closed: runs the close callbacks on this thread, then
    /// closes and frees the loop.
    func runHereUntilClosed() {
        guard !isHosted, !threadStarted else { return }
        uv_run(raw, UV_RUN_DEFAULT)
        closeResult = uv_loop_close(raw)
        raw.deallocate()
    }

    /// Waits for the dedicated loop thread to end (after every handle was closed).
    func joinThread() {
        guard !isHosted, threadStarted else { return }
        finished.wait()
        threadStarted = false
    }

    var isOnLoopThread: Bool {
        if !isHosted && !threadStarted { return false }
        return pthread_equal(pthread_self(), loopThread) != 0
    }

    /// Ownership is checked, not only commented: loop-owned types call this at their entries; a debug build traps
    /// on a call from another thread.
    /// Before a dedicated loop's thread starts, the creating thread owns everything.
    func assertOnLoopThread(file: StaticString = #fileID, line: UInt = #line) {
        assert(ownsCallingThread, "called off the engine's loop thread", file: file, line: line)
    }

    /// Whether the calling thread owns what the loop owns: the loop's thread, or the creating one before a dedicated
    /// loop's thread starts (`ThreadOwner`'s check, in every build).
    var ownsCallingThread: Bool { isOnLoopThread || (!isHosted && !threadStarted) }

    func register(_ handle: LoopHandle) {
        handles[ObjectIdentifier(handle)] = handle
        if isHosted { uv_unref(handle.raw) }
    }

    func unregister(_ handle: LoopHandle) {
        handles.removeValue(forKey: ObjectIdentifier(handle))
    }

    /// Closes every handle the engine opened. Must run on the loop thread.
    func closeAll() {
        isClosed = true
        keepAlive = nil
        pendingCallbacks = 0
        for handle in Array(handles.values) { handle.close() }
        handles.removeAll()
    }

    /// SPEC C7: holds the host's loop open until the returned hold's `ran()`: call it once the callback the host
    /// waits for (a dispatch's, an idle wait's, a drain's) has run. While any hold is pending one referenced handle
    /// keeps `uv_run` going, as a pending libuv request does; the engine's other handles stay unref'd. A no-op in
    /// dedicated mode (the engine's thread runs its loop until shutdown) and after `closeAll`. Loop thread only.
    func pendingCallback() -> PendingCallback {
        assertOnLoopThread()
        guard isHosted, !isClosed else { return PendingCallback(loop: nil) }
        let handle = keepAlive ?? LoopAsync(loop: self) {}
        keepAlive = handle
        pendingCallbacks += 1
        if pendingCallbacks == 1 { uv_ref(handle.raw) }
        return PendingCallback(loop: self)
    }

    /// `callback` wrapped to hold the host's loop until it has run (`pendingCallback()`).
    func holding<T>(_ callback: @escaping (T) -> Void) -> (T) -> Void {
        let pending = pendingCallback()
        return { value in
            callback(value)
            pending.ran()
        }
    }

    fileprivate func callbackRan() {
        assertOnLoopThread()
        guard pendingCallbacks > 0 else { return }
        pendingCallbacks -= 1
        if pendingCallbacks == 0, let keepAlive { uv_unref(keepAlive.raw) }
    }

    var openHandleCount: Int { handles.count }
}

/// A callback the host's loop is held open for (`EventLoop.pendingCallback()`); `ran()` releases it, once.
final class PendingCallback {
    private weak var loop: EventLoop?

    init(loop: EventLoop?) { self.loop = loop }

    func ran() {
        loop?.callbackRan()
        loop = nil
    }
}

/// Base of the engine's libuv handles. The handle memory holds a retained reference to its Swift object in
/// `data`; the close callback releases it and frees the memory, so an object outlives every callback of its handle.
class LoopHandle {
    let raw: UnsafeMutablePointer<uv_handle_t>
    private(set) var isClosed = false
    weak var owner: EventLoop?

    init(type: uv_handle_type) {
        let size = uv_handle_size(type)
        raw = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16).bindMemory(to: uv_handle_t.self, capacity: 1)
    }

    /// Call once the handle was initialised: from now on libuv owns the memory until the close callback.
    func retainForLoop(_ loop: EventLoop) {
        raw.pointee.data = Unmanaged.passRetained(self).toOpaque()
        owner = loop
        loop.register(self)
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        owner?.unregister(self)
        uv_close(raw) { handle in
            guard let handle, let data = handle.pointee.data else { return }
            Unmanaged<LoopHandle>.fromOpaque(data).release()
            UnsafeMutableRawPointer(handle).deallocate()
        }
    }
}

/// A `uv_timer_t` running a closure on the loop thread.
final class LoopTimer: LoopHandle {
    /// Runs on the loop thread each time the timer fires; may be set after creation (before the first start).
    var action: () -> Void

    init(loop: EventLoop, action: @escaping () -> Void = {}) {
        self.action = action
        super.init(type: UV_TIMER)
        uv_timer_init(loop.raw, timer)
        retainForLoop(loop)
    }

    private var timer: UnsafeMutablePointer<uv_timer_t> { UnsafeMutableRawPointer(raw).assumingMemoryBound(to: uv_timer_t.self) }

    func start(afterMs: UInt64, repeatMs: UInt64 = 0) {
        guard !isClosed else { return }
        uv_timer_start(timer, { timer in
            guard let timer, let data = timer.pointee.data else { return }
            Unmanaged<LoopTimer>.fromOpaque(data).takeUnretainedValue().action()
        }, afterMs, repeatMs)
    }

    func stop() {
        guard !isClosed else { return }
        uv_timer_stop(timer)
    }

    /// An unref'd timer does not keep the loop alive (housekeeping).
    func unref() { uv_unref(raw) }
}

/// A `uv_async_t`: the one way other threads wake the loop. `send` is thread-safe until `close`.
final class LoopAsync: LoopHandle {
    private let action: () -> Void

    init(loop: EventLoop, action: @escaping () -> Void) {
        self.action = action
        super.init(type: UV_ASYNC)
        uv_async_init(loop.raw, async, { async in
            guard let async, let data = async.pointee.data else { return }
            Unmanaged<LoopAsync>.fromOpaque(data).takeUnretainedValue().action()
        })
        retainForLoop(loop)
    }

    private var async: UnsafeMutablePointer<uv_async_t> { UnsafeMutableRawPointer(raw).assumingMemoryBound(to: uv_async_t.self) }

    /// Callers must make sure `close` cannot run concurrently (the intake calls this under its lock).
    func send() { uv_async_send(async) }
}

/// Runs `body` on a new detached thread with the given stack size; returns `pthread_create`'s result.
private func startDetachedThread(stackSize: Int, _ body: @escaping () -> Void) -> Int32 {
    final class Body { let run: () -> Void; init(_ run: @escaping () -> Void) { self.run = run } }
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setstacksize(&attributes, stackSize)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    let context = Unmanaged.passRetained(Body(body)).toOpaque()
    var thread = pthread_t()
    let rc = pthread_create(&thread, &attributes, { context in
        if let context { Unmanaged<Body>.fromOpaque(context).takeRetainedValue().run() }
        return nil
    }, context)
    if rc != 0 { Unmanaged<Body>.fromOpaque(context).release() }
    return rc
}
