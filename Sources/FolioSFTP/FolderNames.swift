import CLibSSH2
import FolioCore

/// One folder's names as readdir brings them, with a bound. Why: readdir ends only when the server says so, and a
/// server whose listing of a folder goes round in circles (a fault of the share or filesystem behind it) or never
/// ends (a hostile server) grew Folio's memory until the kernel killed it, the run never ending before that. Such a
/// folder now fails alone, as an unreadable one does: nothing below it is removed.
///
/// A name seen twice is the circle (no folder holds one name twice); it is watched for only past `watchedFrom`
/// names, so that the folders of every real tree cost nothing more than their array.
struct FolderNames {
    typealias Name = (name: [UInt8], attributes: RemoteAttributes)

    /// The names so far, in the server's order.
    private(set) var names: [Name] = []
    /// What the names hold in memory, about: their bytes and each one's array and attributes.
    private var heldBytes = 0
    /// The index of each name by its hash, from the `watchedFrom`th name on.
    private var seen: [Int: Int]?
    private let watchedFrom: Int
    private let byteLimit: Int

    /// The folder's bounds: a name seen twice once there are `watchedFrom` names, and `byteLimit` in all (256 MiB
    /// by default: about three million names, as the exec listing's 512 MiB of output is about five million).
    init(watchedFrom: Int = 100_000, byteLimit: Int = 256 << 20) {
        self.watchedFrom = watchedFrom
        self.byteLimit = byteLimit
    }

    /// Adds the next name, or throws the folder's failure when it passes a bound.
    mutating func append(_ name: Name) throws(LibSSH2Error) {
        heldBytes += name.name.count + 64
        guard heldBytes <= byteLimit else {
            throw Self.failure("the server listed more than \(names.count) names in it and did not end (its listing is broken); check the folder on the server, or exclude it")
        }
        if seen == nil, names.count == watchedFrom {
            var index: [Int: Int] = [:]
            index.reserveCapacity(watchedFrom * 2)
            for (position, earlier) in names.enumerated() { index[earlier.name.hashValue] = position }
            seen = index
        }
        if seen != nil {
            let hash = name.name.hashValue
            if let earlier = seen![hash], names[earlier].name == name.name {
                throw Self.failure("the server listed \"\(RelativePath.display(name.name))\" twice in it, after \(names.count) names: its listing goes round in circles (a fault of the disk or share behind the server); check the folder on the server")
            }
            seen![hash] = names.count
        }
        names.append(name)
    }

    private static func failure(_ message: String) -> LibSSH2Error {
        LibSSH2Error(code: LIBSSH2_ERROR_SFTP_PROTOCOL, message: message, sftpStatus: nil, isEndlessListing: true)
    }
}
