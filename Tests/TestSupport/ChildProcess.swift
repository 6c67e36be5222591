import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A child process for the tests, with the part of Foundation's `Process` interface they use — started with
/// `posix_spawn` directly. Foundation's `Process.run()` on Linux (swift-corelibs-foundation up to 6.3) lists
/// `/proc/self/fd` to close every descriptor in the child, copying each `dirent`'s whole 256-byte name where glibc
/// returned a record of 24–32: when a record ends glibc's buffer next to an unmapped page, the test process dies of
/// SIGSEGV in `memmove` (swiftlang/swift-corelibs-foundation#5472, fixed after 6.3). A suite that starts hundreds of
/// children with many descriptors open met it about once in four runs. Here the child closes everything above 2 with
/// `posix_spawn_file_actions_addclosefrom_np` (glibc ≥ 2.34), and nothing is read from `/proc`.
public final class ChildProcess: @unchecked Sendable {
    public enum TerminationReason: Sendable { case exit, uncaughtSignal }

    public var executableURL: URL?
    public var arguments: [String]?
    /// The child's whole environment; nil: this process's.
    public var environment: [String: String]?
    /// A `FileHandle` or a `Pipe`, as with `Process`; nil: /dev/null. Standard input defaults to /dev/null, the
    /// outputs to this process's own.
    public var standardInput: Any? = nil
    public var standardOutput: Any? = FileHandle.standardOutput
    public var standardError: Any? = FileHandle.standardError
    /// Called once the child has exited, on a thread of its own, before `waitUntilExit` returns.
    public var terminationHandler: (@Sendable (ChildProcess) -> Void)?

    private struct State {
        var pid: pid_t = 0
        var exited = false
        /// Exited, and its termination handler returned.
        var done = false
        var status: Int32 = 0
        var reason = TerminationReason.exit
    }
    private let state = Mutex(State())
    private let exitCondition = NSCondition()

    public init() {}

    public var processIdentifier: Int32 { state.withLock { $0.pid } }
    public var isRunning: Bool { state.withLock { $0.pid > 0 && !$0.exited } }
    /// The exit code, or the signal that ended it (as `Process` reports them).
    public var terminationStatus: Int32 { state.withLock { $0.status } }
    public var terminationReason: TerminationReason { state.withLock { $0.reason } }

    public func run() throws {
        guard let path = executableURL?.path else { throw ChildProcessError("no executable") }
        guard access(path, X_OK) == 0 else { throw ChildProcessError("\(path) is not executable: \(String(cString: strerror(errno)))") }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { if null >= 0 { close(null) } }
        var parentEnds: [FileHandle] = []
        for (target, stream) in [(STDIN_FILENO, standardInput), (STDOUT_FILENO, standardOutput), (STDERR_FILENO, standardError)] {
            let source: Int32
            switch stream {
            case let pipe as Pipe:
                source = target == STDIN_FILENO ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
                parentEnds.append(target == STDIN_FILENO ? pipe.fileHandleForReading : pipe.fileHandleForWriting)
            case let handle as FileHandle:
                source = handle.fileDescriptor
            default:
                source = null
            }
            // dup2 onto itself would keep the descriptor's close-on-exec flag: the standard streams are inherited as they are.
            if source != target { posix_spawn_file_actions_adddup2(&actions, source, target) }
        }
        guard let closeFrom = Self.addCloseFrom else { throw ChildProcessError("glibc lacks posix_spawn_file_actions_addclosefrom_np") }
        _ = closeFrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Its own process group, as `Process` does: a signal to the test's group does not reach it.
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))

        let argv = ([path] + (arguments ?? [])).map { strdup($0) } + [nil]
        let env = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in env { free(pointer) }
        }
        var spawned: pid_t = 0
        let result = posix_spawn(&spawned, path, &actions, &attributes, argv, env)
        let pid = spawned
        guard result == 0 else { throw ChildProcessError("cannot start \(path): \(String(cString: strerror(result)))") }
        // The child holds its ends of the pipes now: the parent's copies would keep a reader from seeing the end.
        for end in parentEnds { try? end.close() }
        state.withLock { $0.pid = pid }
        let waiter = Thread { [self] in
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            // WIFSIGNALED / WEXITSTATUS, written out: the macros are not imported.
            let signal = status & 0x7F
            state.withLock {
                $0.exited = true
                if signal != 0 && signal != 0x7F {
                    $0.status = signal
                    $0.reason = .uncaughtSignal
                } else {
                    $0.status = (status >> 8) & 0xFF
                    $0.reason = .exit
                }
            }
            terminationHandler?(self)
            state.withLock { $0.done = true }
            exitCondition.lock()
            exitCondition.broadcast()
            exitCondition.unlock()
        }
        waiter.start()
    }

    /// glibc's (2.34 and later), looked up by name: Swift's Glibc module does not declare it.
    private static let addCloseFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    public func waitUntilExit() {
        exitCondition.lock()
        while !state.withLock({ $0.done }) { exitCondition.wait() }
        exitCondition.unlock()
    }

    public func terminate() { signal(SIGTERM) }
    public func interrupt() { signal(SIGINT) }

    private func signal(_ number: Int32) {
        let pid = state.withLock { $0.exited ? 0 : $0.pid }
        if pid > 0 { kill(pid, number) }
    }
}

public struct ChildProcessError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
