import Foundation

/// The TCP connections this machine holds open to a test's server, from the kernel's table.
public enum OpenConnections {
    /// The client side of the IPv4 connections to 127.0.0.1:`port` that are open (`ESTABLISHED`): the test's
    /// server, whose only clients are the test and the `folio` it runs. The table is read to its end: a `/proc`
    /// file reports no size, and a single read returns only its first page.
    public static func count(toPort port: Int) -> Int {
        guard let file = FileHandle(forReadingAtPath: "/proc/net/tcp") else { return -1 }
        defer { try? file.close() }
        let table = String(decoding: file.readDataToEndOfFile(), as: UTF8.self)
        let remote = String(format: "0100007F:%04X", port)
        return table.split(separator: "\n").dropFirst().filter { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[2] == remote && fields[3] == "01"  // 01: ESTABLISHED
        }.count
    }
}
