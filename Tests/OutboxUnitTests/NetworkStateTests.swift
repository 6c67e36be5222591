import Testing
@testable import Outbox

@Suite("Reachability state (SPEC N1)")
struct NetworkStateTests {
    private let header = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"

    // SPEC N1: the default route's interface, from /proc/net/route.
    @Test func theIPv4DefaultRouteIsFound() {
        let table = header
            + "eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
            + "wlan0\t00000000\t0100A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
        #expect(NetworkState.defaultRouteInterface(ipv4: table, ipv6: "") == "wlan0")
    }

    // SPEC N1: no default route, no way out.
    @Test func withoutADefaultRouteThereIsNoInterface() {
        let table = header + "eth0\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
        #expect(NetworkState.defaultRouteInterface(ipv4: table, ipv6: "") == nil)
    }

    // SPEC N1: an IPv6 default route counts; loopback and reject routes do not.
    @Test func theIPv6DefaultRouteCountsButNotRejectRoutes() {
        let zero = String(repeating: "0", count: 32)
        let reject = "\(zero) 00 \(zero) 00 \(zero) ffffffff 00000001 00000000 00200200       lo\n"
        let good = "\(zero) 00 \(zero) 00 fe800000000000000000000000000001 00000400 00000001 00000000 00000003     eth1\n"
        #expect(NetworkState.defaultRouteInterface(ipv4: header, ipv6: reject) == nil)
        #expect(NetworkState.defaultRouteInterface(ipv4: header, ipv6: reject + good) == "eth1")
    }

    @Test func loopbackEndpointsAreAlwaysReachable() {
        #expect(isLoopbackEndpoint("http://127.0.0.1:8080"))
        #expect(isLoopbackEndpoint("http://localhost:1"))
        #expect(isLoopbackEndpoint("http://[::1]:80/x"))
        #expect(!isLoopbackEndpoint("https://in.example.com"))
        #expect(!isLoopbackEndpoint("http://10.200.0.2:8080"))
    }
}
