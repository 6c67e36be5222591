import CLibUV

/// A `uv_poll_t` watching a socket that someone else owns (curl): libuv only reports readiness, it never
/// reads, writes or closes the socket. Loop thread only.
final class LoopPoll: LoopHandle {
    /// `status` < 0 is a libuv error (libuv has then stopped the poll); `events` is `UV_READABLE | UV_WRITABLE`.
    private let action: (_ status: Int32, _ events: Int32) -> Void
    let socket: Int32
    /// The events last asked for with `start`.
    private(set) var events: Int32 = 0

    static let readable = Int32(bitPattern: UV_READABLE.rawValue)
    static let writable = Int32(bitPattern: UV_WRITABLE.rawValue)

    /// Throws when libuv refuses the socket (for example `EEXIST`: another poll handle still watches it).
    init(loop: EventLoop, socket: Int32, action: @escaping (_ status: Int32, _ events: Int32) -> Void) throws {
        self.action = action
        self.socket = socket
        super.init(type: UV_POLL)
        let rc = uv_poll_init_socket(loop.raw, poll, socket)
        guard rc == 0 else {
            // libuv did not take the handle: free it here, there will be no close callback.
            UnsafeMutableRawPointer(raw).deallocate()
            throw OutboxError.io(path: "uv_poll_init_socket(\(socket))", message: String(cString: uv_strerror(rc)))
        }
        retainForLoop(loop)
    }

    private var poll: UnsafeMutablePointer<uv_poll_t> { UnsafeMutableRawPointer(raw).assumingMemoryBound(to: uv_poll_t.self) }

    /// Starts or changes what is watched; 0 stops watching. Returns libuv's error code (0 = fine).
    @discardableResult
    func start(events: Int32) -> Int32 {
        guard !isClosed else { return 0 }
        self.events = events
        guard events != 0 else { return uv_poll_stop(poll) }
        return uv_poll_start(poll, events, { poll, status, events in
            guard let poll, let data = poll.pointee.data else { return }
            Unmanaged<LoopPoll>.fromOpaque(data).takeUnretainedValue().action(status, events)
        })
    }
}
