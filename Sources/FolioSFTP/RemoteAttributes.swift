import FolioCore

/// What SFTP says about a file: type and permission bits, size, and mtime in whole seconds (SFTP version 3).
struct RemoteAttributes: Sendable, Equatable {
    enum Kind: Sendable { case file, folder, symlink, special, unknown }

    var mode: UInt32?
    var size: Int64?
    /// As SFTP version 3 carries it: 32 bits without a sign, so sshd sends 1969 as 2106 (OpenSSH's own client
    /// reads it so too).
    var mtime: Int64?

    /// Whether `mtime` is `seconds` as far as 32 bits tell: a listing that read the true time (find) and this
    /// answer agree on a file dated before 1970 or after 2106.
    func hasTime(_ seconds: Int64) -> Bool {
        // A listed time `FileTime` had to keep as its latest or earliest (past 2262, before 1677) is not the
        // server's, so it says nothing here: compared, such a file "changed while it was copied" on every run.
        if seconds >= FileTime.latest.seconds || seconds <= FileTime.earliest.seconds { return mtime != nil }
        return mtime.map { UInt32(truncatingIfNeeded: $0) == UInt32(truncatingIfNeeded: seconds) } ?? false
    }

    var kind: Kind {
        guard let mode else { return .unknown }
        switch mode & 0o170000 {
        case 0o100000: return .file
        case 0o040000: return .folder
        case 0o120000: return .symlink
        default: return .special
        }
    }
}
