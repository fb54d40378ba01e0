/// NUL-terminated views of byte names for C calls, without assuming the bytes are UTF-8.
enum CString {
    static func with<Bytes: Collection, R>(_ bytes: Bytes, _ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R where Bytes.Element == UInt8 {
        try withUnsafeTemporaryAllocation(of: CChar.self, capacity: bytes.count + 1) { buffer in
            var i = 0
            for byte in bytes {
                buffer[i] = CChar(bitPattern: byte)
                i += 1
            }
            buffer[i] = 0
            return try body(UnsafePointer(buffer.baseAddress!))
        }
    }
}

extension RelativePath {
    /// The path as a C string relative to the target's root (`.` for the root itself).
    public func withCString<R>(_ body: (UnsafePointer<CChar>) throws -> R) rethrows -> R {
        try CString.with(isRoot ? [UInt8(ascii: ".")] : bytes, body)
    }
}
