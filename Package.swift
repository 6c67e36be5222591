// swift-tools-version:6.2
import PackageDescription

let package = Package(
    name: "Outbox",
    products: [
        .library(name: "Outbox", targets: ["Outbox"]),
        .library(name: "OutboxMock", targets: ["OutboxMock"]),
        .executable(name: "outbox", targets: ["outbox"]),
        .executable(name: "outbox-mock", targets: ["outbox-mock"]),
        // SPEC E: libOutbox.so for C hosts (`make install` installs it as libOutbox.so.0, with include/outbox.h).
        .library(name: "OutboxC", type: .dynamic, targets: ["OutboxC"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        // OTLP/HTTP, the engine's destination and the mock's (SPEC D1, V1): code generated once by scripts/gen-otlp.sh.
        // No traits: their defines (FieldMask, delimited streams: unused here) made the swift-app build (make swift-app)
        // and this one compile SwiftProtobuf differently, each undoing the other in the shared .build.
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0", traits: []),
        // `outbox fleet`'s delivery-delay percentiles (SPEC F1, F3).
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.2.0"),
        // The engine's own metrics (BEHAVIOUR O1–O3): the API only; the engine never bootstraps a backend.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    ],
    targets: [
        // System libraries (Debian: libuv1-dev libsqlite3-dev libcurl4-openssl-dev zlib1g-dev libdeflate-dev).
        .systemLibrary(name: "CLibUV", path: "Sources/CLibUV", pkgConfig: "libuv"),
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", pkgConfig: "sqlite3"),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl"),
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib"),
        // Only for `outbox-bench compression`, which measures it against CFastGzip (BENCHMARKS.md).
        .systemLibrary(name: "CLibDeflate", path: "Sources/CLibDeflate", pkgConfig: "libdeflate"),
        // Swift cannot call C variadic functions: curl_easy_setopt & co. get fixed-type wrappers.
        .target(name: "CCurlShim", dependencies: ["CCurl"], path: "Sources/CCurlShim"),
        // SPEC K2: a client certificate and its key checked at configuration with libcrypto (curl's own TLS library).
        .target(name: "CTLSIdentity", path: "Sources/CTLSIdentity", linkerSettings: [.linkedLibrary("crypto")]),
        // SPEC K1: the store's rows sealed with AES-256-GCM, event names kept as HMACs (libcrypto again).
        .target(name: "CStoreSeal", path: "Sources/CStoreSeal", linkerSettings: [.linkedLibrary("crypto")]),
        // rtnetlink socket helpers for the reachability watcher (SPEC N1).
        .target(name: "CNetlink", path: "Sources/CNetlink"),
        .target(name: "CFileSync", path: "Sources/CFileSync"),
        // The request bodies' default gzip compressor (SPEC W1; zlib only for its CRC-32).
        .target(name: "CFastGzip", dependencies: ["CZlib"], path: "Sources/CFastGzip"),

        // OTLP's logs service and what it uses, generated once by scripts/gen-otlp.sh and committed: the mock decodes
        // with it, and tests decode the engine's OTLP requests with it (SPEC D1, V1). The engine writes the wire format
        // itself: swift-protobuf imports Foundation, which libOutbox must not load.
        .target(name: "OTLPProto", dependencies: [.product(name: "SwiftProtobuf", package: "swift-protobuf")],
                path: "Sources/OTLPProto"),
        .target(
            name: "Outbox",
            dependencies: [
                "CLibUV", "CSQLite", "CCurlShim", "CZlib", "CNetlink", "CFastGzip", "CFileSync", "CTLSIdentity", "CStoreSeal",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ],
            path: "Sources/Outbox"
        ),
        // SPEC E2–E3, P5: the C interface. Exports only the functions of include/outbox.h (a version script), has the
        // SONAME it is installed under, and finds the Swift runtime in its own directory beside it ($ORIGIN/outbox)
        // rather than in a toolchain the host does not have.
        .target(name: "COutboxSupport", path: "Sources/COutboxSupport"),
        .target(
            name: "OutboxC",
            dependencies: ["Outbox", "COutboxSupport", .product(name: "Logging", package: "swift-log")],
            path: "Sources/OutboxC",
            exclude: ["exports.map"],
            linkerSettings: [.unsafeFlags(["-use-ld=bfd", "-Xlinker", "--version-script=Sources/OutboxC/exports.map",
                                           "-Xlinker", "-soname=libOutbox.so.0", "-no-toolchain-stdlib-rpath",
                                           "-Xlinker", "-rpath=$ORIGIN/outbox"])]
        ),
        // `outbox fleet` (SPEC F1–F4): plan, run, account, report; the CLI parses its options and calls it.
        .target(
            name: "OutboxFleet",
            dependencies: ["Outbox", "OutboxMock", "CLibUV", .product(name: "Logging", package: "swift-log"),
                           .product(name: "Histogram", package: "hdrhistogram-swift"),
                           .product(name: "CoreMetrics", package: "swift-metrics"),
                           // `--metrics-port`'s HTTP server: the mock's SwiftNIO, already linked through OutboxMock.
                           .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOPosix", package: "swift-nio"),
                           .product(name: "NIOHTTP1", package: "swift-nio")],
            path: "Sources/OutboxFleet"
        ),
        .executableTarget(
            name: "outbox",
            dependencies: ["Outbox", "OutboxMock", "OutboxFleet", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "Logging", package: "swift-log")],
            path: "Sources/outbox",
            // Release: GNU ld, for packed relative relocations (DT_RELR, glibc 2.36+) that the default gold cannot
            // write, and no dynamic export of the executable's own symbols: both cut what every process maps at start.
            linkerSettings: [.unsafeFlags(["-use-ld=bfd", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                                           "-Xlinker", "--no-export-dynamic"], .when(configuration: .release))]
        ),

        .target(
            name: "OutboxMock",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"), "OTLPProto",
                // Request bodies: libdeflate in one shot, zlib streaming as the bounded fallback (SPEC M10).
                "CLibDeflate", "CZlib",
            ],
            path: "MockServer/OutboxMock",
            // The named scenarios (SPEC P3): found as this resource, also in a package that depends on Outbox.
            resources: [.copy("Scenarios")],
            // Optimised in debug builds when this repository's Makefile builds (OUTBOX_OPTIMIZE_MOCK=1): `swift test`
            // builds debug, and the engine's load tests must not measure an unoptimised JSON validator (≈ 9k logs/s
            // at -Onone, ≈ 75k with -O; release ≈ 200k). Without it the manifest has no unsafe flag outside OutboxC,
            // so that a package can depend on Outbox by URL (SPEC P3; ManifestTests checks `dump-package`).
            swiftSettings: Context.environment["OUTBOX_OPTIMIZE_MOCK"] == "1"
                ? [.unsafeFlags(["-O"], .when(configuration: .debug))] : []
        ),
        .executableTarget(
            name: "outbox-mock",
            dependencies: ["OutboxMock", .product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "MockServer/outbox-mock"
        ),

        // Benchmarks: `make bench` builds this in release mode.
        .executableTarget(
            name: "outbox-bench",
            dependencies: ["Outbox", "OutboxMock", "CSQLite", "CFastGzip", "CLibDeflate"],
            path: "Benchmarks/outbox-bench"
        ),
        // Runs a command and prints its peak RSS: `outbox-bench memory` measures the CLI through it.
        .executableTarget(name: "outbox-peak-rss", path: "Benchmarks/outbox-peak-rss"),
        .executableTarget(
            name: "outbox-mock-bench",
            dependencies: ["OutboxMock", "OutboxTestSupport",
                           .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "NIOPosix", package: "swift-nio"),
                           .product(name: "NIOHTTP1", package: "swift-nio")],
            path: "Benchmarks/outbox-mock-bench"
        ),
        // A child process for the crash tests: tracks events in a loop until it is killed.
        .executableTarget(name: "outbox-crash-child", dependencies: ["Outbox"], path: "Tests/CrashChild"),

        // The tests' one toolbox: temporary directories, a seeded random source, gzip through zlib, child processes,
        // a log handler that records.
        .target(name: "OutboxTestSupport", dependencies: ["CZlib", .product(name: "Logging", package: "swift-log")],
                path: "Tests/TestSupport"),
        // The executables a test target runs as child processes are among its dependencies: `swift build --product
        // OutboxPackageTests` (the Makefile's one build for `make test`) then builds them too, and nothing else.
        .testTarget(name: "OutboxTests", dependencies: ["Outbox", "OutboxTestSupport", "CLibUV", "CSQLite", "CCurlShim", "CStoreSeal",
                                                      "outbox-crash-child",
                                                      // an independent reader of the engine's OTLP requests
                                                      "OTLPProto", .product(name: "SwiftProtobuf", package: "swift-protobuf")],
                    path: "Tests/OutboxTests"),
        // Pure tests: no file, socket or child process, values and fakes in memory (`swift test --filter OutboxUnitTests`).
        .testTarget(name: "OutboxUnitTests", dependencies: ["Outbox", "OutboxTestSupport", "CZlib", "CFastGzip"], path: "Tests/OutboxUnitTests"),
        .testTarget(name: "OutboxMockTests", dependencies: [
            "OutboxMock", "OutboxTestSupport",
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "SwiftProtobuf", package: "swift-protobuf"),  // decodes the OTLP answers
            "OTLPProto",
        ], path: "Tests/OutboxMockTests"),
        .testTarget(name: "EndToEndTests", dependencies: ["Outbox", "OutboxTestSupport", "OutboxMock", "outbox", "outbox-mock",
                                                        .product(name: "MetricsTestKit", package: "swift-metrics")],
                    path: "Tests/EndToEndTests"),
    ]
)

// `make fuzz` (scripts/fuzz.sh) only: OUTBOX_FUZZ=1 adds the libFuzzer harness, built in its own scratch path
// (.build-fuzz) so the normal build never sees it. The harness calls the parsers' internal entry points, so it is
// built with -enable-testing (`@testable import`), in release for speed. The CLI is an executable
// target, whose objects SwiftPM links into no other executable: here it becomes a library of the same sources,
// its `@main` renamed so that it does not clash with the harness's.
if Context.environment["OUTBOX_FUZZ"] == "1" {
    let cli = "outbox"
    if let index = package.targets.firstIndex(where: { $0.name == cli }) {
        let original = package.targets[index]
        package.targets[index] = .target(
            name: cli, dependencies: original.dependencies, path: original.path,
            swiftSettings: [.unsafeFlags(["-Xfrontend", "-entry-point-function-name", "-Xfrontend", "outbox_cli_main"])])
    }
    package.products.removeAll { $0.name == cli }
    // OutboxC's version script (only outbox_* exported) would apply to the harness too, and hide the
    // AddressSanitizer allocator from the shared libraries: they would allocate with glibc's malloc.
    package.targets.first { $0.name == "OutboxC" }?.linkerSettings = []
    package.targets.append(.executableTarget(
        name: "outbox-fuzz",
        dependencies: [
            "Outbox", "OutboxMock", "OutboxC", "COutboxSupport", .target(name: cli), "CZlib",
            .product(name: "ArgumentParser", package: "swift-argument-parser"),
            .product(name: "Logging", package: "swift-log"),
            .product(name: "NIOCore", package: "swift-nio"),
            .product(name: "NIOEmbedded", package: "swift-nio"),
            .product(name: "NIOHTTP1", package: "swift-nio"),
            .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
        ],
        path: "Fuzz/outbox-fuzz"))
}
