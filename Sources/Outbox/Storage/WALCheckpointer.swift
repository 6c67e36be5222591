import CLibUV
import CSQLite
import Logging

/// Runs the store's WAL checkpoints on libuv's thread pool, so that the loop — the engine's own or the host's —
/// never blocks on one.
///
/// In WAL mode with `synchronous = NORMAL` a commit writes to the WAL and does not sync. The checkpoint that
/// copies the WAL back into the database syncs twice (WAL, then database) and writes every page. SQLite runs it
/// inside the commit that crosses the threshold, on the committing thread. On a slow disk that stalls the loop
/// for milliseconds at a time: delivery, timers and group commits all wait.
///
/// The store's connection reports each commit's WAL size (`LogStore.setWALCommitHook`). When `thresholdFrames`
/// more than the last checkpoint copied are in it, one PASSIVE checkpoint runs at a time, on a connection of its
/// own that is opened by the first job. PASSIVE never waits for the writer: it copies the frames no reader needs.
///
/// The WAL restarts from its start only when a write begins with every frame copied. A job cannot guarantee that
/// while the loop keeps committing: frames written during the job stay behind, and the WAL would grow without
/// bound. So once it holds twice the threshold, the commit that sees it copies the rest itself, as SQLite's own
/// checkpoint would have — only the tail the jobs left, and at most half as often as SQLite would.
///
/// ```swift
/// let checkpointer = WALCheckpointer(path: store.path, thresholdFrames: store.walAutocheckpointPages, loop: loop,
///                                    logger: logger, checkpointInsideCommit: store.checkpointInsideCommit)
/// store.setWALCommitHook { frames in checkpointer.committed(walFrames: frames) }
/// ```
final class WALCheckpointer {
    private let path: String
    private let thresholdFrames: Int
    private let loop: EventLoop
    private let logger: Logger
    /// Used only by the job on the pool while `running`, otherwise only by the loop thread.
    private var connection: Database?
    private var running = false
    private var closing = false
    /// Written by the job, read by the loop thread in the after-work callback (libuv orders the two).
    private var jobError: OutboxError?
    private var jobBackfilled = 0
    /// WAL frames already copied into the database by the last checkpoint (0 once the WAL restarts). A
    /// checkpoint starts when `thresholdFrames` more have been written since: the frames committed while a job
    /// runs must not make every following commit start another one (each costs two syncs).
    private var backfilled = 0
    /// Checkpoints completed on the pool, and during a commit (tests and inspection).
    private(set) var completed = 0
    private(set) var inlineCompleted = 0

    /// Copies the rest of the WAL during the commit that calls the hook (`LogStore.checkpointInsideCommit`).
    private let checkpointInsideCommit: () -> Int?

    init(path: String, thresholdFrames: Int, loop: EventLoop, logger: Logger, checkpointInsideCommit: @escaping () -> Int?) {
        self.path = path
        self.thresholdFrames = max(1, thresholdFrames)
        self.loop = loop
        self.logger = logger
        self.checkpointInsideCommit = checkpointInsideCommit
    }

    /// After each commit of the store's connection, on the loop thread (inside the commit): with no job running,
    /// starts one when `thresholdFrames` more than the last checkpoint copied are in the WAL, or copies the tail
    /// itself once the WAL holds twice the threshold. (While another process reads an old snapshot, that copy
    /// stays partial and is tried at each commit, as SQLite's own checkpoint would be.)
    func committed(walFrames: Int) {
        if walFrames < backfilled { backfilled = 0 }  // the WAL restarted from its start
        guard !running, !closing else { return }
        if walFrames >= 2 * thresholdFrames {
            // Writes never paused long enough for a job to finish the WAL: copy the tail now, so that the next
            // write restarts it.
            if let copied = checkpointInsideCommit() {
                backfilled = copied
                inlineCompleted += 1
            }
            return
        }
        guard walFrames - backfilled >= thresholdFrames else { return }
        let request = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
        // The job holds the checkpointer until its after-work callback, which may run after `close`.
        let retained = Unmanaged.passRetained(self)
        request.pointee.data = retained.toOpaque()
        let rc = uv_queue_work(loop.raw, request, { request in
            guard let data = request?.pointee.data else { return }
            Unmanaged<WALCheckpointer>.fromOpaque(data).takeUnretainedValue().runJob()
        }, { request, _ in
            guard let request else { return }
            if let data = request.pointee.data {
                Unmanaged<WALCheckpointer>.fromOpaque(data).takeRetainedValue().jobEnded()
            }
            request.deallocate()
        })
        if rc == 0 {
            running = true
        } else {
            retained.release()
            request.deallocate()
            logger.warning("cannot queue a WAL checkpoint", metadata: ["outbox.uv": "\(String(cString: uv_strerror(rc)))"])
        }
    }

    /// On the loop thread at shutdown: no new checkpoint starts; the connection closes now, or when the running
    /// job ends.
    func close() {
        closing = true
        if !running { closeConnection() }
    }

    /// On a pool thread.
    private func runJob() {
        do throws(OutboxError) {
            if connection == nil {
                let database = try Database(path: path, flags: [.readWrite, .noMutex])
                // The checkpoint copies pages straight from the WAL: this connection needs almost no cache.
                try database.exec("PRAGMA cache_size = 8")
                try database.exec("PRAGMA synchronous = NORMAL")
                connection = database
            }
            jobBackfilled = try connection?.checkpoint(.passive).checkpointed ?? 0
            jobError = nil
        } catch {
            jobError = error
        }
    }

    /// On the loop thread, after the job.
    private func jobEnded() {
        running = false
        if let jobError {
            logger.warning("WAL checkpoint failed; the next commit past the threshold tries again",
                           metadata: ["outbox.error": "\(jobError)"])
        } else {
            completed += 1
            backfilled = jobBackfilled
        }
        if closing { closeConnection() }
    }

    private func closeConnection() {
        connection?.close()
        connection = nil
    }
}
