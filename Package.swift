// swift-tools-version:6.0
import PackageDescription

// The metrics API (swift-metrics): the libraries record, only the executable picks the backend.
let coreMetrics: Target.Dependency = .product(name: "CoreMetrics", package: "swift-metrics")

let package = Package(
    name: "TodoSync",
    // The server (libfcgi, Connector/C) runs on Linux. The client library builds for Apple
    // platforms too: iOS 16 / macOS 13 are what it asks of them.
    platforms: [.macOS(.v13), .iOS(.v16)],
    products: [
        .executable(name: "todosync", targets: ["todosync"]),
        .executable(name: "todosync-test", targets: ["todosync-test"]),
        // The device side: offline-first sync over SQLite, and a terminal client built on it.
        .library(name: "TodoSyncClient", targets: ["TodoSyncClient"]),
        .executable(name: "todosync-client", targets: ["todosync-client"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        // --- docs helper (issue 14): the generated OpenAPI client that proves openapi.yaml ---
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/apple/swift-openapi-urlsession", from: "1.4.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        // --- end docs helper ---
        // --- ops (issue 14): metrics. Neither package pulls in NIO (swift-prometheus 2.x needs
        // only swift-atomics and CoreMetrics). ---
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // C libraries: one system-library target each, imported by exactly one Swift module.
        .systemLibrary(name: "CFastCGI", pkgConfig: "fcgi", providers: [.apt(["libfcgi-dev"])]),
        .systemLibrary(name: "CMariaDB", pkgConfig: "libmariadb", providers: [.apt(["libmariadb-dev"])]),
        .systemLibrary(name: "CArgon2", pkgConfig: "libargon2", providers: [.apt(["libargon2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // libdeflate decompresses (MariaDB's COMPRESS() output, tests); ISA-L's igzip compresses
        // whole bodies, 2.3x faster than libdeflate at its fastest level (docs/BENCHMARKS.md).
        .systemLibrary(name: "CDeflate", pkgConfig: "libdeflate", providers: [.apt(["libdeflate-dev"])]),
        .systemLibrary(name: "CISAL", pkgConfig: "libisal", providers: [.apt(["libisal-dev"])]),
        // zlib for gzip that streams (a body compressed while it is produced).
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // The system SQLite, for the server's snapshot files (docs/SNAPSHOT.md). Not GRDB's module
        // (GRDBSQLite, the client's): the server links no client code, and the name stays apart.
        .systemLibrary(name: "CSystemSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),

        // Swift wrappers: the only importers of the C modules.
        .target(name: "FastCGI", dependencies: ["CFastCGI", .product(name: "Logging", package: "swift-log"), coreMetrics]),
        .target(name: "MariaDB", dependencies: ["CMariaDB", .product(name: "Logging", package: "swift-log"), coreMetrics]),
        .target(name: "Credentials", dependencies: ["CArgon2", "COpenSSL", "TodoSyncCore", coreMetrics]),
        .target(name: "Deflate", dependencies: ["CDeflate", "CISAL", "CZlib"]),
        .target(name: "SystemSQLite", dependencies: ["CSystemSQLite"]),

        // The application: domain (no C, no HTTP), store (SQL), API (routes), executable.
        .target(name: "TodoSyncCore"),
        // Configuration layering (defaults < config file < environment) for `todosync config`.
        .target(name: "TodoSyncConfig"),
        // The snapshot files (docs/SNAPSHOT.md): their cache, their tables and their build from a
        // stream of records. No SQL of the database: the store reads the records and hands them in.
        .target(name: "TodoSyncSnapshot", dependencies: ["TodoSyncCore", "SystemSQLite", "Deflate", "Credentials", coreMetrics]),
        .target(name: "TodoSyncStore", dependencies: ["TodoSyncCore", "TodoSyncSnapshot", "MariaDB", "Credentials", "Deflate", coreMetrics]),
        .target(
            name: "TodoSyncAPI",
            dependencies: ["TodoSyncCore", "TodoSyncStore", "TodoSyncSnapshot", "Deflate", .product(name: "Logging", package: "swift-log"), coreMetrics]
        ),
        // The responder's commands (serve, migrate, purge, …), shared by the two executables below.
        .target(
            name: "TodoSyncServer",
            dependencies: [
                "TodoSyncAPI", "TodoSyncStore", "TodoSyncSnapshot", "FastCGI", "MariaDB", "CBuildInfo", "TodoSyncConfig",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        // What ships: no test hooks linked in (Tests/integration/test_release_binary.py checks).
        .executableTarget(name: "todosync", dependencies: ["TodoSyncServer"]),
        // The test hooks (routes and waits for the lifecycle, deadline, idempotency and snapshot
        // tests, the benchmark's ceilings), and the test build that has them: the same release
        // modules plus this one, so building it after `todosync` costs a compile of one file and
        // a link (scripts/stack.sh build, with TODOSYNC_ENABLE_TEST_HOOKS=1).
        .target(name: "TodoSyncTestHooks", dependencies: ["TodoSyncAPI", "TodoSyncStore", "TodoSyncCore",
                                                         .product(name: "Logging", package: "swift-log")]),
        .executableTarget(name: "todosync-test", dependencies: ["TodoSyncServer", "TodoSyncTestHooks"]),

        // The client: the shared domain module, SQLite through GRDB, HTTP through URLSession.
        // Nothing of the server (store, API, MariaDB, FastCGI) is linked into it, nor it into the server;
        // the system libraries it shares with the server are libcrypto and libsqlite3 (through GRDB).
        .target(name: "TodoSyncClient", dependencies: [
            "TodoSyncCore", "CCurlStream", .product(name: "GRDB", package: "GRDB.swift"),
            // SQLite's C API, for the snapshot install's SQL functions (SnapshotInstall.swift).
            .product(name: "GRDBSQLite", package: "GRDB.swift"),
            // SHA-256 of snapshot files: libcrypto on Linux, CommonCrypto elsewhere (SnapshotDigest.swift).
            .byName(name: "COpenSSL", condition: .when(platforms: [.linux])),
        ]),
        // The client's live stream on Linux (Sources/TodoSyncClient/Live/CurlLiveStream.swift says why).
        .target(name: "CCurlStream", linkerSettings: [.linkedLibrary("curl", .when(platforms: [.linux]))]),
        .executableTarget(
            name: "todosync-client",
            dependencies: ["TodoSyncClient", "TodoSyncCore", .product(name: "ArgumentParser", package: "swift-argument-parser")]
        ),

        .testTarget(name: "CredentialsTests", dependencies: ["Credentials"]),
        .testTarget(name: "TodoSyncCoreTests", dependencies: ["TodoSyncCore"]),
        .testTarget(name: "TodoSyncConfigTests", dependencies: ["TodoSyncConfig"]),
        .testTarget(
            name: "TodoSyncAPITests",
            dependencies: ["TodoSyncAPI", "TodoSyncCore", "TodoSyncStore", "TodoSyncTestHooks", "MariaDB", "Deflate",
                           .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "MariaDBTests", dependencies: ["MariaDB", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "TodoSyncStoreTests", dependencies: ["TodoSyncStore", "TodoSyncSnapshot", "TodoSyncTestHooks", "TodoSyncCore", "MariaDB", "Credentials", "Deflate", "SystemSQLite"]),
        .testTarget(name: "TodoSyncClientTests", dependencies: ["TodoSyncClient", "TodoSyncCore"]),
        // Every representation of a synced field, server and client, held to the one list in
        // TodoSyncCore (issue 35): the one test target that sees both halves (no database needed).
        .testTarget(
            name: "SyncedFieldsTests",
            dependencies: ["TodoSyncCore", "TodoSyncStore", "TodoSyncSnapshot", "TodoSyncClient", .product(name: "GRDB", package: "GRDB.swift")]),
        .testTarget(
            name: "FastCGITests", dependencies: ["FastCGI", .product(name: "Logging", package: "swift-log")]),

        // --- docs helper (issue 14) ---
        // The git commit `todosync --version` prints (linked in by scripts/stack.sh build).
        .target(name: "CBuildInfo"),
        // A client generated from openapi.yaml (scripts/generate-openapi-client.sh; the code is
        // committed) decodes real responses of every route of the test stack.
        .testTarget(
            name: "OpenAPIClientTests",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            exclude: ["Generated/openapi-generator-config.yaml"]
        ),
        // --- end docs helper ---
    ]
)
