import FolioCore

/// HTTP dates (RFC 9110 §5.6.7): `Sun, 06 Nov 1994 08:49:37 GMT`, plus the obsolete RFC 850 and asctime forms.
///
/// Parsed by hand: a 100,000-file listing has 100,000 of them, and a formatter per call would dominate.
enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since the epoch, or nil when the text is not an HTTP date.
    static func parse(_ text: String) -> Int64? {
        var text = text
        return text.withUTF8 { parse(utf8: $0) }
    }

    /// Works on the bytes: a String per token and `lowercased()` per month name were 2.5% of a 1,000-file
    /// WebDAV mirror's CPU (one date per listed entry and per downloaded file).
    private static func parse(utf8 bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        typealias Token = Slice<UnsafeBufferPointer<UInt8>>
        // Tokens without the weekday: "06 Nov 1994 08:49:37 GMT", "06-Nov-94 08:49:37 GMT", "Nov  6 08:49:37 1994".
        var tokens: [Token] = []
        tokens.reserveCapacity(8)
        var start = 0
        for index in 0...bytes.count where index == bytes.count || bytes[index] == 0x20 || bytes[index] == 0x2C || bytes[index] == 0x2D {
            if index > start { tokens.append(bytes[start..<index]) }
            start = index + 1
        }
        func number(_ token: Token) -> Int? {
            guard !token.isEmpty, token.count <= 9, token.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return token.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        }
        func month(_ token: Token) -> Int? {
            guard token.count == 3 else { return nil }
            let lowered = token.map { $0 | 0x20 }
            return months.firstIndex { $0.utf8.elementsEqual(lowered) }.map { $0 + 1 }
        }
        guard tokens.count >= 5 else { return nil }
        var day: Int?, monthNumber: Int?, year: Int?, clock: Token?
        if let m = month(tokens[1]) {  // asctime: Sun Nov  6 08:49:37 1994
            monthNumber = m
            day = number(tokens[2])
            clock = tokens[3]
            year = number(tokens[4])
        } else if tokens.count >= 6, let m = month(tokens[2]) {
            day = number(tokens[1])
            monthNumber = m
            year = number(tokens[3]).map { $0 < 100 ? ($0 < 70 ? 2000 + $0 : 1900 + $0) : $0 }
            clock = tokens[4]
        }
        guard let day, let monthNumber, let year, let clock, (1...31).contains(day) else { return nil }
        let parts = clock.split(separator: 0x3A, omittingEmptySubsequences: false).compactMap(number)
        guard parts.count == 3, (0...23).contains(parts[0]), (0...59).contains(parts[1]), (0...60).contains(parts[2]) else { return nil }
        return daysFromCivil(year: year, month: monthNumber, day: day) * 86_400 + Int64(parts[0] * 3600 + parts[1] * 60 + parts[2])
    }

    /// The IMF-fixdate form, for `If-Range`.
    static func format(_ seconds: Int64) -> String {
        let days = seconds.floorDiv(86_400)
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][Int((days % 7 + 7) % 7)]
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        let monthName = months[month - 1].capitalized
        return "\(weekday), \(two(Int64(day))) \(monthName) \(year) \(two(secondOfDay / 3600)):\(two(secondOfDay % 3600 / 60)):\(two(secondOfDay % 60)) GMT"
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let monthIndex = Int64(month > 2 ? month - 3 : month + 9)
        let dayOfYear = (153 * monthIndex + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func civil(fromDays days: Int64) -> (Int64, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * mp + 2) / 5 + 1)
        let month = Int(mp < 10 ? mp + 3 : mp - 9)
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension Int64 {
    fileprivate func floorDiv(_ divisor: Int64) -> Int64 {
        let q = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? q - 1 : q
    }
}
