// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Folio",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "folio", targets: ["folio"]),
        .library(name: "FolioCore", targets: ["FolioCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // Linux syscalls that Glibc's module map hides (_GNU_SOURCE ones) as static inline shims.
        .target(name: "CFolioSys"),
        .target(name: "FolioCore", dependencies: ["CFolioSys"]),
        // libssh2 and libcurl are loaded with dlopen on first use, not linked (see their headers for why); their
        // -dev packages (libssh2-1-dev, libcurl4-openssl-dev) provide the headers.
        .target(name: "CLibSSH2", dependencies: ["CFolioSys"]),
        .target(name: "CLibCurl", dependencies: ["CFolioSys"]),
        .target(name: "FolioSFTP", dependencies: ["FolioCore", "CLibSSH2"]),
        .target(name: "FolioHTTP", dependencies: ["FolioCore", "CLibCurl"]),
        // sqlite3_db_config is variadic: a static inline shim calls it (libsqlite3-dev provides the header).
        .systemLibrary(name: "CSQLiteShims"),
        .target(name: "FolioState", dependencies: ["FolioCore", "CSQLiteShims", .product(name: "GRDB", package: "GRDB.swift"), .product(name: "GRDBSQLite", package: "GRDB.swift")]),
        .executableTarget(
            name: "folio",
            dependencies: [
                "CFolioSys", "FolioCore", "FolioState", "FolioSFTP", "FolioHTTP",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "FolioTestSupport", dependencies: ["FolioCore"], path: "Tests/FolioTestSupport"),
        .testTarget(name: "FolioCoreTests", dependencies: ["FolioCore", "FolioTestSupport"]),
        .testTarget(name: "FolioStateTests", dependencies: ["FolioState", "FolioTestSupport", .product(name: "GRDB", package: "GRDB.swift")]),
        .testTarget(name: "FolioCLITests", dependencies: ["FolioCore", "FolioState", "FolioTestSupport"]),
        .testTarget(name: "FolioSFTPTests", dependencies: ["FolioSFTP", "FolioTestSupport"]),
        .testTarget(name: "FolioHTTPTests", dependencies: ["FolioHTTP", "FolioTestSupport"]),
        .testTarget(name: "FolioDaemonTests", dependencies: ["FolioCore", "FolioState", "FolioTestSupport"]),
        // The executable's own types, in process: its fast command-line parser against argument-parser.
        .testTarget(name: "FolioCommandTests", dependencies: ["folio", .product(name: "ArgumentParser", package: "swift-argument-parser")]),
    ]
)
