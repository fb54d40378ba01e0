/// FNV-1a, 64 bits: a cheap, stable digest of a snapshot or a name (not for security).
public struct TreeDigest: Sendable {
    public private(set) var value: UInt64 = 0xCBF2_9CE4_8422_2325

    public init() {}

    public mutating func add(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in
            for byte in buffer {
                value ^= UInt64(byte)
                value = value &* 0x0000_0100_0000_01B3
            }
        }
        add(UInt64(bytes.count))
    }

    public mutating func add(_ word: UInt64) {
        var w = word
        for _ in 0..<8 {
            value ^= w & 0xFF
            value = value &* 0x0000_0100_0000_01B3
            w >>= 8
        }
    }

    /// The digest of everything a snapshot says, validators and checksums included.
    public static func of(_ snapshot: Snapshot) -> UInt64 {
        var digest = TreeDigest()
        for entry in snapshot.entries {
            digest.add(entry.path.bytes)
            digest.add(UInt64(entry.kind.rawValue))
            digest.add(UInt64(bitPattern: entry.size))
            digest.add(UInt64(bitPattern: entry.mtime.nanoseconds))
            digest.add(Array((entry.validator ?? "").utf8))
            digest.add(Array((entry.checksum ?? "").utf8))
        }
        return digest.value
    }
}
