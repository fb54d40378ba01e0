import CFolioSys

/// The type of file system an open file is on (`fstatfs`'s `f_type`), for the choices that depend on it.
struct FileSystemType: Equatable {
    let magic: UInt

    static let ext4 = FileSystemType(magic: 0xEF53)  // also ext2 and ext3
    static let xfs = FileSystemType(magic: 0x5846_5342)
    static let btrfs = FileSystemType(magic: 0x9123_683E)
    static let f2fs = FileSystemType(magic: 0xF2F5_2010)
    static let msdos = FileSystemType(magic: 0x4D44)  // FAT12/16/32 (vfat)
    static let exfat = FileSystemType(magic: 0x2011_BAB0)
    static let fuseblk = FileSystemType(magic: 0x6573_5546)  // every FUSE filesystem: exfat-fuse among them

    init(magic: UInt) { self.magic = magic }

    /// The file system under `fd` (a magic of 0 when `fstatfs` fails, which answers no to every question).
    init(of fd: Int32) { magic = folio_file_system_type(fd) }

    /// Whether writes past the page cache (direct I/O) pay here: on the local-disk file systems that support it
    /// well. Elsewhere it can cost more than it saves (over NFS each direct write waits for the server's commit;
    /// FUSE and ZFS may not honour it).
    var takesDirectIO: Bool { [.ext4, .xfs, .btrfs, .f2fs].contains(self) }

    /// Whether this may be FAT or exFAT, whose times run from 1980 to 2107: asked only of a filesystem that ignores
    /// case, so a FUSE one is most likely exfat-fuse (ntfs-3g keeps case).
    var keepsFATTimes: Bool { [.msdos, .exfat, .fuseblk].contains(self) }

    /// Whether a copy within this file system can share the original's blocks (`copy_file_range` is then a
    /// reflink: instant, and free of space).
    var sharesBlocksOnCopy: Bool { self == .xfs || self == .btrfs }
}
