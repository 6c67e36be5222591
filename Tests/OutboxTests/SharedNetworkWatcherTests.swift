import CLibUV
import Foundation
import Testing
@testable import Outbox

/// The fleet's one netlink watcher (SPEC F1, N1, N2): what each device is told when the network changes, and the
/// watcher's life on a host's loop.
@Suite("SharedNetworkWatcher (SPEC N1, N2, R6)")
struct SharedNetworkWatcherTests {
    typealias State = SharedNetworkWatcher.State
    static let up = State(online: true, defaultInterface: "eth0")
    static let down = State(online: false, defaultInterface: nil)
    static let moved = State(online: true, defaultInterface: "wlan0")

    // SPEC N2: the network going away takes every device offline; coming back is a network change (R6).
    @Test func goingOfflineAndBackIsForwardedToEveryDevice() {
        #expect(SharedNetworkWatcher.Action.decide(from: Self.up, to: Self.down, heldOffline: false) == .offline)
        #expect(SharedNetworkWatcher.Action.decide(from: Self.down, to: Self.up, heldOffline: false) == .online)
    }

    // SPEC R6: the default route moving to another interface while online resets back-off too.
    @Test func aDefaultRouteMovingIsANetworkChange() {
        #expect(SharedNetworkWatcher.Action.decide(from: Self.up, to: Self.moved, heldOffline: false) == .moved)
        #expect(SharedNetworkWatcher.Action.decide(from: Self.up, to: Self.up, heldOffline: false) == nil)
        #expect(SharedNetworkWatcher.Action.decide(from: Self.down, to: Self.down, heldOffline: false) == nil)
    }

    // SPEC F1: a device the fleet holds offline stays offline whatever the network does, and when its offline period
    // ends it comes back only if the network is up.
    @Test func aDeviceHeldOfflineStaysOfflineUntilReleasedAndThenFollowsTheNetwork() {
        for (old, new) in [(Self.up, Self.down), (Self.down, Self.up), (Self.up, Self.moved)] {
            #expect(SharedNetworkWatcher.Action.decide(from: old, to: new, heldOffline: true) == nil)
        }
        #expect(SharedNetworkWatcher.Action.whenReleased(network: Self.up) == .online)
        #expect(SharedNetworkWatcher.Action.whenReleased(network: Self.down) == nil)
    }

    // SPEC N1 on a host's loop: the watcher reads the state at once, never keeps the loop alive, and leaves no handle
    // open once closed (uv_loop_close == 0).
    @Test func theWatcherLivesOnAHostLoopWithoutKeepingItAliveAndClosesCleanly() throws {
        let loop = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        defer { loop.deallocate() }
        #expect(uv_loop_init(loop) == 0)
        let watcher = try SharedNetworkWatcher(hostLoop: UnsafeMutableRawPointer(loop), logger: .init(label: "test")) { _, _ in }
        #expect(watcher.state == State(NetworkState.current()))
        // Returns at once: the netlink poll is unref'd.
        #expect(uv_run(loop, UV_RUN_DEFAULT) == 0)
        watcher.close()
        uv_run(loop, UV_RUN_DEFAULT)
        #expect(uv_loop_close(loop) == 0)
    }
}
