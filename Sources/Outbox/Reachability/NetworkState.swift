import FoundationEssentials
import Glibc

/// SPEC N1: "online" means a non-loopback interface is up with an address and there is a default route.
/// The watcher re-reads this on every rtnetlink event; a change of `online` or of the default route's
/// interface is a network change (SPEC R6).
struct NetworkState: Equatable, Sendable {
    var online: Bool
    /// The interface of the IPv4 (or else IPv6) default route.
    var defaultInterface: String?
    /// SPEC A10: `wired`, `wifi` or `none`.
    var networkType: String

    /// Reads the state from `/proc/thread-self/net/route`, `…/ipv6_route` and `getifaddrs` (no polling: called on
    /// events). The calling thread's routes, not `/proc/net`'s (the main thread's): an engine whose threads run in a
    /// network namespace of their own reads the namespace its sockets and its netlink watcher are in.
    static func current(procRoot: String = "/proc", sysRoot: String = "/sys") -> NetworkState {
        let upWithAddress = interfacesUpWithAddress()
        let threadNet = procRoot + "/thread-self/net"
        let net = FileManager.default.fileExists(atPath: threadNet + "/route") ? threadNet : procRoot + "/net"
        var defaultInterface = defaultRouteInterface(ipv4: (try? String(contentsOfFile: net + "/route", encoding: .utf8)) ?? "",
                                                     ipv6: (try? String(contentsOfFile: net + "/ipv6_route", encoding: .utf8)) ?? "")
        if let interface = defaultInterface, !upWithAddress.contains(interface) { defaultInterface = nil }
        let online = defaultInterface != nil
        var type = "none"
        if let interface = defaultInterface {
            type = FileManager.default.fileExists(atPath: "\(sysRoot)/class/net/\(interface)/wireless") ? "wifi" : "wired"
        }
        return NetworkState(online: online, defaultInterface: defaultInterface, networkType: type)
    }

    /// The interface of the first default route: IPv4 (`Destination` and `Mask` 0, flag RTF_UP) or IPv6 (`::/0`).
    static func defaultRouteInterface(ipv4: String, ipv6: String) -> String? {
        for line in ipv4.split(separator: "\n").dropFirst() {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 8, fields[1] == "00000000", fields[7] == "00000000",
                  let flags = UInt32(fields[3], radix: 16), flags & 0x1 != 0 else { continue }
            return String(fields[0])
        }
        for line in ipv6.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 10, fields[0] == String(repeating: "0", count: 32), fields[1] == "00",
                  fields[9] != "lo", let flags = UInt32(fields[8], radix: 16), flags & 0x1 != 0,
                  flags & 0x200 == 0 /* RTF_REJECT: an unreachable route is no way out */ else { continue }
            return String(fields[9])
        }
        return nil
    }

    /// Names of the interfaces that are up and not loopback, with an IPv4 or IPv6 address.
    static func interfacesUpWithAddress() -> Set<String> {
        var result = Set<String>()
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return result }
        defer { freeifaddrs(list) }
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            let flags = Int32(entry.pointee.ifa_flags)
            guard flags & Int32(IFF_UP) != 0, flags & Int32(IFF_LOOPBACK) == 0,
                  let address = entry.pointee.ifa_addr,
                  address.pointee.sa_family == sa_family_t(AF_INET) || address.pointee.sa_family == sa_family_t(AF_INET6),
                  let name = entry.pointee.ifa_name else { continue }
            result.insert(String(cString: name))
        }
        return result
    }
}
