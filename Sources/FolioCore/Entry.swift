/// One thing in a tree: a file, a folder or a symbolic link, as a source lists it or as the destination holds it.
public struct Entry: Hashable, Sendable {
    /// What an entry is. The raw value is what the state database stores.
    public enum Kind: UInt8, Sendable, CustomStringConvertible {
        case file = 0, folder = 1, symlink = 2

        /// `file`, `folder` or `symlink`.
        public var description: String {
            switch self {
            case .file: "file"
            case .folder: "folder"
            case .symlink: "symlink"
            }
        }
    }

    // Stored properties are ordered for packing (the one-byte fields last, validator and checksum behind one
    // `EntryTokens` reference): a snapshot holds one per entry, 48 bytes each in an array instead of 64.
    /// Where the entry is, relative to the target's root.
    public var path: RelativePath
    /// Bytes; 0 for folders.
    public var size: Int64
    /// The modification time; `FileTime.unknown` when the source does not give one.
    public var mtime: FileTime
    private var tokens: EntryTokens?
    /// File, folder or symbolic link.
    public var kind: Kind
    /// How finely `mtime` is known (the source's precision); two times compare at the coarser of theirs.
    public var precision: TimePrecision

    /// A token that changes whenever the content does (an HTTP ETag); nil when the source has none.
    public var validator: String? {
        get { tokens?.validator }
        set { tokens = EntryTokens.make(validator: newValue, checksum: checksum) }
    }

    /// `algorithm:hex` when the source offers one (e.g. `sha256:…`); nil otherwise.
    public var checksum: String? {
        get { tokens?.checksum }
        set { tokens = EntryTokens.make(validator: validator, checksum: newValue) }
    }

    /// The largest file size a listing may give: 1 PiB, more than any filesystem a server runs holds in one file.
    /// A bigger or negative size is the listing's error (a hostile or broken server), not a file to fetch: sums of
    /// sizes stay far from overflowing, and no file is planned that no disk can take.
    public static let maximumFileSize: Int64 = 1 << 50

    /// Creates an entry from what a listing says; `size` stays 0 for folders.
    public init(
        path: RelativePath, kind: Kind, size: Int64 = 0, mtime: FileTime, precision: TimePrecision = .nanosecond,
        validator: String? = nil, checksum: String? = nil
    ) {
        self.path = path
        self.kind = kind
        self.size = size
        self.mtime = mtime
        self.precision = precision
        self.tokens = EntryTokens.make(validator: validator, checksum: checksum)
    }
}
