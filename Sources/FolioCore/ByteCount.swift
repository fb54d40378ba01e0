/// Byte counts and rates for people: "1.2 GiB", "38.2 MiB/s".
public enum ByteCount {
    /// `bytes` in binary units: `512 B`, `1.5 KiB`, `120 MiB` (one decimal below 100 of a unit).
    public static func format(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        // Why 1023.5 rather than 1024: a value that rounds to 1024 of a unit is shown as 1.0 of the next
        // (1,048,575 B is "1.0 MiB", not "1024 KiB").
        while value >= 1023.5 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        return value >= 100 ? "\(Int(value.rounded())) \(units[unit])" : "\(String(format1: value)) \(units[unit])"
    }

    /// A rate in bytes per second, as `format` writes it plus `/s`: `38.2 MiB/s`.
    public static func rate(_ bytesPerSecond: Double) -> String {
        format(Int64(bytesPerSecond)) + "/s"
    }
}

extension String {
    /// One decimal, without Foundation's locale-dependent formatting.
    public init(format1 value: Double) {
        let tenths = Int((value * 10).rounded())
        self = "\(tenths / 10).\(tenths % 10)"
    }
}
