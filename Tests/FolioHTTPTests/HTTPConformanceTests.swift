import FolioCore
import FolioHTTP
import FolioTestSupport
import Foundation
import XCTest

/// The source conformance suite against every kind of real server the HTTP source supports.
final class HTTPConformanceTests: XCTestCase {
    private func source(_ url: String, webdav: Bool? = nil) throws -> HTTPSource {
        var settings = SourceSettings()
        settings.webdav = webdav
        return try HTTPSource(location: SourceLocation(parsing: url), settings: settings, timeout: 10, transfers: 2)
    }

    /// The source times its requests: through a proxy that adds 10 ms to each round trip, its listing alone
    /// reports at least that (a far link: 8 download workers when `transfers` is unset).
    func testTheListingMeasuresTheLinksRoundTrip() async throws {
        let server = try NginxServer()
        let proxy = try DelayProxy(forwardingTo: server.port, delay: 0.005)
        defer { proxy.stop() }
        FixtureTree.write(server.servedRoot, "rtt/a.txt", "alpha\n")
        let url = server.url("dav", "rtt/").replacingOccurrences(of: ":\(server.port)/", with: ":\(proxy.port)/")
        let source = try self.source(url)
        XCTAssertNil(source.roundTrip, "nothing timed before the listing")
        let snapshot = try await source.snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt"])
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(source.roundTrip), .milliseconds(10))
    }

    /// The listing starts as many workers (each its own connection) as downloads, and the rest, up to the host's
    /// cap, only once a request has shown the link far: 24 folders through a proxy adding 2 ms a round trip (near)
    /// are listed on at most 4 connections, through one adding 10 ms (far) on more.
    func testTheListingAddsWorkersOnlyOverAFarLink() async throws {
        let server = try NginxServer()
        for index in 0..<24 { FixtureTree.write(server.servedRoot, "wide/folder \(index)/f.txt", "x\n") }
        func connections(delay: TimeInterval) async throws -> Int {
            let proxy = try DelayProxy(forwardingTo: server.port, delay: delay)
            defer { proxy.stop() }
            let before = server.requests(containing: "PROPFIND /dav/wide/").count
            let url = server.url("dav", "wide/").replacingOccurrences(of: ":\(server.port)/", with: ":\(proxy.port)/")
            let snapshot = try await source(url).snapshot(options: ListingOptions())
            XCTAssertEqual(snapshot.entries.filter { $0.path.description.hasSuffix("/f.txt") }.count, 24)
            let propfinds = server.requests(containing: "PROPFIND /dav/wide/").dropFirst(before)
            return Set(propfinds.compactMap { $0.split(separator: " ").last }).count
        }
        let near = try await connections(delay: 0.001)
        XCTAssertLessThanOrEqual(near, ListingOptions().parallelism)
        let far = try await connections(delay: 0.005)
        XCTAssertGreaterThan(far, ListingOptions().parallelism)
    }

    func testNginxWebDAV() async throws {
        let server = try NginxServer()
        try await SourceConformance.run(servedRoot: server.servedRoot, options: .init(precision: .second, folderTimes: true)) {
            try self.source(server.url("dav", localPath: $0))
        }
    }

    func testNginxHTMLIndex() async throws {
        let server = try NginxServer()
        try await SourceConformance.run(servedRoot: server.servedRoot, options: .init(precision: .second, folderTimes: false)) {
            try self.source(server.url("html", localPath: $0))
        }
    }

    func testNginxJSONIndex() async throws {
        let server = try NginxServer()
        try await SourceConformance.run(servedRoot: server.servedRoot, options: .init(precision: .second, folderTimes: true)) {
            try self.source(server.url("json", localPath: $0), webdav: false)
        }
    }

    /// `webdav = "auto"`: the listing's first PROPFIND is the probe, so no OPTIONS request goes before it.
    func testApacheWebDAV() async throws {
        let server = try ApacheServer()
        try await SourceConformance.run(servedRoot: server.servedRoot, options: .init(precision: .second, folderTimes: true)) {
            try self.source(server.url("dav", localPath: $0))
        }
        XCTAssertFalse(server.requests(containing: "PROPFIND /dav/ 207 ").isEmpty)
        XCTAssertEqual(server.requests(containing: "OPTIONS").count, 0, "\(server.requests(containing: "/dav/"))")
    }

    /// One `Depth: infinity` PROPFIND lists the whole tree where the server allows it.
    func testApacheWebDAVDepthInfinity() async throws {
        let server = try ApacheServer()
        try await SourceConformance.run(servedRoot: server.servedRoot, options: .init(precision: .second, folderTimes: true)) {
            try self.source(server.url("davinf", localPath: $0))
        }
        // Each full listing was one PROPFIND: no folder was walked with Depth: 1. The root's Depth: 1 request goes
        // out alongside infinity (unless infinity answered first), and its answer is dropped.
        let propfinds = server.requests(containing: "PROPFIND")
        XCTAssertEqual(propfinds.filter { $0.hasPrefix("PROPFIND /davinf/ 207 ") && $0.hasSuffix("depth=infinity") }.count, 2, "\(propfinds)")
        let path = { (line: String) in line.split(separator: " ")[1] }
        let infinity = propfinds.filter { $0.hasSuffix("depth=infinity") }
        let depthOne = propfinds.filter { $0.hasSuffix("depth=1") }
        XCTAssertLessThanOrEqual(depthOne.count, infinity.count, "\(propfinds)")
        XCTAssertTrue(depthOne.allSatisfy { line in infinity.contains { path($0) == path(line) } }, "only listing roots: \(propfinds)")
    }

    /// A plain index answers the probing PROPFIND with no multistatus: Folio lists its pages instead.
    func testApacheIndex() async throws {
        let server = try ApacheServer()
        try await SourceConformance.run(servedRoot: server.servedRoot, options: .init(precision: .second, folderTimes: false)) {
            try self.source(server.url("index", localPath: $0))
        }
        XCTAssertFalse(server.requests(containing: "PROPFIND /index/").isEmpty)
        XCTAssertEqual(server.requests(containing: "PROPFIND /index/ 207 ").count, 0)
    }
}
