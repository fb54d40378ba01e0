import Foundation
import Synchronization

/// Reads a secret (password, passphrase, token) from a file, never from configuration text.
///
/// An absolute path is read as is; a bare name is looked up in `$CREDENTIALS_DIRECTORY`, where systemd's
/// `LoadCredential=` puts secrets. Trailing newlines are dropped. The secret is never part of an error message.
public enum SecretFile {
    /// The secret in `path` (see `resolvedPath`), trailing CR and LF bytes dropped. `what` names the setting in errors
    /// (e.g. `password-file`). Throws `.authentication` when the file cannot be found or read, or holds nothing.
    public static func read(_ path: String, what: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> String {
        guard let resolved = resolvedPath(path, environment: environment) else {
            throw SourceError(.authentication, "\(what) \"\(path)\" is not an absolute path and $CREDENTIALS_DIRECTORY is not set; give the file's absolute path")
        }
        if let kept = fromPipes.withLock({ $0[resolved] }) { return kept }
        // With read(2), not Foundation: a secret handed over in a pipe (`--password-file <(pass show nas)`) reads too.
        var bytes: [UInt8]
        switch FileContents.read(resolved) {
        case .success(let read): bytes = read
        case .failure(let failure):
            throw SourceError(.authentication, "cannot read \(what) \(resolved) (\(failure.reason)); check that it exists and is readable by this user")
        }
        // Why on the bytes: in a String "\r\n" is one Character, which neither hasSuffix("\n") nor hasSuffix("\r")
        // matches, so a file saved with Windows line endings kept them as part of the secret.
        while let last = bytes.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: "\r") { bytes.removeLast() }
        // Why refused: an empty file is a set-up step not done yet, and sent as is it is an empty password or
        // token, which a server may even take (an account without a password).
        guard !bytes.isEmpty else {
            throw SourceError(.authentication, "\(what) \(resolved) is empty; write the secret in it")
        }
        let secret = String(decoding: bytes, as: UTF8.self)
        var info = stat()
        if stat(resolved, &info) == 0, (info.st_mode & S_IFMT) != S_IFREG { fromPipes.withLock { $0[resolved] = secret } }
        return secret
    }

    /// Secrets read from a pipe or a device, by path: such a file gives its bytes once, and an SFTP run reads its
    /// secret at each log-in (one per connection). A regular file is read each time, so a changed one is seen.
    private static let fromPipes = Mutex<[String: String]>([:])

    /// A warning when the file `path` names (see `resolvedPath`) is a regular file other users can read, naming
    /// `setting` and the fix; nil otherwise (a pipe, a file of mode 600 or 400, a file not there).
    public static func exposure(of path: String, setting: String) -> String? {
        guard let resolved = resolvedPath(path), let mode = mode(of: resolved), mode & S_IFMT == S_IFREG, mode & 0o077 != 0 else { return nil }
        return "\(setting) \(resolved) can be read by other users (mode \(String(mode & 0o777, radix: 8))), and it holds a secret; chmod 600 \(resolved)"
    }

    /// The type and permission bits of the file at `path` (links followed); nil when it cannot be looked at.
    public static func mode(of path: String) -> mode_t? {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode : nil
    }

    /// Where `read` looks for `path`: the path itself when absolute, else in `$CREDENTIALS_DIRECTORY`; nil when it
    /// is relative and that is not set.
    public static func resolvedPath(_ path: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        if path.hasPrefix("/") { return path }
        guard let directory = environment["CREDENTIALS_DIRECTORY"], !directory.isEmpty else { return nil }
        return directory + "/" + path
    }
}
