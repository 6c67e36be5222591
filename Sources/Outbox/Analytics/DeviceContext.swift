import FoundationEssentials
import Glibc

/// SPEC A10: the device context sent with every log, read from Linux's own sources. Each field remembers where
/// it came from (for tests and `outbox status`).
public struct DeviceContext: Sendable, Equatable {
    public var sdkName = "outbox.linux"
    public var sdkVersion = OutboxVersion.string
    public var osName = "Linux"
    public var osVersion = ""
    public var osBuild: String?
    public var osKernel = ""
    public var model: String?
    public var oemName: String?
    public var locale = "en_US"
    public var timeZoneOffset = 0
    public var appVersion = "unknown"
    public var appBuild = "unknown"
    public var appNamespace: String?
    public var countryCode: String?
    public var networkType: String?
    /// Field name → source (file, call or configuration).
    public var sources: [String: String] = [:]

    /// Reads the machine's facts. Never fails: a missing source leaves a default and no source entry.
    public static func collect(appVersion: String = "unknown", appBuild: String = "unknown", appNamespace: String? = nil,
                               root: String = "") -> DeviceContext {
        var context = DeviceContext()
        context.appVersion = appVersion
        context.appBuild = appBuild
        context.appNamespace = appNamespace
        context.sources["appVersion"] = "configuration"
        context.sources["appBuild"] = "configuration"
        if appNamespace != nil { context.sources["appNamespace"] = "configuration" }
        if let release = readFile(root + "/etc/os-release") ?? readFile(root + "/usr/lib/os-release") {
            let fields = parseOSRelease(release)
            if let name = fields["NAME"] { context.osName = name; context.sources["osName"] = "/etc/os-release NAME" }
            if let version = fields["VERSION_ID"] ?? fields["VERSION"] {
                context.osVersion = version
                context.sources["osVersion"] = "/etc/os-release VERSION_ID"
            }
            if let build = fields["BUILD_ID"] ?? fields["VERSION_CODENAME"] {
                context.osBuild = build
                context.sources["osBuild"] = "/etc/os-release"
            }
        }
        var names = utsname()
        if uname(&names) == 0 {
            context.osKernel = withUnsafeBytes(of: &names.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            context.sources["osKernel"] = "uname(2) release"
            if context.osVersion.isEmpty { context.osVersion = context.osKernel; context.sources["osVersion"] = "uname(2) release" }
        }
        context.sources["sdkName"] = "Outbox"
        context.sources["sdkVersion"] = "OutboxVersion.string"
        collectHardware(into: &context, root: root, machine: machine(names: &names))
        let environment = ProcessInfo.processInfo.environment
        for key in ["LC_ALL", "LC_MESSAGES", "LANG"] {
            let value = String((environment[key] ?? "").prefix { $0 != "." && $0 != "@" })
            if !value.isEmpty, value != "C", value != "POSIX" {
                context.locale = value
                context.sources["locale"] = "$\(key)"
                break
            }
        }
        if context.sources["locale"] == nil { context.sources["locale"] = "default (C/POSIX locale)" }
        let zone = localTimeZone()
        context.timeZoneOffset = zone.offsetMinutes
        context.sources["timeZoneOffset"] = "localtime_r(3) (\(zone.source))"
        return context
    }

    /// The `device` object of W2.
    func json() -> [UInt8] {
        var writer = JSONWriter(capacity: 384)
        writer.raw("{\"sdkName\":"); writer.string(sdkName)
        writer.raw(",\"sdkVersion\":"); writer.string(sdkVersion)
        writer.raw(",\"osName\":"); writer.string(osName)
        writer.raw(",\"osVersion\":"); writer.string(osVersion.isEmpty ? "unknown" : osVersion)
        if let osBuild { writer.raw(",\"osBuild\":"); writer.string(osBuild) }
        if !osKernel.isEmpty { writer.raw(",\"osKernel\":"); writer.string(osKernel) }
        if let model { writer.raw(",\"model\":"); writer.string(model) }
        if let oemName { writer.raw(",\"oemName\":"); writer.string(oemName) }
        writer.raw(",\"locale\":"); writer.string(locale)
        writer.raw(",\"timeZoneOffset\":"); writer.int(Int64(timeZoneOffset))
        writer.raw(",\"appVersion\":"); writer.string(appVersion)
        writer.raw(",\"appBuild\":"); writer.string(appBuild)
        if let appNamespace { writer.raw(",\"appNamespace\":"); writer.string(appNamespace) }
        if let countryCode { writer.raw(",\"countryCode\":"); writer.string(countryCode) }
        if let networkType { writer.raw(",\"networkType\":"); writer.string(networkType) }
        writer.raw(UInt8(ascii: "}"))
        return writer.bytes
    }

    /// Model and manufacturer: DMI on PCs and most VMs; the device tree on ARM boards; else (VMs without DMI, such
    /// as Firecracker) the ACPI tables' OEM id when readable, and the CPU as /proc/cpuinfo names it.
    private static func collectHardware(into context: inout DeviceContext, root: String, machine: String) {
        if let model = readFile(root + "/sys/class/dmi/id/product_name")?.trimmed, !model.isEmpty {
            context.model = model
            context.sources["model"] = "/sys/class/dmi/id/product_name"
        } else if let model = readFile(root + "/sys/firmware/devicetree/base/model")?.trimmedWithNUL, !model.isEmpty {
            context.model = model
            context.sources["model"] = "/sys/firmware/devicetree/base/model"
        }
        if let vendor = readFile(root + "/sys/class/dmi/id/sys_vendor")?.trimmed, !vendor.isEmpty {
            context.oemName = vendor
            context.sources["oemName"] = "/sys/class/dmi/id/sys_vendor"
        } else if let compatible = readFile(root + "/sys/firmware/devicetree/base/compatible"),
                  let vendor = compatible.split(separator: ",").first.map(String.init)?.trimmedWithNUL, !vendor.isEmpty {
            context.oemName = vendor
            context.sources["oemName"] = "/sys/firmware/devicetree/base/compatible"
        } else if let oem = acpiOEMID(root + "/sys/firmware/acpi/tables/DSDT") {
            context.oemName = oem
            context.sources["oemName"] = "/sys/firmware/acpi/tables/DSDT OEM ID"
        }
        guard context.model == nil || context.oemName == nil else { return }
        let cpu = parseCPUInfo(readFile(root + "/proc/cpuinfo") ?? "")
        if context.model == nil, let name = cpu.model {
            context.model = machine.isEmpty ? name : "\(name) (\(machine))"
            context.sources["model"] = "/proc/cpuinfo model name + uname(2) machine"
        }
        if context.oemName == nil, let vendor = cpu.vendor {
            context.oemName = vendor
            context.sources["oemName"] = "/proc/cpuinfo vendor_id"
        }
    }

    /// The offset from UTC now, in minutes, as libc reads it ($TZ, else /etc/localtime; Foundation's
    /// `TimeZone.current` reads the same, through ICU, which the release `outbox` does not link). `tzset()`
    /// re-reads a changed /etc/localtime, so that the minute-by-minute refresh sees a new zone.
    static func localTimeZone() -> (offsetMinutes: Int, source: String) {
        tzset()
        var now = time(nil)
        var local = tm()
        guard localtime_r(&now, &local) != nil else { return (0, "failed: UTC") }
        let name = local.tm_zone.map { String(cString: $0) } ?? "?"
        let origin = getenv("TZ").map { "$TZ=" + String(cString: $0) } ?? "/etc/localtime"
        return (local.tm_gmtoff / 60, "\(origin), \(name)")
    }

    /// Bytes 10–15 of an ACPI table header: the OEM that built the firmware (`DELL  `, `LENOVO`, `FIRECK`).
    /// The tables are readable by root only; otherwise nil.
    static func acpiOEMID(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var header = [UInt8](repeating: 0, count: 16)
        var got = 0
        while got < header.count {
            let n = header.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, $0.count - got) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            got += n
        }
        let oem = String(decoding: header[10..<16], as: UTF8.self).trimmedWithNUL
        return oem.isEmpty || !oem.allSatisfy({ $0.isASCII && !$0.isNewline }) ? nil : oem
    }

    /// The CPU's `model name` and vendor (`vendor_id` as a maker's name) from /proc/cpuinfo.
    static func parseCPUInfo(_ text: String) -> (model: String?, vendor: String?) {
        var model: String?, vendor: String?
        for line in text.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let key = line[..<colon].trimming(\.isSpaceOrTab)
            let value = line[line.index(after: colon)...].trimming(\.isSpaceOrTab)
            guard !value.isEmpty else { continue }
            if model == nil && (key == "model name" || key == "Model" || key == "Hardware") { model = value }
            if vendor == nil && key == "vendor_id" {
                vendor = ["GenuineIntel": "Intel", "AuthenticAMD": "AMD", "CentaurHauls": "Centaur", "HygonGenuine": "Hygon"][value] ?? value
            }
            if model != nil && vendor != nil { break }
        }
        return (model, vendor)
    }

    private static func machine(names: inout utsname) -> String {
        withUnsafeBytes(of: &names.machine) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    static func parseOSRelease(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "="), !line.hasPrefix("#") else { continue }
            var value = String(line[line.index(after: equals)...])
            if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
                value = String(value.dropFirst().dropLast())
            }
            fields[String(line[..<equals])] = value
        }
        return fields
    }

    private static func readFile(_ path: String) -> String? { try? String(contentsOfFile: path, encoding: .utf8) }
}

/// The release, as `VERSION` says (SPEC P2): `scripts/set-version.sh` writes it here, in outbox.h's macros and in the
/// mock's `MockVersion`; `VersionTests` and `make c-test` check that they all agree.
public enum OutboxVersion {
    public static let string = "0.2.0"
}

extension String {
    var trimmed: String { trimming(\.isSpaceOrNewline) }
    /// Also drops NUL bytes (device-tree strings end with one; ACPI ids are padded with them).
    var trimmedWithNUL: String { trimming { $0.value == 0 || $0.isSpaceOrNewline } }
}
