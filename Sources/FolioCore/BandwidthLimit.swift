/// The most bytes per second one target's downloads may take together (`bandwidth-limit`, `--bwlimit`), so that
/// a daemon's runs leave room on a home uplink or a metered link, as `rsync --bwlimit` and `rclone --bwlimit` do.
public struct BandwidthLimit: Sendable, Equatable, CustomStringConvertible {
    /// The limit, in bytes per second.
    public let bytesPerSecond: Int64

    /// The lowest limit taken.
    public static let minimum: Int64 = 1 << 10
    /// How much of the limit each parallel download needs at least (see `TargetConfig.downloadWorkers`). Why:
    /// every worker waits its turn for its share, and with too many sharing a small limit, each would sit
    /// seconds between two reads of its connection, long enough for a server to give up on a client that does
    /// not read (nginx's `send_timeout` is 60 s).
    public static let perTransfer: Int64 = 64 << 10

    /// A limit of `bytesPerSecond`.
    public init(bytesPerSecond: Int64) { self.bytesPerSecond = bytesPerSecond }

    /// The limit written as rsync and rclone take it: a number in KiB/s (`"500"`), or with a unit: `"500K"`,
    /// `"2M"`, `"1.5MiB/s"`, `"1G"`, `"4096B"` (K, M and G count 1,024-fold). `"off"` is no limit (a target's
    /// way of lifting a default): `.some(nil)`. Not a limit, or below `minimum`: nil.
    public static func parse(_ text: String) -> BandwidthLimit?? {
        var rest = Substring(text.lowercased())
        while rest.first == " " { rest = rest.dropFirst() }
        while rest.last == " " { rest = rest.dropLast() }
        if rest == "off" { return .some(nil) }
        if rest.hasSuffix("/s") { rest = rest.dropLast(2) }
        let digits = rest.prefix { $0.isASCII && ($0.isNumber || $0 == ".") }
        let (kibi, mebi, gibi): (Double, Double, Double) = (1024, 1024 * 1024, 1024 * 1024 * 1024)
        // As rsync reads them: K, M and G (and KiB, MiB, GiB) 1,024-fold, KB, MB and GB 1,000-fold.
        let multiples: [Substring: Double] = ["": kibi, "b": 1, "k": kibi, "kb": 1e3, "kib": kibi,
                                              "m": mebi, "mb": 1e6, "mib": mebi, "g": gibi, "gb": 1e9, "gib": gibi]
        // Digits and one point only: Double's own parser would take "inf", "1e9" and hexadecimal.
        guard let multiple = multiples[rest.dropFirst(digits.count)], !digits.isEmpty, digits.filter({ $0 == "." }).count <= 1,
              let number = Double(digits), number * multiple <= Double(Int64.max / 2) else { return nil }
        let bytes = Int64(number * multiple)
        return bytes >= minimum ? .some(BandwidthLimit(bytesPerSecond: bytes)) : nil
    }

    /// "2.0 MiB/s", "500 KiB/s": the limit as lines write it.
    public var description: String { ByteCount.rate(Double(bytesPerSecond)) }
}
