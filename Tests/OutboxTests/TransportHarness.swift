import Foundation
@testable import Outbox

/// A `Transport` on a real libuv loop running on its own thread (`EventLoop(mode: .dedicatedThread)`), as the
/// engine runs it. Tests hand work to the loop thread through a `uv_async_t`, the engine's own way in, and
/// wait for completions with continuations.
final class TransportHarness: @unchecked Sendable {
    let loop: EventLoop
    /// Touch only inside `onLoop` / `sync` closures.
    let transport: Transport
    private let jobs: JobQueue
    private let wake: LoopAsync

    /// Short timeouts so that a broken test fails in seconds; never a proxy, so nothing leaves loopback.
    static func options(maxActive: Int = 3, requestTimeout: Duration = .seconds(5)) -> TransportOptions {
        var options = TransportOptions()
        options.maxActiveTransfers = maxActive
        options.requestTimeout = requestTimeout
        options.connectTimeout = .seconds(2)
        options.proxy = ""
        return options
    }

    init(options: TransportOptions = TransportHarness.options()) throws {
        loop = try EventLoop(mode: .dedicatedThread)
        transport = try Transport(loop: loop, options: options)
        let jobs = JobQueue()
        self.jobs = jobs
        wake = LoopAsync(loop: loop) { jobs.drain() }
        jobs.wake = wake
        try loop.startThread(name: "transport-test-loop")
    }

    /// Runs `body` on the loop thread.
    func onLoop(_ body: @escaping @Sendable (Transport) -> Void) {
        let transport = UncheckedBox(transport)
        jobs.post { body(transport.value) }
    }

    /// Runs `body` on the loop thread and returns its value.
    func sync<T: Sendable>(_ body: @escaping @Sendable (Transport) -> T) async -> T {
        await withCheckedContinuation { continuation in
            onLoop { continuation.resume(returning: body($0)) }
        }
    }

    /// Sends one request and waits for its completion.
    func send(_ request: HTTPRequest) async -> TransferResult {
        await withCheckedContinuation { continuation in
            onLoop { $0.send(request) { continuation.resume(returning: $0) } }
        }
    }

    /// Sends one request and returns its id at once; the result arrives through `results`.
    func start(_ request: HTTPRequest, into results: ResultBox) async -> TransferID {
        await sync { transport in
            transport.send(request) { results.add($0) }
        }
    }

    /// Closes the transport and the test's async handle on the loop thread, waits for the loop thread to end
    /// and returns `uv_loop_close`'s result (0: no handle was left open).
    func shutdown() async -> Int32? {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let jobs = self.jobs
            onLoop { transport in
                transport.close()
                jobs.closeWake()
                continuation.resume()
            }
        }
        loop.joinThread()
        return loop.closeResult
    }
}

/// Closures for the loop thread, posted from test threads; `uv_async_send` wakes the loop to drain them.
final class JobQueue: @unchecked Sendable {
    private let lock = NSLock()
    private var jobs: [@Sendable () -> Void] = []
    private var closed = false
    var wake: LoopAsync?

    func post(_ job: @escaping @Sendable () -> Void) {
        lock.withLock {
            guard !closed else { return }
            jobs.append(job)
            // Under the lock: `closeWake` cannot close the handle while we send (LoopAsync's contract).
            wake?.send()
        }
    }

    func drain() {
        let batch = lock.withLock { () -> [@Sendable () -> Void] in
            defer { jobs.removeAll() }
            return jobs
        }
        for job in batch { job() }
    }

    /// On the loop thread: no more jobs; the async handle closes.
    func closeWake() {
        lock.withLock {
            closed = true
            wake?.close()
            wake = nil
        }
    }
}

/// Results collected from completions that run on the loop thread; `waitFor` resumes when enough arrived.
final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [TransferResult] = []
    private var waiters: [(count: Int, continuation: CheckedContinuation<[TransferResult], Never>)] = []

    func add(_ result: TransferResult) {
        let ready = lock.withLock { () -> [(CheckedContinuation<[TransferResult], Never>, [TransferResult])] in
            results.append(result)
            let ready = waiters.filter { $0.count <= results.count }.map { ($0.continuation, results) }
            waiters.removeAll { $0.count <= results.count }
            return ready
        }
        for (continuation, results) in ready { continuation.resume(returning: results) }
    }

    var all: [TransferResult] { lock.withLock { results } }

    /// Waits until `count` results arrived and returns them in arrival order.
    func waitFor(_ count: Int) async -> [TransferResult] {
        await withCheckedContinuation { continuation in
            let now = lock.withLock { () -> [TransferResult]? in
                if results.count >= count { return results }
                waiters.append((count, continuation))
                return nil
            }
            if let now { continuation.resume(returning: now) }
        }
    }
}

/// Holds a transport that a test releases on the loop thread.
final class TransportHolder: @unchecked Sendable {
    var transport: Transport?
    init(_ transport: Transport) { self.transport = transport }
}

struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}

extension TransferResult {
    var response: HTTPResponse? {
        if case .response(let response) = self { return response }
        return nil
    }
    var failure: TransportFailure? {
        if case .failure(let failure) = self { return failure }
        return nil
    }
}
