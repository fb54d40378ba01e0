import Foundation

/// Where the state database lives: `FOLIO_STATE_DIR` (relative to the working folder, unless absolute), else
/// the config's `state-dir`, else `$STATE_DIRECTORY` (set by systemd's `StateDirectory=`), else `/var/lib/folio`
/// for root, else `$XDG_STATE_HOME/folio` (default `~/.local/state/folio`).
public enum StateLocation {
    /// The state directory, chosen in the order above; `configured` is the config's `state-dir`.
    public static func directory(configured: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let override = environment["FOLIO_STATE_DIR"], !override.isEmpty {
            // A relative one is taken from the working folder now, so that messages and `folio status` show where.
            return override.hasPrefix("/") ? override : FileManager.default.currentDirectoryPath + "/" + override
        }
        if let configured { return configured }
        if let systemd = environment["STATE_DIRECTORY"], !systemd.isEmpty, !systemd.contains(":") { return systemd }
        if getuid() == 0 { return "/var/lib/folio" }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") { return xdg + "/folio" }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.local/state/folio"
    }
}
