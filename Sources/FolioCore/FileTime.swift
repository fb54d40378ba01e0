import Glibc

/// A modification time, in nanoseconds since the Unix epoch.
public struct FileTime: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Nanoseconds since 1970-01-01 00:00 UTC; `Int64.min` means unknown.
    public var nanoseconds: Int64

    /// A time from nanoseconds since the epoch, taken as is.
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    /// A source that does not say (a WebDAV folder without `getlastmodified`).
    public static let unknown = FileTime(nanoseconds: .min)
    /// False for `unknown`.
    public var isKnown: Bool { nanoseconds != .min }

    /// The latest and earliest times a `FileTime` holds: 2262-04-11 and 1677-09-21. A time past them (a file
    /// dated in the year 3000, a server's `Last-Modified` in 9999) is held as the nearest of the two, not
    /// trapped on: such a file is mirrored with that time, and stays unchanged on the next run. The earliest is
    /// a whole number of every precision's units, so truncating it stays in range.
    public static let latest = FileTime(nanoseconds: .max)
    /// The earliest time a `FileTime` holds, 1677-09-21: a whole number of two-second units (see `latest`).
    public static let earliest = FileTime(nanoseconds: -4_611_686_018 * 2_000_000_000)

    /// A time from seconds and nanoseconds since the epoch; one out of range is held as `earliest` or `latest`.
    public init(seconds: Int64, nanoseconds: Int64 = 0) {
        let (scaled, overflowed) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (total, overflowedAgain) = scaled.addingReportingOverflow(nanoseconds)
        if overflowed || overflowedAgain {
            self = seconds < 0 ? .earliest : .latest
        } else {
            self.nanoseconds = max(total, Self.earliest.nanoseconds)
        }
    }

    /// The modification time in a `stat` result.
    init(modificationOf info: stat) {
        self.init(seconds: Int64(info.st_mtim.tv_sec), nanoseconds: Int64(info.st_mtim.tv_nsec))
    }

    /// Whole seconds since the epoch, rounded toward the past (-0.5 s is -1).
    public var seconds: Int64 { nanoseconds.floorDivided(by: 1_000_000_000) }
    /// Nanoseconds past `seconds`: 0 to 999,999,999.
    public var subsecondNanoseconds: Int64 { nanoseconds - seconds * 1_000_000_000 }

    /// This time cut down to a precision (toward the past, as filesystems and servers do).
    public func truncated(to precision: TimePrecision) -> FileTime {
        let unit = precision.nanoseconds
        return FileTime(nanoseconds: nanoseconds.floorDivided(by: unit) * unit)
    }

    /// Whether two times name the same instant at the coarser of two precisions.
    public static func equal(_ a: FileTime, _ aPrecision: TimePrecision, _ b: FileTime, _ bPrecision: TimePrecision) -> Bool {
        guard a.isKnown, b.isKnown else { return false }
        let coarser = max(aPrecision, bPrecision)
        return a.truncated(to: coarser) == b.truncated(to: coarser)
    }

    /// Earlier times first.
    public static func < (lhs: FileTime, rhs: FileTime) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    /// `seconds.nanoseconds` with nine digits after the point, e.g. `1700000000.000000000`.
    public var description: String { "\(seconds).\(String(subsecondNanoseconds).leftPadded(to: 9))" }
}

/// How finely a source or a filesystem records modification times.
public enum TimePrecision: UInt8, Comparable, Sendable, CaseIterable {
    /// `tenMilliseconds` is exFAT's; `second` that of ext4 with 128-byte inodes, HFS+ and many network shares;
    /// `twoSeconds` FAT's.
    case nanosecond = 0, microsecond, millisecond, tenMilliseconds, second, twoSeconds

    /// The precision's unit in nanoseconds: 1 for `nanosecond` up to 2,000,000,000 for `twoSeconds`.
    public var nanoseconds: Int64 {
        switch self {
        case .nanosecond: 1
        case .microsecond: 1_000
        case .millisecond: 1_000_000
        case .tenMilliseconds: 10_000_000
        case .second: 1_000_000_000
        case .twoSeconds: 2_000_000_000
        }
    }

    /// Finer precisions first.
    public static func < (lhs: TimePrecision, rhs: TimePrecision) -> Bool { lhs.rawValue < rhs.rawValue }

    /// The precision a filesystem showed by keeping `readBack` of a time set to `written`: the finest at which
    /// the two agree (FAT, the coarsest, when none does).
    public init(keeping readBack: FileTime, of written: FileTime) {
        self = Self.allCases.first { FileTime.equal(written, $0, readBack, $0) } ?? .twoSeconds
    }
}

extension Int64 {
    func floorDivided(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
