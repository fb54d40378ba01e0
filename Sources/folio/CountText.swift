/// A count with its noun in the singular or the plural, for the lines people read.
enum CountText {
    /// "1 folder", "3 folders".
    static func of(_ number: Int, _ noun: String) -> String {
        "\(number) \(noun)\(number == 1 ? "" : "s")"
    }

    /// "1 entry", "3 entries": for a noun whose plural is not its singular with an s.
    static func of(_ number: Int, _ noun: String, plural: String) -> String {
        "\(number) \(number == 1 ? noun : plural)"
    }
}
