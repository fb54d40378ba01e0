import CFolioSys

/// The command line, as the process started with it.
///
/// Why not `CommandLine` alone: on Linux, Swift reads it from /proc/self/cmdline, so in a chroot or container
/// without /proc it is empty, and every command line (even `folio --version`) crashed on reading it. The C
/// library hands the same argv to the program's initialisers, where `folio_saved_argv` keeps it.
enum ProcessArguments {
    /// How many there are, the program's name included.
    static var count: Int {
        CommandLine.argc > 0 ? Int(CommandLine.argc) : Int(folio_saved_argc())
    }

    /// The argument at `index` (0 is the program's name), as the C string the process got.
    static func cString(at index: Int) -> UnsafeMutablePointer<CChar>? {
        CommandLine.argc > 0 ? CommandLine.unsafeArgv[index] : folio_saved_argv()?[index]
    }

    /// The arguments after the program's name, as strings (bytes that are not UTF-8 are refused before this is
    /// read: `ArgumentEncoding`).
    static var afterProgramName: [String] {
        CommandLine.argc > 0 ? Array(CommandLine.arguments.dropFirst())
            : (1..<max(1, count)).compactMap { cString(at: $0).map { String(cString: $0) } }
    }
}
