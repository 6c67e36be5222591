import Glibc
import Synchronization

/// A testing hook for `make torture` (scripts/torture): when the environment variable `OUTBOX_TESTING_PHASE_FILE`
/// names a file at engine start, the engine keeps in it which phases are under way, so that a driver killing the
/// process with SIGKILL can read, after the kill, what the process was doing at that instant.
///
/// The file holds one byte per phase at the phase's offset (`Phase.rawValue`): `1` while at least one activity of
/// that phase runs, `0` otherwise. One byte per phase rather than one byte for "the" phase, because phases overlap:
/// a checkpoint runs inside a commit, and a caller tracks on its thread while the loop commits or a request is out.
/// Each change is one `pwrite` of one byte to a descriptor opened once; the kernel keeps it in the page cache, so it
/// survives the process's death.
///
/// Unset, each call costs one relaxed atomic load and a branch. The descriptor is opened at the first engine start of
/// the process and kept for its life (a testing process), never closed.
enum TestingPhase: Int, CaseIterable {
    /// A `trackEvent` call on a caller's thread.
    case tracking = 0
    /// A store transaction, from BEGIN to the end of its COMMIT.
    case commit = 1
    /// A WAL checkpoint (inside the commit that crossed the threshold).
    case checkpoint = 2
    /// From a request handed to the transport to its completion.
    case request = 3

    static let environmentVariable = "OUTBOX_TESTING_PHASE_FILE"

    /// The phase file's descriptor, -1 while the hook is off.
    private static let descriptor = Atomic<Int32>(-1)
    /// How many activities of each phase are under way (several callers may track at once).
    private static let trackingDepth = Atomic<Int>(0)
    private static let commitDepth = Atomic<Int>(0)
    private static let checkpointDepth = Atomic<Int>(0)
    private static let requestDepth = Atomic<Int>(0)

    private static func add(_ phase: TestingPhase, _ delta: Int) -> Int {
        switch phase {
        case .tracking: trackingDepth.add(delta, ordering: .acquiringAndReleasing).newValue
        case .commit: commitDepth.add(delta, ordering: .acquiringAndReleasing).newValue
        case .checkpoint: checkpointDepth.add(delta, ordering: .acquiringAndReleasing).newValue
        case .request: requestDepth.add(delta, ordering: .acquiringAndReleasing).newValue
        }
    }

    /// Reads the environment once per process (the first engine start); inert when the variable is unset or empty.
    static func startIfRequested() {
        guard descriptor.load(ordering: .relaxed) < 0, let path = getenv(environmentVariable), path[0] != 0 else { return }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let zeros: [UInt8] = Array(repeating: UInt8(ascii: "0"), count: allCases.count)
        _ = zeros.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        let (exchanged, _) = descriptor.compareExchange(expected: -1, desired: fd, ordering: .acquiringAndReleasing)
        if !exchanged { close(fd) }
    }

    /// Whether the hook is on (to skip building a wrapper when it is off).
    @inline(__always) static var isOn: Bool { descriptor.load(ordering: .relaxed) >= 0 }

    @inline(__always) static func enter(_ phase: TestingPhase) {
        let fd = descriptor.load(ordering: .relaxed)
        guard fd >= 0 else { return }
        if add(phase, 1) == 1 { mark(fd, phase, "1") }
    }

    @inline(__always) static func leave(_ phase: TestingPhase) {
        let fd = descriptor.load(ordering: .relaxed)
        guard fd >= 0 else { return }
        if add(phase, -1) == 0 { mark(fd, phase, "0") }
    }

    private static func mark(_ fd: Int32, _ phase: TestingPhase, _ value: Unicode.Scalar) {
        var byte = UInt8(ascii: value)
        _ = pwrite(fd, &byte, 1, off_t(phase.rawValue))
    }

    /// Marks a request in flight until `completion` runs (exactly once, as the transport promises).
    static func request<T>(_ completion: @escaping (T) -> Void) -> (T) -> Void {
        enter(.request)
        return { result in
            leave(.request)
            completion(result)
        }
    }
}
