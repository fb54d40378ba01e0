/// One thing found by a walk of a local folder: what `Entry` says, plus the inode and the kinds a source never lists.
public struct LocalItem: Sendable, Hashable {
    /// What a local entry is: the kinds of `Entry.Kind`, plus special files.
    public enum Kind: UInt8, Sendable {
        case file, folder, symlink
        /// A FIFO, socket or device.
        case special
    }

    /// Where it is, relative to the walked folder's root.
    public var path: RelativePath
    /// File, folder, symbolic link or special file.
    public var kind: Kind
    /// `st_size` in bytes (for a link, the length of its target's path); 0 for folders and special files.
    public var size: Int64
    /// The modification time `stat` reported.
    public var mtime: FileTime
    /// The inode number: with `mtime`, tells whether a file is still the one Folio left
    /// (`RecordedEntry.isLeftAsWritten`).
    public var inode: UInt64

    /// Creates an item from what `stat` said.
    public init(path: RelativePath, kind: Kind, size: Int64, mtime: FileTime, inode: UInt64) {
        self.path = path
        self.kind = kind
        self.size = size
        self.mtime = mtime
        self.inode = inode
    }
}
