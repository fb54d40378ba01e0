/// One thing found by a walk of a local folder: what `Entry` says, plus the inode and the kinds a source never lists.
public struct LocalItem: Sendable, Hashable {
    public enum Kind: UInt8, Sendable {
        case file, folder, symlink
        /// A FIFO, socket or device.
        case special
    }

    public var path: RelativePath
    public var kind: Kind
    public var size: Int64
    public var mtime: FileTime
    public var inode: UInt64

    public init(path: RelativePath, kind: Kind, size: Int64, mtime: FileTime, inode: UInt64) {
        self.path = path
        self.kind = kind
        self.size = size
        self.mtime = mtime
        self.inode = inode
    }
}
