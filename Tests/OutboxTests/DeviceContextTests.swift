import Foundation
import Testing
@testable import Outbox

/// A fake machine root: the files DeviceContext reads, under a temporary directory.
private func machine(_ files: [String: String]) -> TempDirectory {
    let dir = TempDirectory("device")
    for (path, text) in files {
        let full = dir.path + path
        try? FileManager.default.createDirectory(atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: full, contents: Data(text.utf8))
    }
    return dir
}

@Suite("Device context sources (SPEC A10)")
struct DeviceContextTests {
    // SPEC A10: model and manufacturer come from DMI when the machine has it.
    @Test func modelAndManufacturerComeFromDMI() {
        let root = machine(["/sys/class/dmi/id/product_name": "ThinkPad X1 Carbon Gen 11\n",
                            "/sys/class/dmi/id/sys_vendor": "LENOVO\n",
                            "/proc/cpuinfo": "vendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Core(TM) i7\n"])
        defer { root.remove() }
        let device = DeviceContext.collect(root: root.path)
        #expect(device.model == "ThinkPad X1 Carbon Gen 11")
        #expect(device.oemName == "LENOVO")
        #expect(device.sources["model"] == "/sys/class/dmi/id/product_name")
        #expect(device.sources["oemName"] == "/sys/class/dmi/id/sys_vendor")
    }

    // SPEC A10: ARM boards have no DMI; their device tree names the board and its maker.
    @Test func boardsWithoutDMIUseTheDeviceTree() {
        let root = machine(["/sys/firmware/devicetree/base/model": "Raspberry Pi 4 Model B Rev 1.4\u{0}",
                            "/sys/firmware/devicetree/base/compatible": "raspberrypi,4-model-b\u{0}brcm,bcm2711\u{0}"])
        defer { root.remove() }
        let device = DeviceContext.collect(root: root.path)
        #expect(device.model == "Raspberry Pi 4 Model B Rev 1.4")
        #expect(device.oemName == "raspberrypi")
        #expect(device.sources["model"] == "/sys/firmware/devicetree/base/model")
    }

    // SPEC A10: a VM without DMI (Firecracker, as on this CI machine) falls back to the ACPI OEM id and the CPU.
    @Test func virtualMachinesWithoutDMIFallBackToACPIAndTheCPU() {
        var header = Array("DSDT".utf8) + [0, 0, 0, 0, 2, 0] + Array("FIRECK".utf8) + Array("FCVMDSDT".utf8)
        header += [UInt8](repeating: 0, count: 16)
        let root = machine(["/proc/cpuinfo": "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n"])
        defer { root.remove() }
        #expect(DeviceContext.collect(root: root.path).oemName == "AMD")   // no readable ACPI table: the CPU's maker
        try? FileManager.default.createDirectory(atPath: root.path + "/sys/firmware/acpi/tables", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: root.path + "/sys/firmware/acpi/tables/DSDT", contents: Data(header))
        let device = DeviceContext.collect(root: root.path)
        #expect(device.oemName == "FIRECK")
        #expect(device.sources["oemName"] == "/sys/firmware/acpi/tables/DSDT OEM ID")
        #expect(device.model?.hasPrefix("AMD EPYC") == true)
        #expect(device.sources["model"] == "/proc/cpuinfo model name + uname(2) machine")
    }

    // SPEC A10: the offset comes from libc (the release CLI does not link ICU); it is the one Foundation reads.
    @Test func theTimeZoneOffsetIsTheSystemOne() {
        let zone = DeviceContext.localTimeZone()
        #expect(zone.offsetMinutes == TimeZone.current.secondsFromGMT() / 60)
        #expect(DeviceContext.collect().sources["timeZoneOffset"]?.hasPrefix("localtime_r(3)") == true)
    }

    // The trimming that replaced Foundation's CharacterSet (the release CLI does not link Foundation proper).
    @Test func trimmingMatchesFoundation() {
        let samples = [" x ", "\tProduct Name\n", "\u{00A0}a b\u{2003}", "\r\n", "", "  ", "\u{85}v\u{2028}", "a\u{0}",
                       "\u{0}\u{0}FIRECK\u{0}", " é\u{301} "]
        for text in samples {
            #expect(text.trimmed == text.trimmingCharacters(in: .whitespacesAndNewlines), "\(Array(text.unicodeScalars))")
            #expect(text.trimming(\.isSpaceOrTab) == text.trimmingCharacters(in: .whitespaces), "\(Array(text.unicodeScalars))")
            #expect(text.trimmedWithNUL == text.trimmingCharacters(in: CharacterSet.whitespacesAndNewlines
                .union(CharacterSet(charactersIn: "\u{0}"))), "\(Array(text.unicodeScalars))")
        }
    }

    @Test func cpuVendorsAreNamedByTheirMaker() {
        #expect(DeviceContext.parseCPUInfo("vendor_id : GenuineIntel\nmodel name : Xeon\n") == ("Xeon", "Intel"))
        #expect(DeviceContext.parseCPUInfo("Hardware : BCM2835\n") == ("BCM2835", nil))
        #expect(DeviceContext.parseCPUInfo("") == (nil, nil))
    }
}
