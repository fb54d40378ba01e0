import FolioCore
import Foundation

/// One NDJSON line from a flat object: keys sorted with `event` first, so lines read well and diff well.
enum JSONLine {
    static func encode(_ object: [String: any Sendable]) -> String {
        let keys = object.keys.sorted { ($0 == "event" ? "" : $0) < ($1 == "event" ? "" : $1) }
        return "{" + keys.map { "\(quote($0)):\(value(object[$0]!))" }.joined(separator: ",") + "}\n"
    }

    private static func value(_ value: any Sendable) -> String {
        switch value {
        case let text as String: return quote(text)
        case let flag as Bool: return flag ? "true" : "false"
        case let number as Int: return String(number)
        case let number as Int64: return String(number)
        case let number as Double: return number.isFinite ? String(number) : "null"
        case let list as [String]: return "[" + list.map(quote).joined(separator: ",") + "]"
        case let optional as String?: return optional.map(quote) ?? "null"
        default: return quote("\(value)")
        }
    }

    /// The `file-done` line, byte for byte what `encode` makes of the same object, built without the dictionary:
    /// it is one line per file. Over 100,000 files the generic path (dictionary of existentials, casts, sorted
    /// keys) and a `FileHandle` write per line cost 1.3 s of CPU; this and a plain write(2), 0.1 s.
    static func fileDone(target: String, path: String, bytes: Int64) -> String {
        "{\"event\":\"file-done\",\"bytes\":\(bytes),\"path\":\(quote(path)),\"target\":\(quote(target))}\n"
    }

    /// A duration as every JSON line gives it: seconds, rounded to the millisecond (docs/json-events.md).
    static func seconds(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

    static func quote(_ text: String) -> String {
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            return "\"" + text + "\""
        }
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                out += "\\u" + String(scalar.value, radix: 16).leftPadded(to: 4)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
