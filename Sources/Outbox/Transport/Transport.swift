import CCurlShim
import CLibUV
import Logging

/// Names one `send`; pass it to `cancel`.
struct TransferID: Hashable, Sendable, CustomStringConvertible {
    let rawValue: UInt64
    var description: String { "transfer-\(rawValue)" }
}

/// HTTP over libcurl's multi-socket API, driven by the engine's libuv loop (the pattern of curl's
/// `docs/examples/multi-uv.c`): curl tells us which sockets to watch (one `uv_poll_t` each) and when to wake it
/// (one `uv_timer_t`); we tell curl what happened with `curl_multi_socket_action`. Nothing blocks, no thread is
/// started, and every handle is closed by `close()`.
///
/// At most `maxActiveTransfers` transfers are in curl at once (SPEC C3); the others wait in a FIFO queue here,
/// so their waiting time does not count against their timeout. Loop thread only, like every engine object.
///
/// ```swift
/// let transport = try Transport(loop: loop, options: TransportOptions())
/// transport.send(HTTPRequest(url: url, headers: headers, body: body)) { result in
///     switch result {
///     case .response(let response): print(response.status)
///     case .failure(let failure): print(failure)
///     }
/// }
/// ```
///
/// Completions run on the loop thread, never inside `send` or `cancel` (a rejected or cancelled transfer
/// completes on the next loop turn), except during `close()`, which completes everything before it returns.
final class Transport {
    let options: TransportOptions
    private let loop: EventLoop
    /// Curl's handles have no lock of their own: every entry is the loop thread's.
    private let owner: ThreadOwner
    private let logger: Logger
    /// `CURLM *`; nil once closed.
    private var multi: UnsafeMutableRawPointer?
    /// `CURLSH *` sharing TLS sessions between easy handles, so a new connection to the same host resumes
    /// its TLS session instead of a full handshake. (The multi handle already shares connections and DNS.)
    private var share: UnsafeMutableRawPointer?
    /// The one timer curl asks for (CURLMOPT_TIMERFUNCTION).
    private var curlTimer: LoopTimer?
    /// Runs completions that must not run inside `send`/`cancel`.
    private var deferTimer: LoopTimer?
    private var polls: [Int32: LoopPoll] = [:]

    private var queue: [CurlTransfer] = []
    private var active: [TransferID: CurlTransfer] = [:]
    private var activeByEasy: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private var deferred: [(CurlTransfer, TransferResult)] = []
    /// Easy handles of transfers that succeeded, for the next ones (at most one per slot).
    private var idleHandles: [EasyHandle] = []
    private var nextID: UInt64 = 1
    private var isClosed = false
    /// Transfers inside curl per lane (`SharedTransport`): each engine's own cap (SPEC C3) inside the loop-wide one.
    private var laneActive: [Int: Int] = [:]
    /// The per-engine cap of a lane.
    var laneCap = 3

    /// Transfers inside curl right now (≤ `options.maxActiveTransfers`).
    var activeCount: Int { active.count }
    /// Transfers waiting for a free slot.
    var queuedCount: Int { queue.count }
    /// The most transfers ever inside curl at once (SPEC C3 says 3).
    private(set) var maxActiveObserved = 0
    /// Sockets curl currently asked us to watch.
    var watchedSocketCount: Int { polls.count }
    /// Easy handles kept for reuse, and how many were ever created (for tests).
    var idleHandleCount: Int { idleHandles.count }
    private(set) var handlesCreated = 0
    /// Requests sent again at once on a new connection because a kept-alive one failed before any answer
    /// (`CurlTransfer.failedOnKeptAliveConnection`).
    private(set) var resentOnFreshConnection = 0
    /// Same-origin 307/308 redirects followed (SPEC R1).
    private(set) var redirectsFollowed = 0

    /// Creates the multi handle and the loop handles. Call on the loop thread (or before the loop runs).
    init(loop: EventLoop, options: TransportOptions,
         logger: Logger = Logger(label: "outbox.transport", factory: { _ in SwiftLogNoOpLogHandler() })) throws {
        try options.validate()
        let global = CurlGlobal.initResult
        guard global == CURLE_OK else {
            throw OutboxError.io(path: "curl_global_init", message: CurlTransfer.describe(global))
        }
        guard let multi = curl_multi_init() else {
            throw OutboxError.io(path: "curl_multi_init", message: "libcurl could not create a multi handle (out of memory)")
        }
        self.loop = loop
        self.owner = ThreadOwner(loop: loop)
        self.options = options
        self.logger = logger
        self.multi = multi
        self.share = Self.makeShare()

        curlTimer = LoopTimer(loop: loop) { [weak self] in self?.curlTimerFired() }
        deferTimer = LoopTimer(loop: loop) { [weak self] in self?.runDeferred() }

        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = outbox_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, context)
        _ = outbox_multi_setopt_socket_function(multi) { _, socket, what, context, _ in
            guard let context else { return 0 }
            Unmanaged<Transport>.fromOpaque(context).takeUnretainedValue().curlSocketChanged(socket, what: what)
            return 0
        }
        _ = outbox_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, context)
        _ = outbox_multi_setopt_timer_function(multi) { _, timeoutMs, context in
            guard let context else { return 0 }
            Unmanaged<Transport>.fromOpaque(context).takeUnretainedValue().curlTimerChanged(timeoutMs)
            return 0
        }
        // Idle connections kept for reuse: enough for every slot, a few more for a second host. On a shared transport
        // the slots are the loop's, so the pool is bounded per loop, not per engine (SPEC F4).
        _ = outbox_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(4, options.maxActiveTransfers + 1))
    }

    deinit {
        // The owner should have called close(). Still: never let curl call back into an object being destroyed,
        // and complete every transfer. Off the loop thread the uv handles are left to EventLoop.closeAll().
        guard !isClosed, let multi else { return }
        _ = outbox_multi_setopt_socket_function(multi, nil)
        _ = outbox_multi_setopt_timer_function(multi, nil)
        let pending = deferred + (queue + active.values).map { ($0, TransferResult.failure(.cancelled)) }
        for transfer in active.values {
            if let easy = transfer.easy { curl_multi_remove_handle(multi, easy) }
            transfer.release()
        }
        curl_multi_cleanup(multi)
        idleHandles.removeAll()
        if let share { curl_share_cleanup(share) }
        if loop.isOnLoopThread {
            for poll in polls.values { poll.close() }
            curlTimer?.close()
            deferTimer?.close()
        }
        for (transfer, result) in pending { transfer.completion(result) }
    }

    // MARK: - API

    /// Queues `request`; `completion` runs once on the loop thread with the answer or the failure.
    @discardableResult
    func send(_ request: HTTPRequest, completion: @escaping (TransferResult) -> Void) -> TransferID {
        send(request, lane: nil, completion: completion)
    }

    /// `send` for one engine of a shared transport: at most `laneCap` of a lane's transfers are in curl at once.
    @discardableResult
    func send(_ request: HTTPRequest, lane: Int?, completion: @escaping (TransferResult) -> Void) -> TransferID {
        send(request, lane: lane, refusing: false, completion: completion)
    }

    /// `refusing`: the caller (a closed lane) will not send: the transfer is cancelled, its completion runs on the
    /// next loop turn all the same, as every send's does.
    func send(_ request: HTTPRequest, lane: Int?, refusing: Bool,
              completion: @escaping (TransferResult) -> Void) -> TransferID {
        owner.check()
        // `make torture`'s phase file (TestingPhase): the request is in flight until its completion runs.
        let completion = TestingPhase.isOn ? TestingPhase.request(completion) : completion
        let id = TransferID(rawValue: nextID)
        nextID += 1
        let transfer = CurlTransfer(id: id, request: request, bodyCap: options.maxResponseBodyBytes, completion: completion)
        transfer.lane = lane
        guard !isClosed else {
            // No loop handle is left to defer on: the transport is gone, the caller learns it at once.
            completion(.failure(.cancelled))
            return id
        }
        if refusing {
            completeLater(transfer, .failure(.cancelled))
            return id
        }
        if let problem = request.validationProblem {
            completeLater(transfer, .failure(.invalidRequest(reason: problem)))
            return id
        }
        queue.append(transfer)
        startQueued()
        return id
    }

    /// Stops one transfer, queued or in flight; its completion gets `.cancelled` on the next loop turn. The slot
    /// goes to the next queued transfer. Unknown or finished ids are ignored.
    func cancel(_ id: TransferID) {
        owner.check()
        if let index = queue.firstIndex(where: { $0.id == id }) {
            completeLater(queue.remove(at: index), .failure(.cancelled))
        } else if let transfer = active[id] {
            detach(transfer)
            completeLater(transfer, .failure(.cancelled))
            startQueued()
        }
    }

    /// Cancels the queued and in-flight transfers of one lane, and only those: an engine leaving a shared transport.
    /// Like `close()`, every completion of the lane has run when this returns (`.cancelled` unless it had finished).
    func cancelAll(lane: Int) {
        owner.check()
        var pending: [(CurlTransfer, TransferResult)] = []
        deferred.removeAll { item in
            guard item.0.lane == lane else { return false }
            pending.append(item)
            return true
        }
        queue.removeAll { transfer in
            guard transfer.lane == lane else { return false }
            pending.append((transfer, .failure(.cancelled)))
            return true
        }
        for transfer in Array(active.values) where transfer.lane == lane {
            detach(transfer)
            pending.append((transfer, .failure(.cancelled)))
        }
        startQueued()
        for (transfer, result) in pending { transfer.completion(result) }
    }

    /// Transfers of `lane` in curl now, and waiting (for tests).
    func laneCounts(_ lane: Int) -> (active: Int, queued: Int) {
        (laneActive[lane] ?? 0, queue.reduce(0) { $0 + ($1.lane == lane ? 1 : 0) })
    }

    /// Cancels every queued and in-flight transfer.
    func cancelAll() {
        owner.check()
        let waiting = queue
        queue.removeAll()
        for transfer in waiting { completeLater(transfer, .failure(.cancelled)) }
        for transfer in Array(active.values) {
            detach(transfer)
            completeLater(transfer, .failure(.cancelled))
        }
    }

    /// Cancels everything, frees curl and closes every libuv handle the transport opened (SPEC C8). Every
    /// pending completion has run when this returns (`.cancelled` unless it had already finished). Later
    /// `send`s complete at once with `.cancelled`. Call on the loop thread.
    func close() {
        guard !isClosed else { return }
        owner.check()
        isClosed = true
        var pending = deferred
        deferred.removeAll()
        pending += queue.map { ($0, .failure(.cancelled)) }
        queue.removeAll()
        for transfer in Array(active.values) {
            detach(transfer)
            pending.append((transfer, .failure(.cancelled)))
        }
        if let multi {
            // curl may call the socket callback here, to drop the sockets of cached connections: it must find
            // `self` whole, and `curlSocketChanged` only closes polls once `isClosed` is set.
            curl_multi_cleanup(multi)
            self.multi = nil
        }
        idleHandles.removeAll()
        if let share { curl_share_cleanup(share) }
        share = nil
        // Whatever curl did not remove itself.
        for poll in polls.values { poll.close() }
        polls.removeAll()
        curlTimer?.close()
        curlTimer = nil
        deferTimer?.close()
        deferTimer = nil
        for (transfer, result) in pending { transfer.completion(result) }
    }

    // MARK: - Queue

    /// Moves queued transfers into curl while slots are free (SPEC C3).
    private func startQueued() {
        while !isClosed, let multi, active.count < options.maxActiveTransfers, !queue.isEmpty {
            let transfer: CurlTransfer
            if laneActive.isEmpty && queue[0].lane == nil {
                transfer = queue.removeFirst()
            } else {
                // First come, first served among the lanes below their own cap (SPEC C3 per engine).
                guard let index = queue.firstIndex(where: { $0.lane.map { laneActive[$0, default: 0] < laneCap } ?? true })
                else { break }
                transfer = queue.remove(at: index)
            }
            let reused = idleHandles.popLast()
            if let failure = transfer.prepare(options: options, share: share, reusing: reused) {
                transfer.release()
                completeLater(transfer, .failure(failure))
                continue
            }
            if reused == nil { handlesCreated += 1 }
            guard let easy = transfer.easy else { continue }
            let rc = curl_multi_add_handle(multi, easy)
            guard rc == CURLM_OK else {
                transfer.release()
                let message = curl_multi_strerror(rc).map { String(cString: $0) } ?? "curl_multi_add_handle failed"
                completeLater(transfer, .failure(.other(code: Int32(rc.rawValue), message: message)))
                continue
            }
            // curl_multi_add_handle has asked for a 0 ms timeout through the timer callback: it starts on the
            // next loop turn.
            active[transfer.id] = transfer
            activeByEasy[easy] = transfer
            if let lane = transfer.lane { laneActive[lane, default: 0] += 1 }
            maxActiveObserved = max(maxActiveObserved, active.count)
        }
    }

    /// Takes a transfer out of curl. Its easy handle is kept for the next transfer when `reuse` says so (a
    /// transfer that succeeded), and freed otherwise: a handle is only reused in the state curl leaves after a
    /// complete exchange. Never call from inside a curl callback.
    private func detach(_ transfer: CurlTransfer, reuse: Bool = false) {
        if active.removeValue(forKey: transfer.id) != nil, let lane = transfer.lane {
            let left = laneActive[lane, default: 1] - 1
            laneActive[lane] = left > 0 ? left : nil
        }
        if let easy = transfer.easy {
            activeByEasy.removeValue(forKey: easy)
            // May call the socket callback (a half-used connection is closed, not cached).
            if let multi { curl_multi_remove_handle(multi, easy) }
        }
        if reuse, !isClosed, multi != nil, idleHandles.count < options.maxActiveTransfers,
           let handle = transfer.releaseKeepingHandle() {
            idleHandles.append(handle)
        } else {
            transfer.release()
        }
    }

    /// Completes `transfer` on the next loop turn: callers of `send` and `cancel` never see their completion
    /// run inside the call.
    private func completeLater(_ transfer: CurlTransfer, _ result: TransferResult) {
        if case .failure(let failure) = result {
            logger.debug("transfer ended", metadata: ["outbox.transfer": "\(transfer.id)", "outbox.failure": "\(failure)"])
        }
        deferred.append((transfer, result))
        deferTimer?.start(afterMs: 0)
    }

    private func runDeferred() {
        let items = deferred
        deferred.removeAll()
        for (transfer, result) in items { transfer.completion(result) }
    }

    // MARK: - curl ⇄ libuv

    /// CURLMOPT_SOCKETFUNCTION: watch `socket` for `what`, or stop watching it.
    private func curlSocketChanged(_ socket: Int32, what: Int32) {
        if what == CURL_POLL_REMOVE {
            polls.removeValue(forKey: socket)?.close()
            return
        }
        guard !isClosed else { return }
        var events: Int32 = 0
        if what & CURL_POLL_IN != 0 { events |= LoopPoll.readable }
        if what & CURL_POLL_OUT != 0 { events |= LoopPoll.writable }
        let poll: LoopPoll
        if let existing = polls[socket] {
            poll = existing
        } else {
            do {
                poll = try LoopPoll(loop: loop, socket: socket) { [weak self] status, events in
                    self?.socketReady(socket, status: status, events: events)
                }
            } catch {
                // Without a watcher the transfer cannot progress; its timeout will end it.
                logger.error("cannot watch curl's socket", metadata: ["outbox.socket": "\(socket)", "outbox.error": "\(error)"])
                return
            }
            polls[socket] = poll
        }
        let rc = poll.start(events: events)
        if rc != 0 {
            logger.error("uv_poll_start failed", metadata: ["outbox.socket": "\(socket)", "outbox.error": "\(String(cString: uv_strerror(rc)))"])
        }
    }

    /// CURLMOPT_TIMERFUNCTION: -1 deletes the timer; otherwise curl wants `curl_multi_socket_action` with
    /// CURL_SOCKET_TIMEOUT after `timeoutMs` (never from inside this callback).
    private func curlTimerChanged(_ timeoutMs: Int) {
        guard !isClosed, let curlTimer else { return }
        if timeoutMs < 0 {
            curlTimer.stop()
        } else {
            // 0 means "as soon as possible"; libuv 1.44 runs a 0 ms timer started from a timer callback again in
            // the same pass, so use 1 ms to let the loop poll for I/O in between (as multi-uv.c does).
            curlTimer.start(afterMs: UInt64(max(1, timeoutMs)))
        }
    }

    private func curlTimerFired() {
        guard !isClosed, let multi else { return }
        var running: Int32 = 0
        _ = curl_multi_socket_action(multi, CURL_SOCKET_TIMEOUT, 0, &running)
        collectFinished()
    }

    private func socketReady(_ socket: Int32, status: Int32, events: Int32) {
        guard !isClosed, let multi else { return }
        var flags: Int32 = 0
        if status < 0 {
            // libuv has stopped this poll. curl learns of the error and normally closes the socket (REMOVE);
            // re-arming here could spin on a socket error curl does not read, so a stuck transfer is left to
            // its timeout instead.
            flags = CURL_CSELECT_ERR
        } else {
            if events & LoopPoll.readable != 0 { flags |= CURL_CSELECT_IN }
            if events & LoopPoll.writable != 0 { flags |= CURL_CSELECT_OUT }
        }
        var running: Int32 = 0
        _ = curl_multi_socket_action(multi, socket, flags, &running)
        collectFinished()
    }

    /// Reads every finished transfer after a `curl_multi_socket_action`, refills the slots, then completes.
    private func collectFinished() {
        var finished: [(CurlTransfer, TransferResult)] = []
        var remaining: Int32 = 0
        while let multi, let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            // The message dies with curl_multi_remove_handle: copy what we need first.
            let code = message.pointee.data.result
            guard let transfer = activeByEasy[easy] else {
                curl_multi_remove_handle(multi, easy)
                continue
            }
            if transfer.failedOnKeptAliveConnection(code: code) {
                detach(transfer)
                transfer.prepareResendOnFreshConnection()
                resentOnFreshConnection += 1
                logger.debug("kept-alive connection failed before the answer; sending again on a new one",
                             metadata: ["outbox.transfer": "\(transfer.id)", "outbox.curl": "\(code.rawValue)"])
                queue.insert(transfer, at: 0)
                continue
            }
            let result = transfer.result(code: code)
            if case .response(let response) = result, let target = transfer.sameOriginRedirect(of: response) {
                detach(transfer, reuse: code == CURLE_OK)
                transfer.prepareRedirect(to: target)
                redirectsFollowed += 1
                logger.debug("following a same-origin redirect",
                             metadata: ["outbox.transfer": "\(transfer.id)", "outbox.status": "\(response.status)",
                                        "outbox.hop": "\(transfer.redirectsFollowed)"])
                // First in line: the slot it leaves is its own, and the hop is part of the same attempt.
                queue.insert(transfer, at: 0)
                continue
            }
            if code != CURLE_OK, case .response = result {
                logger.debug("the answer was complete; the stream or connection ended after it",
                             metadata: ["outbox.transfer": "\(transfer.id)", "outbox.curl": "\(code.rawValue)"])
            }
            detach(transfer, reuse: code == CURLE_OK)
            if case .response(let response) = result {
                logger.debug("transfer answered", metadata: ["outbox.transfer": "\(transfer.id)", "outbox.status": "\(response.status)"])
            } else if case .failure(let failure) = result {
                logger.debug("transfer failed", metadata: ["outbox.transfer": "\(transfer.id)", "outbox.failure": "\(failure)"])
            }
            finished.append((transfer, result))
        }
        startQueued()
        // Completions last: they may send, cancel or even close, and curl is not inside any call now.
        for (transfer, result) in finished { transfer.completion(result) }
    }

    private static func makeShare() -> UnsafeMutableRawPointer? {
        guard let share = curl_share_init() else { return nil }
        guard outbox_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue)) == CURLSHE_OK else {
            curl_share_cleanup(share)
            return nil
        }
        return share
    }
}

/// `curl_global_init` exactly once per process: a `static let` is initialised once, thread-safely.
enum CurlGlobal {
    static let initResult: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))
}
