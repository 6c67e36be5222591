import Foundation
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
        if let model = readFile(root + "/sys/class/dmi/id/product_name")?.trimmed, !model.isEmpty {
            context.model = model
            context.sources["model"] = "/sys/class/dmi/id/product_name"
        }
        if let vendor = readFile(root + "/sys/class/dmi/id/sys_vendor")?.trimmed, !vendor.isEmpty {
            context.oemName = vendor
            context.sources["oemName"] = "/sys/class/dmi/id/sys_vendor"
        }
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
        context.timeZoneOffset = TimeZone.current.secondsFromGMT() / 60
        context.sources["timeZoneOffset"] = "TimeZone.current (\(TimeZone.current.identifier))"
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

public enum OutboxVersion {
    public static let string = "0.1.0"
}

extension String {
    var trimmed: String { trimmingCharacters(in: .whitespacesAndNewlines) }
}
