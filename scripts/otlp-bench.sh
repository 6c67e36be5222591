#!/bin/sh
# Release-build speed of the OTLP decoder alone (BENCHMARKS.md): µs per record on the captured 50-record log batch.
# Builds a scratch package in .build/otlp-bench from MockServer/OutboxMock/Vendors/OTLP (which needs only
# Foundation and SwiftProtobuf), so it measures optimised swift-protobuf without building the whole mock in release.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
work="$root/.build/otlp-bench"
src="$work/Sources/otlp-bench"
rm -rf "$src" && mkdir -p "$src"
ln -s "$root"/MockServer/OutboxMock/Vendors/OTLP/*.swift "$root"/MockServer/OutboxMock/Vendors/OTLP/Generated/*.swift "$src/"
cat > "$work/Package.swift" <<'SWIFT'
// swift-tools-version:6.0
import PackageDescription
let package = Package(
    name: "otlp-bench",
    dependencies: [.package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0")],
    targets: [.executableTarget(name: "otlp-bench", dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")])]
)
SWIFT
cat > "$src/main.swift" <<'SWIFT'
import Foundation
let args = CommandLine.arguments
guard args.count > 1, let data = FileManager.default.contents(atPath: args[1]) else {
    print("usage: otlp-bench FIXTURE.body [rounds]"); exit(2)
}
let body = [UInt8](data), rounds = args.count > 2 ? Int(args[2]) ?? 2000 : 2000
// This thread's CPU time, not the wall clock: on a shared machine the wall clock counts other processes' turns.
struct CPUClock {
    func measure(_ work: () throws -> Void) rethrows -> Double {
        var start = timespec(), end = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start)
        try work()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end)
        return Double(end.tv_sec - start.tv_sec) + Double(end.tv_nsec - start.tv_nsec) / 1e9
    }
}
let clock = CPUClock()
func seconds(_ d: Double) -> Double { d }
var records = 0, best = Double.infinity
for _ in 0..<5 {  // best of five runs: the machine is shared
    var n = 0
    let t = clock.measure { for _ in 0..<rounds { n += (try? OTLPDecoder.decode(signal: .logs, encoding: .protobuf, body: body))?.records.count ?? 0 } }
    records = n; best = min(best, seconds(t) / Double(n))
}
let decoded = try OTLPDecoder.decode(signal: .logs, encoding: .protobuf, body: body)
var chars = 0, bestJSON = Double.infinity
for _ in 0..<5 {
    let t = clock.measure { for _ in 0..<(rounds / 10) { for r in decoded.records { chars += r.json.utf8.count } } }
    bestJSON = min(bestJSON, seconds(t) / Double(rounds / 10 * decoded.records.count))
}
print(String(format: "decode: %.2f µs per record (%d records per batch, %d batches); json: %.2f µs per record",
             best * 1e6, decoded.records.count, rounds, bestJSON * 1e6))
SWIFT
cd "$work" && swift build -c release --product otlp-bench >&2
"$work/.build/release/otlp-bench" "${1:-$root/Fixtures/vendors/otlp/python-logs-50.body}" "${2:-2000}"
