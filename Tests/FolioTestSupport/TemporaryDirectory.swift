import Foundation

/// A folder under the system temp directory, removed when the test is done with it.
public final class TemporaryDirectory: @unchecked Sendable {
    // Why @unchecked: `url` is immutable after init; removal happens once, in deinit.
    public let url: URL
    public var path: String { url.path }

    public init(_ label: String = "folio") {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString.prefix(8))")
        try! FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        url = base
    }

    public func path(_ relative: String) -> String { url.appendingPathComponent(relative).path }

    deinit {
        // Restore write permission first: tests make folders read-only.
        _ = try? Process.run(URL(fileURLWithPath: "/bin/chmod"), arguments: ["-R", "u+rwx", url.path]).waitUntilExit()
        try? FileManager.default.removeItem(at: url)
    }
}
