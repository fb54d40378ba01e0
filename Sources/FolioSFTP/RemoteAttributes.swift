/// What SFTP says about a file: type and permission bits, size, and mtime in whole seconds (SFTP version 3).
struct RemoteAttributes: Sendable, Equatable {
    enum Kind: Sendable { case file, folder, symlink, special, unknown }

    var mode: UInt32?
    var size: Int64?
    var mtime: Int64?

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
