import Foundation
import Testing
@testable import Outbox

@Suite("Wire encoding (SPEC W1, W2, C9, A9, A10)")
struct WireEncodingTests {
    private func log(seq: Int64, payload: String, wallMs: Int64 = 1_795_332_826_123, monoNs: Int64 = 5_000_000_000) -> StoredLog {
        StoredLog(seq: seq, id: UUIDBytes(high: 1, low: UInt64(seq)), priority: .normal, wallMs: wallMs, monoNs: monoNs,
                  boot: 9, context: 0, payload: Array(payload.utf8))
    }

    // SPEC C9, W2: the body is built at send time, stamped with sentAt, each log with timestamp and device.
    @Test func aBatchBodyCarriesSentAtTimestampsAndDevice() throws {
        let device = DeviceContext.collect(appVersion: "1.2", appBuild: "7")
        let encoder = BatchEncoder(contexts: [0: device.json()])
        let body = encoder.encode([log(seq: 1, payload: #"{"type":"event","id":"x","name":"a"}"#),
                                   log(seq: 2, payload: #"{"type":"startSession","id":"y","sid":"s"}"#)],
                                  sentAtMs: 1_795_332_830_000, timestamp: \.wallMs)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        #expect(object["sentAt"] as? String == "2026-11-22T07:33:50.000Z")
        let logs = try #require(object["logs"] as? [[String: Any]])
        #expect(logs.count == 2)
        #expect(logs[0]["timestamp"] as? String == "2026-11-22T07:33:46.123Z")
        #expect(logs[0]["name"] as? String == "a")
        #expect(logs[1]["type"] as? String == "startSession")
        let deviceObject = try #require(logs[0]["device"] as? [String: Any])
        #expect(deviceObject["appVersion"] as? String == "1.2")
        #expect(deviceObject["sdkName"] as? String == "outbox.linux")
    }

    // SPEC A10: each log carries the context it was captured under, also when versions alternate within a batch;
    // a version the encoder does not know falls back to the current one (id 0).
    @Test func eachLogCarriesItsOwnContextVersion() throws {
        let encoder = BatchEncoder(contexts: [0: Array(#"{"v":"now"}"#.utf8), 1: Array(#"{"v":"one"}"#.utf8),
                                              2: Array(#"{"v":"two"}"#.utf8)])
        let versions: [Int64] = [1, 1, 2, 1, 7, 2]
        let logs = versions.enumerated().map { index, context in
            var stored = log(seq: Int64(index + 1), payload: #"{"type":"event","id":"x","name":"a"}"#)
            stored.context = context
            return stored
        }
        let body = encoder.encode(logs, sentAtMs: 1_795_332_830_000, timestamp: \.wallMs)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
        let sent = try #require(object["logs"] as? [[String: Any]])
        #expect(sent.map { ($0["device"] as? [String: Any])?["v"] as? String } == ["one", "one", "two", "one", "now", "two"])
    }

    // SPEC A9: within one boot the corrected time is server-now minus the monotonic age, so a wall-clock jump
    // after capture changes nothing.
    @Test func timestampsAreCorrectedByTheServerClock() {
        var correction = ClockCorrection()
        let captureWall: Int64 = 1_000_000, captureMono: Int64 = 50_000_000_000
        // The local clock is 1 h behind the server.
        correction.learn(serverMs: 2_000_000 + 3_600_000, localWallMs: 2_000_000)
        #expect(correction.offsetMs == 3_600_500)
        // 10 s after capture by the monotonic clock; the wall clock was meanwhile set back by 5 minutes.
        let corrected = correction.timestamp(wallMs: captureWall, monoNs: captureMono, boot: 1,
                                             nowWallMs: captureWall + 10_000 - 300_000, nowMonoNs: captureMono + 10_000_000_000, nowBoot: 1)
        #expect(corrected == captureWall - 300_000 + 3_600_500)
        // Another boot: monotonic readings do not compare; wall time plus offset.
        #expect(correction.timestamp(wallMs: captureWall, monoNs: captureMono, boot: 1, nowWallMs: 9, nowMonoNs: 1, nowBoot: 2)
                == captureWall + 3_600_500)
    }

    // SPEC A9: offsets within the threshold are ignored.
    @Test func smallOffsetsAreIgnored() {
        var correction = ClockCorrection()
        correction.learn(serverMs: 10_000, localWallMs: 10_200)
        #expect(correction.offsetMs == nil)
        #expect(correction.timestamp(wallMs: 5, monoNs: 0, boot: 1, nowWallMs: 0, nowMonoNs: 0, nowBoot: 1) == 5)
    }

    // SPEC A10: the context is read from this machine, each field with its source.
    @Test func deviceContextFieldsAreFilledFromTheirSources() {
        let device = DeviceContext.collect(appVersion: "1.0", appBuild: "1")
        #expect(!device.osName.isEmpty && device.sources["osName"] != nil)
        #expect(!device.osVersion.isEmpty && device.sources["osVersion"] != nil)
        #expect(!device.osKernel.isEmpty && device.sources["osKernel"] == "uname(2) release")
        #expect(!device.locale.isEmpty && device.sources["locale"] != nil)
        #expect(device.sources["timeZoneOffset"] != nil)
    }

    @Test func osReleaseIsParsed() {
        let fields = DeviceContext.parseOSRelease("PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\n# c\nID=debian\n")
        #expect(fields["NAME"] == "Debian GNU/Linux")
        #expect(fields["VERSION_ID"] == "12")
        #expect(fields["ID"] == "debian")
    }
}
