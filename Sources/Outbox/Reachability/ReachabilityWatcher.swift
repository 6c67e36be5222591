import CLibUV
import CNetlink
import FoundationEssentials
import Glibc
import Logging

/// SPEC N1: listens to rtnetlink (links, addresses, routes) through the loop — a `uv_poll_t` on the netlink
/// socket, no polling — and reports every change of `NetworkState`.
final class ReachabilityWatcher {
    private(set) var state: NetworkState
    private let onChange: (NetworkState) -> Void
    private var poll: NetlinkPoll?
    private let fd: Int32
    /// The netlink socket and its poll are the loop thread's.
    private let owner: ThreadOwner

    init(loop: EventLoop, logger: Logger, onChange: @escaping (NetworkState) -> Void) throws {
        let fd = outbox_netlink_open()
        guard fd >= 0 else {
            throw OutboxError.io(path: "rtnetlink", message: String(cString: strerror(-fd)))
        }
        self.fd = fd
        self.owner = ThreadOwner(loop: loop)
        self.onChange = onChange
        self.state = NetworkState.current()
        let poll = NetlinkPoll(loop: loop, fd: fd)
        self.poll = poll
        poll.action = { [unowned self] in
            self.owner.check()
            let drained = outbox_netlink_drain(self.fd)
            if drained < 0 && drained != -ENOBUFS {
                logger.warning("rtnetlink read failed", metadata: ["outbox.error": "\(String(cString: strerror(-drained)))"])
            }
            let next = NetworkState.current()
            guard next != self.state else { return }
            self.state = next
            self.onChange(next)
        }
        poll.start()
    }

    func close() {
        owner.check()
        poll?.close()
        poll = nil
        Glibc.close(fd)
    }
}

/// A readable-only `uv_poll_t`.
final class NetlinkPoll: LoopHandle {
    var action: () -> Void = {}

    init(loop: EventLoop, fd: Int32) {
        super.init(type: UV_POLL)
        uv_poll_init(loop.raw, UnsafeMutableRawPointer(raw).assumingMemoryBound(to: uv_poll_t.self), fd)
        retainForLoop(loop)
    }

    func start() {
        uv_poll_start(UnsafeMutableRawPointer(raw).assumingMemoryBound(to: uv_poll_t.self), Int32(UV_READABLE.rawValue)) { poll, _, _ in
            guard let poll, let data = poll.pointee.data else { return }
            Unmanaged<NetlinkPoll>.fromOpaque(data).takeUnretainedValue().action()
        }
    }
}
