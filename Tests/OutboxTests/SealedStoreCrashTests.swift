import Foundation
import Logging
import OutboxTestSupport
import Testing
@testable import Outbox

@Suite("A sealed store killed mid-commit (SPEC K1)", .serialized)
struct SealedStoreCrashTests {
    /// Where `marker` occurs in the files: every occurrence of its bytes (which `strings` would show, and more: any
    /// run of them, printable or not), and `strings -a`'s own lines that hold it.
    static func occurrences(of marker: String, in files: [String]) -> [String] {
        var found: [String] = []
        for file in files {
            guard let bytes = FileManager.default.contents(atPath: file) else { continue }
            if bytes.range(of: Data(marker.utf8)) != nil { found.append("bytes of \(file)") }
            if FileManager.default.isExecutableFile(atPath: "/usr/bin/strings") {
                let strings = ChildProcess()
                strings.executableURL = URL(fileURLWithPath: "/usr/bin/strings")
                strings.arguments = ["-a", "-n", "6", file]
                let output = Pipe()
                strings.standardOutput = output
                guard (try? strings.run()) != nil else { continue }
                let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                strings.waitUntilExit()
                if text.contains(marker) { found.append("strings of \(file)") }
            }
        }
        return found
    }

    static func storeFiles(_ dir: TempDirectory) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []).map { dir.path + "/" + $0 }
    }

    /// How many sealed values (0xF5 and the key's id) a file holds.
    static func sealedValues(in file: String, key: StoreKey) -> Int {
        guard let bytes = FileManager.default.contents(atPath: file) else { return 0 }
        let header = Data([StoreSealer.marker] + withUnsafeBytes(of: key.id.bigEndian) { Array($0) })
        var count = 0
        var start = bytes.startIndex
        while let range = bytes.range(of: header, in: start..<bytes.endIndex) {
            count += 1
            start = range.upperBound
        }
        return count
    }

    // SPEC K1's proof: 10 000 events with distinctive names, properties and a user id tracked into a sealed store, the
    // process killed with SIGKILL while it commits; none of those strings is in the store, its WAL, its dead letters
    // or a copy moved aside as corrupt (S7); and with the key every committed log is there.
    @Test func noneOfTheTrackedStringsIsOnDiskAfterAKill() throws {
        let dir = TempDirectory(); defer { dir.remove() }
        let store = dir.file("sealed.outbox")
        let keyFile = dir.file("store.key")
        let keyBytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
        FileManager.default.createFile(atPath: keyFile, contents: Data(keyBytes), attributes: [.posixPermissions: 0o600])
        let key = try StoreKey(bytes: keyBytes)
        let marker = "Zq7" + "MarkerVx"  // not a literal the test binary holds whole
        let child = builtProduct("outbox-crash-child")
        try #require(FileManager.default.isExecutableFile(atPath: child), "build the package first: \(child)")

        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: child)
        process.arguments = [store, "1", keyFile, marker]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let reader = LineReader(output.fileHandleForReading)
        #expect(reader.next() == "ready")
        var committed = 0
        // 10 000 events committed, then the kill while the next ones are being committed.
        while committed < 10_000, let line = reader.next() {
            let parts = line.split(separator: " ")
            if parts.count == 3, parts[0] == "committed", let count = Int(parts[2]) { committed = count }
        }
        usleep(UInt32.random(in: 0...20_000))
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(process.terminationReason == .uncaughtSignal)
        #expect(committed >= 10_000)
        #expect(FileManager.default.fileExists(atPath: store + "-wal"), "the kill should leave the WAL behind")
        #expect(Self.occurrences(of: marker, in: Self.storeFiles(dir)) == [])

        // Opened with its key: every committed log is there and reads back; some become dead letters, whose
        // reason carries the marker too.
        var limits = StoreLimits(maxStorageSize: 1 << 30)
        limits.key = key
        do {
            let logStore = try LogStore(path: store, limits: limits, clock: SystemClock(), logger: Logger(label: "test"))
            defer { logStore.close() }
            let logs = try logStore.allLogs()
            // The events, and the session's and the user's own logs beside them.
            #expect(logs.filter { String(decoding: $0.payload, as: UTF8.self).contains("\(marker)-prop-") }.count >= committed)
            #expect(try logStore.meta(MetaKey.userID) == "user-\(marker)")
            #expect(try logStore.eventNames().count == 20)
            try logStore.deadLetter(seqs: logs.prefix(100).map(\.seq), status: 400, reason: "refused \(marker)")
            #expect(try logStore.deadLetters().count == 100)
            #expect(Self.occurrences(of: marker, in: Self.storeFiles(dir)) == [])
        }
        #expect(Self.occurrences(of: marker, in: Self.storeFiles(dir)) == [])

        // One page scribbled over: the next open moves the file aside (S7). The copy still holds the sealed rows
        // (thousands of sealed values) and none of the strings.
        let size = try #require(FileManager.default.attributesOfItem(atPath: store)[.size] as? Int)
        let handle = try #require(FileHandle(forWritingAtPath: store))
        try handle.seek(toOffset: UInt64(size / 2 / 4096 * 4096))
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 4096))
        try handle.close()
        let reopened = try LogStore(path: store, limits: limits, clock: SystemClock(), logger: Logger(label: "test"))
        let moved = try #require(reopened.recoveredFromCorruption)
        reopened.close()
        #expect(Self.sealedValues(in: moved, key: key) > 5_000)
        #expect(Self.occurrences(of: marker, in: Self.storeFiles(dir)) == [])
    }
}
