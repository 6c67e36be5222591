// `make fuzz`: one libFuzzer target per parser that meets outside input. `outbox-fuzz TARGET [libFuzzer options]
// [CORPUS_DIR…]` fuzzes one; `outbox-fuzz --list` names them all (scripts/fuzz.sh runs each in turn). Built by
// scripts/fuzz-build.sh only (OUTBOX_FUZZ=1 in Package.swift).
//
// A target gets the input's bytes and must return: a crash (a trap, an AddressSanitizer report), a hang past
// libFuzzer's -timeout or a leak fails the run, and so does a broken invariant of the parser (`invariant`).
import Glibc

/// One fuzz target: `body` receives every input libFuzzer makes.
struct FuzzTarget: Sendable {
    var name: String
    var summary: String
    var body: @Sendable (UnsafeBufferPointer<UInt8>) -> Void
    /// Runs once before the first input (temporary directories, an engine shared by all inputs).
    var setUp: @Sendable () -> Void = {}
}

/// Every target, in `make fuzz`'s order. A new parser adds one line here (vendor wires: `mockWires`).
let allTargets: [FuzzTarget] = mockBodyTargets() + [
    scenarioTarget,
    engineResponseTarget,
    otlpResponseTarget,
    postHogResponseTarget,
    segmentResponseTarget,
    sensorsResponseTarget,
    ga4ResponseTarget,
    amplitudeResponseTarget,
    mixpanelResponseTarget,
    otlpPayloadTarget,
    gzipTarget,
    storeTarget,
    storeKeyTarget,
    cliTarget,
    cJSONTarget,
]

/// A broken invariant of a parser: a crash on purpose, which libFuzzer reports with the input that caused it.
func invariant(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String,
               file: StaticString = #fileID, line: UInt = #line) {
    guard !condition() else { return }
    printError("outbox-fuzz: invariant broken at \(file):\(line): \(message())\n")
    abort()
}

/// The target chosen on the command line; libFuzzer's callback is a C function and cannot capture it.
nonisolated(unsafe) var selected: FuzzTarget?

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(
    _ argc: UnsafeMutablePointer<Int32>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
) -> Int32

@main
struct OutboxFuzz {
    static func main() {
        let arguments = CommandLine.arguments
        guard arguments.count >= 2 else { usage() }
        if arguments[1] == "--list" {
            for target in allTargets { print("\(target.name)\t\(target.summary)") }
            return
        }
        if arguments[1] == "--shapes", arguments.count == 3 {
            // The request shapes of a vendor wire's target, one a line, its index first: scripts/fuzz.sh turns
            // captured requests into seeds (that index as their first byte, then the body) with them.
            for wire in mockWires where "mock-body-\(wire.name)" == arguments[2] {
                for (index, shape) in wire.shapes.enumerated() { print("\(index)\t\(shape)") }
            }
            return
        }
        if arguments[1] == "--seed-store", arguments.count == 3 {
            do {
                try makeStoreSeed(path: arguments[2])
                return
            } catch {
                printError("outbox-fuzz: cannot make the store seed: \(error)\n")
                exit(1)
            }
        }
        guard let target = allTargets.first(where: { $0.name == arguments[1] }) else {
            printError("outbox-fuzz: no target '\(arguments[1])'\n")
            usage()
        }
        selected = target
        // libFuzzer ends with exit() after its last input: the target's temporary directories go with it.
        atexit { removeTemporaryDirectories() }
        target.setUp()
        // libFuzzer reads argv[1...] as its own options and corpus directories: drop the target's name.
        var argv: [UnsafeMutablePointer<CChar>?] = ([arguments[0]] + arguments.dropFirst(2)).map { strdup($0) }
        argv.append(nil)
        var argc = Int32(argv.count - 1)
        let status = argv.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var pointer = buffer.baseAddress
            return LLVMFuzzerRunDriver(&argc, &pointer) { data, size in
                let input = UnsafeBufferPointer(start: size > 0 ? data : nil, count: size)
                selected?.body(input)
                return 0
            }
        }
        exit(status)
    }

    static func usage() -> Never {
        printError("usage: outbox-fuzz TARGET [libFuzzer options] [CORPUS_DIR...] | --list | --seed-store PATH\n")
        exit(2)
    }
}

/// The directories `temporaryDirectory` made, removed at exit.
nonisolated(unsafe) var temporaryDirectories: [String] = []

/// A new directory for a target's files (mkdtemp), in memory (/dev/shm) when there is one: a store is synced to
/// disk several times per open, and a disk shared with other work makes that most of an input's time. Under
/// $OUTBOX_FUZZ_TMPDIR when it is set: scripts/fuzz.sh removes that one even after a crash, which skips exit
/// handlers.
func temporaryDirectory(_ name: String) -> String {
    let parent = getenv("OUTBOX_FUZZ_TMPDIR").map { String(cString: $0) }
        ?? (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp")
    var template = Array("\(parent)/outbox-fuzz-\(name).XXXXXX".utf8CString)
    invariant(mkdtemp(&template) != nil, "mkdtemp failed: \(errno)")
    let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    temporaryDirectories.append(path)
    return path
}

func removeTemporaryDirectories() {
    for path in temporaryDirectories { removeTree(path) }
    temporaryDirectories = []
}

/// `rm -rf PATH` without following symbolic links (the store target's files are the only things in there).
func removeTree(_ path: String) {
    var info = stat()
    guard lstat(path, &info) == 0 else { return }
    if info.st_mode & S_IFMT == S_IFDIR, let directory = opendir(path) {
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { removeTree(path + "/" + name) }
        }
        closedir(directory)
        rmdir(path)
    } else {
        unlink(path)
    }
}

/// A line on stderr (libFuzzer's own output goes there too).
func printError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in _ = write(2, bytes.baseAddress, bytes.count) }
}
