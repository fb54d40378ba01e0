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

    static func quote(_ text: String) -> String {
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
