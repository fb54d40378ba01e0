/// The times a destination's filesystem can keep. FAT and exFAT keep 1980 to 2107 and clamp a time outside to
/// the nearer end: a file dated 1970 (an archive's, a camera's without a clock) is kept as 1980-01-01.
///
/// Why it matters: compared as they are, the source's 1970 and the destination's 1980 differ on every run, so such
/// a file was fetched again each run (the kernel's exFAT and FAT clamp at once), or, through exfat-fuse, which
/// shows the time set until the drive is mounted again, set aside as a local change at every replug.
public struct KeptTimeRange: Sendable, Equatable {
    /// The first and last second kept (UTC).
    public let first: Int64
    public let last: Int64

    /// FAT's and exFAT's: 1980-01-01 00:00:00 to 2107-12-31 23:59:59.
    public static let fat = KeptTimeRange(first: 315_532_800, last: 4_354_819_199)

    /// Where the clamped time may land: FAT keeps local time, so an end moves by the time zone (a day covers them
    /// all); exfat-fuse keeps a time past 2107 as 2071-12-31, an overflow, so anything from 2071 on counts for it.
    private static let zoneSlack: Int64 = 86_400
    private static let exfatFuseLast: Int64 = 3_187_296_000

    /// Whether `kept`, read from a destination that keeps times to `precision` and within `range` (nil: any), is
    /// the source's `time`, given to `timePrecision`.
    public static func matches(_ time: FileTime, _ timePrecision: TimePrecision, kept: FileTime, precision: TimePrecision, range: KeptTimeRange?) -> Bool {
        FileTime.equal(time, timePrecision, kept, precision) || range?.keeps(time, as: kept) == true
    }

    /// Whether `kept`, a time read from the destination, is what this filesystem keeps of `time`: only for a time
    /// outside the range, clamped to the nearer end. (Times inside it are compared as they are, at the
    /// destination's precision.)
    public func keeps(_ time: FileTime, as kept: FileTime) -> Bool {
        guard time.isKnown, kept.isKnown else { return false }
        if time.seconds < first { return abs(kept.seconds - first) <= Self.zoneSlack }
        if time.seconds > last { return kept.seconds >= Self.exfatFuseLast }
        return false
    }
}
