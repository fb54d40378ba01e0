import FolioCore
import Foundation

/// Refuses arguments and path variables that are not UTF-8, before they are parsed.
///
/// Why: Swift decodes the command line and the environment into `String`s, replacing each byte that is not
/// UTF-8 with U+FFFD, so `folio mirror src $'d\xffx'` mirrored into a new folder `d�x` beside the one named,
/// and a source or configuration so named was "missing". Folio's paths are strings, so such a path is refused
/// with a way round it (names inside a tree are kept byte for byte; see `RelativePath`).
enum ArgumentEncoding {
    /// The environment variables Folio reads paths from.
    static let pathVariables = ["FOLIO_CONFIG", "FOLIO_STATE_DIR", "XDG_STATE_HOME", "HOME", "CREDENTIALS_DIRECTORY"]

    /// The line refusing the first argument or path variable that is not UTF-8, or nil when all are.
    static func refusal() -> String? {
        for index in 1..<Int(CommandLine.argc) {
            guard let argument = CommandLine.unsafeArgv[index], String(validatingCString: argument) == nil else { continue }
            return "the argument \"\(shown(argument))\" is not UTF-8 text; \(workaround)"
        }
        for name in pathVariables {
            guard let value = getenv(name), String(validatingCString: value) == nil else { continue }
            return "\(name)=\"\(shown(value))\" is not UTF-8 text; \(workaround)"
        }
        return nil
    }

    private static let workaround = "Folio takes paths as UTF-8: rename the folder or file, or reach it through a symbolic link whose name is UTF-8"

    private static func shown(_ text: UnsafePointer<CChar>) -> String {
        RelativePath.display(UnsafeRawBufferPointer(start: text, count: strlen(text)))
    }
}
