/// Bytes that `RelativePath`s point into: one path's (`holding`, `make`), or many packed by a `PathArena`.
///
/// `ManagedBuffer` cannot be `Sendable`; `Shared` carries a block across threads. Why that is safe: the bytes
/// of a range handed to a `RelativePath` are written once, before the path exists, and never again; a
/// `PathArena` appends only past every range it handed out, and one arena belongs to one thread. Readers on
/// other threads therefore never see a byte change, and the header is never read or written.
final class PathBlock: ManagedBuffer<Void, UInt8> {
    /// A block that may cross threads (see above).
    struct Shared: @unchecked Sendable {
        let block: PathBlock
    }

    /// The block of the root path, which has no bytes.
    static let empty = Shared(block: PathBlock.make(capacity: 0))

    /// A block of at least `capacity` bytes, to be written through `withMutableBytes`.
    static func make(capacity: Int) -> PathBlock {
        unsafeDowncast(PathBlock.create(minimumCapacity: capacity) { _ in }, to: PathBlock.self)
    }

    /// A block holding a copy of `bytes`.
    static func holding<Bytes: Collection>(_ bytes: Bytes) -> PathBlock where Bytes.Element == UInt8 {
        let block = make(capacity: bytes.count)
        block.withMutableBytes(count: bytes.count) { _ = $0.initialize(fromContentsOf: bytes) }
        return block
    }

    /// The bytes `start..<start + count`, in place.
    @inline(__always)
    func withBytes<Result, Failure: Error>(start: Int, count: Int,
                                           _ body: (UnsafeBufferPointer<UInt8>) throws(Failure) -> Result) throws(Failure) -> Result {
        try withUnsafeMutablePointerToElements { (elements) throws(Failure) -> Result in
            try body(UnsafeBufferPointer(start: elements + start, count: count))
        }
    }

    /// The block's first `count` bytes (no more than it was made with), for writing bytes no `RelativePath`
    /// points at yet.
    func withMutableBytes(count: Int, _ body: (UnsafeMutableBufferPointer<UInt8>) -> Void) {
        withUnsafeMutablePointerToElements { body(UnsafeMutableBufferPointer(start: $0, count: count)) }
    }
}
