import Dispatch
import Synchronization

/// GET requests from a thread that may block — a tool's, not the engine's: the fleet reads an `outbox-mock`'s control
/// API with it (SPEC F2). The engine's own transport (curl, on a libuv loop of its own thread), with the caller
/// waiting for each answer; bodies too large to hold go to a sink as they arrive. One URL parser for every caller:
/// curl's.
package final class BlockingHTTPClient: @unchecked Sendable {
    private let loop: EventLoop
    private let transport: Transport
    private var wake: LoopAsync?
    /// Work for the loop thread, handed over under its lock and run by `wake`.
    private let work = LoopWork()

    package enum Failure: Error, Equatable, CustomStringConvertible {
        /// No answer: the connection failed, timed out, or the answer was not HTTP.
        case transport(String)
        /// The URL is not one the transport takes.
        case invalid(String)

        package var description: String {
            switch self {
            case .transport(let reason): reason
            case .invalid(let reason): reason
            }
        }
    }

    package init(requestTimeout: Duration = .seconds(120)) throws {
        loop = try EventLoop(mode: .dedicatedThread)
        var options = TransportOptions()
        options.requestTimeout = requestTimeout
        options.userAgent = "outbox/\(OutboxVersion.string)"
        transport = try Transport(loop: loop, options: options)
        let work = self.work
        wake = LoopAsync(loop: loop) { work.run() }
        try loop.startThread(name: "outbox-http")
    }

    deinit { close() }

    /// `GET url`; the body goes to `sink` as it arrives (on the client's loop thread, in order). Returns the status.
    package func get(_ url: String, sink: @escaping @Sendable (UnsafeRawBufferPointer) -> Void) throws(Failure) -> Int {
        let request = HTTPRequest(method: .get, url: url, bodySink: sink)
        if let problem = request.validationProblem { throw .invalid("\(url): \(problem)") }
        guard wake != nil else { throw .transport("the client is closed") }
        let answer = Mutex<TransferResult?>(nil)
        let done = DispatchSemaphore(value: 0)
        let transport = self.transport
        submit {
            transport.send(request) { result in
                answer.withLock { $0 = result }
                done.signal()
            }
        }
        done.wait()
        switch answer.withLock({ $0 }) {
        case .response(let response)?: return response.status
        case .failure(let failure)?: throw .transport("\(failure)")
        case nil: throw .transport("no answer")
        }
    }

    /// `GET url`, the whole body (small answers).
    package func get(_ url: String) throws(Failure) -> (status: Int, body: [UInt8]) {
        let body = Mutex<[UInt8]>([])
        let status = try get(url) { piece in body.withLock { $0.append(contentsOf: piece) } }
        return (status, body.withLock { $0 })
    }

    /// Stops the loop and its thread. Idempotent.
    package func close() {
        guard let wake else { return }
        self.wake = nil
        let transport = self.transport, loop = self.loop
        submit(on: wake) {
            transport.close()
            loop.closeAll()
        }
        loop.joinThread()
    }

    private func submit(_ item: @escaping () -> Void) {
        guard let wake else { return }
        submit(on: wake, item)
    }

    private func submit(on wake: LoopAsync, _ item: @escaping () -> Void) {
        work.add(item)
        wake.send()
    }
}

/// Closures handed to a loop thread: added by any thread, run there in order.
private final class LoopWork: @unchecked Sendable {
    private let lock = Mutex<Void>(())
    private var items: [() -> Void] = []

    func add(_ item: @escaping () -> Void) {
        lock.withLock { _ in items.append(item) }
    }

    func run() {
        let taken = lock.withLock { _ in
            defer { items.removeAll() }
            return items
        }
        for item in taken { item() }
    }
}
