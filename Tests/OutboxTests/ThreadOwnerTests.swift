import Dispatch
import Glibc
import Synchronization
import Testing
@testable import Outbox

/// SPEC C1 (one loop thread owns the engine's objects): a store entry called from another thread is caught, in every
/// build (ThreadOwner.swift). The failure handler is replaced so that the test runner is not stopped.
struct ThreadOwnerTests {
    /// Runs `body` on a thread of its own and waits for it to end.
    static func onAnotherThread(_ body: @escaping @Sendable () -> Void) {
        final class Box: @unchecked Sendable { let body: @Sendable () -> Void; init(_ body: @escaping @Sendable () -> Void) { self.body = body } }
        var thread = pthread_t()
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        let rc = pthread_create(&thread, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            box.body()
            return nil
        }, box)
        precondition(rc == 0, "pthread_create failed: \(rc)")
        pthread_join(thread, nil)
    }

    @Test func aStoreEntryFromAnotherThreadIsCaught() throws {
        let dir = TempDirectory()
        defer { dir.remove() }
        let store = try Fixture.open(dir.file("store.sqlite"))
        defer { store.close() }
        let caught = Mutex<[String]>([])
        store.owner.onViolation = { file, line in caught.withLock { $0.append("\(file):\(line)") } }

        _ = try store.append([Fixture.log(0)])
        #expect(caught.withLock { $0 }.isEmpty, "the owning thread passes")

        nonisolated(unsafe) let unsafeStore = store
        Self.onAnotherThread { _ = try? unsafeStore.meta(.enabled) }
        #expect(caught.withLock { $0.count } == 1, "a read called off the owning thread is caught")
        Self.onAnotherThread { _ = try? unsafeStore.append([Fixture.log(1)]) }
        let violations = caught.withLock { $0 }
        #expect(violations.count >= 2, "so is a write: \(violations)")
        #expect(violations.allSatisfy { $0.hasPrefix("Outbox/LogStore") }, "reported where the store was entered")
        #expect(store.owner.isOwningThread)
    }

    @Test func anObjectHandedToALoopBelongsToItsThread() throws {
        let loop = try EventLoop(mode: .dedicatedThread)
        let owner = ThreadOwner()
        owner.hand(to: loop)
        #expect(owner.isOwningThread, "before the loop's thread starts, the creating thread owns it")
        let onLoop = Mutex<Bool?>(nil)
        let done = DispatchSemaphore(value: 0)
        let wake = LoopAsync(loop: loop) {
            onLoop.withLock { $0 = owner.isOwningThread }
            loop.closeAll()
            done.signal()
        }
        try loop.startThread(name: "outbox-test")
        #expect(!owner.isOwningThread, "once it runs, the loop's thread does, not the creating one")
        wake.send()
        done.wait()
        loop.joinThread()
        #expect(onLoop.withLock { $0 } == true)
    }
}
