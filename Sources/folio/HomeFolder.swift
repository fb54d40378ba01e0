import Glibc

/// The home folder of the user running Folio, from the password database (as ssh finds `~/.ssh`), for a `~/` that
/// the shell left unexpanded in a flag's value (`--known-hosts=~/.ssh/known_hosts`).
enum HomeFolder {
    static var path: String {
        guard let entry = getpwuid(geteuid()) else { return "/" }
        return String(cString: entry.pointee.pw_dir)
    }
}
