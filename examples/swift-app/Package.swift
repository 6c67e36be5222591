// swift-tools-version:6.2
// SPEC P3: an app that depends on Outbox as any package would. Here by path (this repository); from elsewhere:
//     .package(url: "https://github.com/<owner>/outbox", from: "0.2.0")
// with the same products. `make test` builds it and runs its tests.
import PackageDescription

let package = Package(
    name: "SwiftApp",
    dependencies: [
        .package(name: "Outbox", path: "../.."),
    ],
    targets: [
        .target(name: "SwiftApp", dependencies: [.product(name: "Outbox", package: "Outbox")]),
        .testTarget(name: "SwiftAppTests", dependencies: [
            "SwiftApp",
            .product(name: "Outbox", package: "Outbox"),
            .product(name: "OutboxMock", package: "Outbox"),
        ]),
    ]
)
