/// Packs the paths of a listing into shared 64 KiB blocks instead of one allocation each
/// (`RelativePath.appending(name:in:)`).
///
/// One arena belongs to one thread (a walker thread's findings, one listing's parse): it is a value type, not
/// `Sendable`, and appends only past the ranges it has handed out (see `PathBlock`). A block lives as long as
/// any path in it.
public struct PathArena {
    static let blockSize = 64 << 10

    /// The block being filled, and how many of its bytes are handed out.
    private var block: PathBlock?
    private var used = 0

    /// An empty arena; its first path allocates the first block.
    public init() {}

    /// Room for `count` bytes: the block and the offset to write them at. A long path gets a block of its own,
    /// so a block is never left mostly empty.
    mutating func reserve(_ count: Int) -> (block: PathBlock, start: Int) {
        if count > Self.blockSize / 64 { return (PathBlock.make(capacity: count), 0) }
        // `Self.blockSize`, not `block.capacity`: that asks malloc every time.
        if let block, used + count <= Self.blockSize {
            defer { used += count }
            return (block, used)
        }
        let fresh = PathBlock.make(capacity: Self.blockSize)
        block = fresh
        used = count
        return (fresh, 0)
    }
}
