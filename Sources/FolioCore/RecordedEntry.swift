/// What the state database remembers of an entry Folio put in place: the source version it copied and the
/// local file it left, so a later run can tell "unchanged", "changed on the source" and "changed here" apart.
public struct RecordedEntry: Sendable, Hashable {
    // The one-byte field last, validator and checksum behind one reference: the record holds one per entry.
    /// Where the entry is, relative to the target's root.
    public var path: RelativePath
    /// The source's size, mtime, validator and checksum at the time of copying.
    public var size: Int64
    /// The source's mtime when it was copied.
    public var mtime: FileTime
    private var tokens: EntryTokens?
    /// The local file Folio left: its inode and mtime.
    public var localInode: UInt64
    /// The local copy's mtime as Folio left it.
    public var localMtime: FileTime
    /// File, folder or symbolic link, as the source listed it.
    public var kind: Entry.Kind

    /// The source's validator (an ETag) when it was copied; nil when it had none.
    public var validator: String? {
        get { tokens?.validator }
        set { tokens = EntryTokens.make(validator: newValue, checksum: checksum) }
    }

    /// The source's checksum when it was copied; nil when it had none.
    public var checksum: String? {
        get { tokens?.checksum }
        set { tokens = EntryTokens.make(validator: validator, checksum: newValue) }
    }

    /// Creates a record from its fields, as the state database stores them.
    public init(path: RelativePath, kind: Entry.Kind, size: Int64, mtime: FileTime, validator: String?, checksum: String?,
                localInode: UInt64, localMtime: FileTime) {
        self.path = path
        self.kind = kind
        self.size = size
        self.mtime = mtime
        self.tokens = EntryTokens.make(validator: validator, checksum: checksum)
        self.localInode = localInode
        self.localMtime = localMtime
    }

    /// A record of `entry` as now held locally by `item`.
    public init(_ entry: Entry, local item: LocalItem) {
        self.init(entry, localInode: item.inode, localMtime: item.mtime)
    }

    /// A record of `entry` as Folio just left it: the local inode and mtime it has now.
    public init(_ entry: Entry, localInode: UInt64, localMtime: FileTime) {
        self.init(path: entry.path, kind: entry.kind, size: entry.size, mtime: entry.mtime, validator: entry.validator,
                  checksum: entry.checksum, localInode: localInode, localMtime: localMtime)
    }

    /// Whether the local item is still exactly what Folio left there.
    /// A folder counts as left as written while it is the same folder: its mtime moves with its content.
    /// `timeRange`: the destination's (`Destination.timeRange`), whose clamping of a time Folio set is no change.
    public func isLeftAsWritten(_ item: LocalItem, timeRange: KeptTimeRange? = nil) -> Bool {
        guard item.inode == localInode else { return false }
        if kind == .folder { return item.kind == .folder }
        return item.kind == .file && (item.mtime == localMtime || timeRange?.keeps(localMtime, as: item.mtime) == true) && item.size == size
    }

    /// Whether the source entry is the version that was copied.
    public func describesSameVersion(as entry: Entry) -> Bool {
        entry.kind == kind && entry.size == size && entry.mtime == mtime && entry.validator == validator && entry.checksum == checksum
    }
}
