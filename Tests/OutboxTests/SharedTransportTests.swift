import Foundation
import Testing
@testable import Outbox

/// `SharedTransport` (SPEC F4): the engines on one loop share one curl multi handle and connection pool; each keeps
/// SPEC C3's cap of 3 requests, all together the loop-wide cap, first come first served, and an engine's close
/// cancels its own requests only. Real HTTP over 127.0.0.1 to `TestHTTPServer`, on a real libuv loop.
@Suite("shared transport (SPEC F4, C3)", .serialized)
struct SharedTransportTests {
    /// A shared transport and its lanes, made on the harness's loop thread (the thread it belongs to).
    final class Setup: @unchecked Sendable {
        var shared: SharedTransport?
        var lanes: [TransportLane] = []
    }

    static func setUp(_ harness: TransportHarness, maxActive: Int, lanes: Int,
                      options: TransportOptions = TransportHarness.options()) async throws -> Setup {
        let setup = Setup()
        let loop = harness.loop
        let made: String? = await harness.sync { _ in
            do {
                let shared = try SharedTransport(loop: UnsafeMutableRawPointer(loop.raw), maxActiveTransfers: maxActive)
                setup.shared = shared
                for _ in 0..<lanes {
                    guard let lane = try shared.lane(options: options, logger: Fixture.quietLogger) else { return "no lane" }
                    setup.lanes.append(lane)
                }
                return nil
            } catch {
                return "\(error)"
            }
        }
        #expect(made == nil)
        return setup
    }

    static func tearDown(_ harness: TransportHarness, _ setup: Setup) async -> Int32? {
        await harness.sync { _ in
            setup.lanes.forEach { $0.close() }
            setup.shared?.close()
        }
        return await harness.shutdown()
    }

    // SPEC F4, C3: three engines' requests through one transport all arrive once; the server never holds more than
    // the loop-wide cap at once, and no engine has more than 3 in curl.
    @Test func threeEnginesShareOneTransportWithinTheLoopCapAndTheirOwn() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()
        let setup = try await Self.setUp(harness, maxActive: 4, lanes: 3)
        let results = ResultBox()
        let laneMax = LaneMax()
        await harness.sync { _ in
            for (index, lane) in setup.lanes.enumerated() {
                for round in 0..<5 {
                    let request = HTTPRequest(url: server.baseURL + "/ok?delay=100&lane=\(index)&round=\(round)",
                                              headers: [("Content-Type", "application/json")], body: Array("{}".utf8))
                    _ = lane.send(request) { result in
                        for other in setup.lanes { laneMax.see(other.transport.laneCounts(other.lane).active) }
                        results.add(result)
                    }
                    laneMax.see(lane.transport.laneCounts(lane.lane).active)
                }
            }
        }
        let all = await results.waitFor(15)
        #expect(all.allSatisfy { $0.response?.status == 200 })
        #expect(Set(server.requests.map(\.target)).count == 15)
        #expect(server.maxConcurrentRequests <= 4)
        #expect(await harness.sync { _ in setup.shared?.maxActiveObserved } == 4)
        #expect(laneMax.value <= 3)
        #expect(await Self.tearDown(harness, setup) == 0)
    }

    // SPEC F4: closing one engine's lane cancels its requests (completed before close returns) and leaves the other
    // engine's to finish.
    @Test func oneEnginesCloseLeavesTheOthersRequestsAlone() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()
        let setup = try await Self.setUp(harness, maxActive: 8, lanes: 2)
        let closed = ResultBox()
        let kept = ResultBox()
        await harness.sync { _ in
            for _ in 0..<2 {
                let hang = HTTPRequest(url: server.baseURL + "/hang", headers: [], body: Array("{}".utf8))
                _ = setup.lanes[0].send(hang) { closed.add($0) }
                let slow = HTTPRequest(url: server.baseURL + "/ok?delay=400", headers: [], body: Array("{}".utf8))
                _ = setup.lanes[1].send(slow) { kept.add($0) }
            }
        }
        await server.waitForRequests(4)
        let completedAtClose = await harness.sync { _ in
            setup.lanes[0].close()
            return closed.all.count
        }
        #expect(completedAtClose == 2)
        #expect(closed.all.allSatisfy { $0.failure == .cancelled })
        let others = await kept.waitFor(2)
        #expect(others.allSatisfy { $0.response?.status == 200 })
        #expect(await Self.tearDown(harness, setup) == 0)
    }

    // SPEC F4: a closed lane sends nothing but answers as every send does, on a later loop turn — never inside
    // `send`, before its caller has recorded the transfer.
    @Test func aClosedLaneAnswersOnALaterTurn() async throws {
        let harness = try TransportHarness()
        let setup = try await Self.setUp(harness, maxActive: 2, lanes: 1)
        let results = ResultBox()
        let answeredInside = await harness.sync { _ in
            setup.lanes[0].close()
            _ = setup.lanes[0].send(HTTPRequest(url: "http://127.0.0.1:9/never", headers: [], body: [])) { results.add($0) }
            return results.all.count
        }
        #expect(answeredInside == 0)
        let all = await results.waitFor(1)
        #expect(all.map(\.failure) == [.cancelled])
        #expect(await Self.tearDown(harness, setup) == 0)
    }

    // SPEC F4, C3: time spent waiting for a slot is not counted against the request timeout: with one slot for the
    // loop and a 1 s timeout, three 0.6 s requests of two engines all succeed, the later ones after queueing.
    @Test func waitingForASlotDoesNotCountAgainstTheTimeout() async throws {
        let server = try TestHTTPServer()
        defer { server.stop() }
        let harness = try TransportHarness()
        let setup = try await Self.setUp(harness, maxActive: 1, lanes: 2,
                                         options: TransportHarness.options(requestTimeout: .seconds(1)))
        let results = ResultBox()
        await harness.sync { _ in
            for index in 0..<3 {
                let request = HTTPRequest(url: server.baseURL + "/ok?delay=600&n=\(index)", headers: [], body: Array("{}".utf8))
                _ = setup.lanes[index % 2].send(request) { results.add($0) }
            }
        }
        let all = await results.waitFor(3)
        #expect(all.allSatisfy { $0.response?.status == 200 }, "\(all.map { $0.failure.map { "\($0)" } ?? "ok" })")
        #expect(all.compactMap { $0.response?.timing.queued }.max() ?? .zero >= .milliseconds(1000))
        #expect(server.maxConcurrentRequests == 1)
        #expect(await Self.tearDown(harness, setup) == 0)
    }
}

/// The most transfers seen in curl for one lane.
final class LaneMax: @unchecked Sendable {
    private let lock = NSLock()
    private var seen = 0
    func see(_ count: Int) { lock.withLock { seen = max(seen, count) } }
    var value: Int { lock.withLock { seen } }
}
