import Foundation

/// Durations written as "90s", "15m", "2h", "1d" or combined ("1h30m").
public enum DurationText {
    /// The number of seconds `text` says ("90s" → 90, "1h30m" → 5400); nil for anything else: empty text,
    /// a number without a unit, a space, an unknown unit, or a number of 10,000,000 or more.
    public static func seconds(_ text: String) -> Int? {
        var total = 0, number = 0, sawDigit = false, sawUnit = false
        for c in text {
            if let digit = c.wholeNumberValue, c.isASCII {
                number = number * 10 + digit
                sawDigit = true
                guard number < 10_000_000 else { return nil }
            } else {
                guard sawDigit else { return nil }
                switch c {
                case "s": total += number
                case "m": total += number * 60
                case "h": total += number * 3_600
                case "d": total += number * 86_400
                default: return nil
                }
                number = 0
                sawDigit = false
                sawUnit = true
            }
        }
        return sawUnit && !sawDigit ? total : nil
    }

    /// "4m", "1h 5m", "12s" for people.
    public static func describe(seconds: Int) -> String {
        if seconds < 60 { return "\(seconds)s" }
        if seconds < 3_600 { return seconds % 60 == 0 ? "\(seconds / 60)m" : "\(seconds / 60)m \(seconds % 60)s" }
        if seconds < 86_400 { return seconds % 3_600 / 60 == 0 ? "\(seconds / 3_600)h" : "\(seconds / 3_600)h \(seconds % 3_600 / 60)m" }
        return "\(seconds / 86_400)d"
    }
}
