import FolioCore
import Foundation

/// Logs a session in as the endpoint's user: the `identity` key file, else the default key files and ssh-agent,
/// and `password-file` if the server takes passwords (or asks for one at a keyboard-interactive prompt), before
/// the agent's keys when one is set. Secrets are read from files just before use and never appear in a message.
struct SSHAuthenticator {
    let session: OpaquePointer
    let endpoint: SFTPEndpoint

    func authenticate() throws(SourceError) {
        let user = endpoint.user
        var tried: [String] = []
        var rsaKey: String?
        // Why the keys go first, before asking which methods the server offers: asking is a log-in attempt of its
        // own ("none"), a round trip, and nearly every SFTP server takes keys.
        for keyPath in keyFiles() {
            guard FileManager.default.isReadableFile(atPath: keyPath) else {
                throw SourceError(.authentication, "identity \(keyPath) for \(endpoint.hostURL) does not exist or is not readable by this user; check the identity setting")
            }
            tried.append("key \(keyPath)")
            if Self.isRSAKey(keyPath) { rsaKey = keyPath }
            let passphrase = try endpoint.passphraseFile.map { path throws(SourceError) in try readSecret(path, what: "passphrase-file") }
            do {
                try LibSSH2.authenticateWithKeyFile(session, user: user, keyPath: keyPath, passphrase: passphrase)
                return
            } catch where error.code == -16 || error.code == -48 {
                // Why only a configured identity ends the log-in here: a default key with a passphrase (and no
                // passphrase-file) is common, and ssh-agent, the other default key or the password may still work.
                let encrypted = Self.isEncryptedKey(keyPath)
                if endpoint.identity == nil {
                    tried[tried.count - 1] += encrypted && passphrase == nil ? " (needs a passphrase-file)" : encrypted ? " (the passphrase-file does not open it)" : " (libssh2 cannot read it)"
                    continue
                }
                let why = switch (encrypted, endpoint.passphraseFile) {
                case (true, nil): "it is protected by a passphrase; put the passphrase in a file only this user can read and give it as passphrase-file (--passphrase-file)"
                case (true, let file?): "the passphrase in \(file) does not open it; check that the file holds that key's passphrase alone"
                case (false, _): "not a private key libssh2 can read (OpenSSH, PEM or PKCS#8; a .pub file is only the public half)"
                }
                throw SourceError(.authentication, "cannot use identity \(keyPath) for \(endpoint.hostURL): \(why)", underlying: error.description)
            } catch where error.isConnectionLoss {
                throw SourceError(.unreachable, Self.lostConnection(endpoint), underlying: error.description)
            } catch {
                continue
            }
        }
        let methods: [String]
        do {
            methods = try LibSSH2.authenticationMethods(session, user: user)
        } catch {
            throw SourceError(.unreachable, Self.lostConnection(endpoint), underlying: error.description)
        }
        if LibSSH2.isAuthenticated(session) { return }
        // Why after the password when a password-file is set: each key the agent offers counts against the
        // server's MaxAuthTries (6 by default), and an agent holding more keys than that had the server hang up
        // before the password, the one way in the target gives, was sent.
        let agent = ProcessInfo.processInfo.environment["SSH_AUTH_SOCK"].flatMap { $0.isEmpty ? nil : $0 }
        let agentFirst = endpoint.passwordFile == nil
        if agentFirst, methods.contains("publickey"), endpoint.identity == nil, let agent {
            if try tryAgent(agent, user: user, tried: &tried) { return }
        }
        // A server that takes passwords through PAM may offer only keyboard-interactive (FreeBSD's and macOS's
        // sshd by default): its password prompt gets the password-file.
        let asksByPrompt = !methods.contains("password") && methods.contains("keyboard-interactive")
        if !methods.contains("password"), !asksByPrompt, let passwordFile = endpoint.passwordFile {
            // Why look at a file that cannot be used: when it is also missing or unreadable, that is a second thing
            // to fix, and the one line names both rather than only the first. (Looked at, not read: no secret is
            // loaded that no one will use.)
            let problem = switch SecretFile.resolvedPath(passwordFile) {
            case nil: ", and \(passwordFile) is not an absolute path"
            case let path? where access(path, R_OK) != 0: ", and \(path) cannot be read"
            default: ""
            }
            // "before a key": a server set to AuthenticationMethods publickey,password offers a password only once a
            // key was taken, so "takes no passwords" would be wrong of it.
            tried.append("password-file, which the server does not take, at least not before a key\(problem)")
        }
        var refusedPasswordFile: String?
        if methods.contains("password") || asksByPrompt, let passwordFile = endpoint.passwordFile {
            tried.append(asksByPrompt ? "password-file (at the keyboard-interactive prompt)" : "password-file")
            let password = try readSecret(passwordFile, what: "password-file")
            do {
                if asksByPrompt {
                    try LibSSH2.authenticateWithPasswordPrompts(session, user: user, password: password)
                } else {
                    try LibSSH2.authenticateWithPassword(session, user: user, password: password)
                }
                return
            } catch where error.isConnectionLoss {
                throw SourceError(.unreachable, Self.lostConnection(endpoint), underlying: error.description)
            } catch {
                // Refused: fall through to the one-line authentication error below.
                refusedPasswordFile = passwordFile
            }
        }
        if !agentFirst, methods.contains("publickey"), endpoint.identity == nil, let agent {
            if try tryAgent(agent, user: user, tried: &tried) { return }
        }
        // A key tried, and publickey no longer offered: the server took the key as a first step and wants a password
        // as well (AuthenticationMethods publickey,password); "add the public key" would send the user the wrong way.
        if tried.contains(where: { $0.hasPrefix("key ") }), !methods.contains("publickey"), methods.contains("password") || asksByPrompt,
           endpoint.passwordFile == nil {
            throw SourceError(.authentication, "\(endpoint.hostURL) accepted \(user)'s key and asks for a password as well (two steps, as AuthenticationMethods publickey,password sets); give the password as password-file (--password-file)",
                              underlying: "libssh2 -18 (LIBSSH2_ERROR_AUTHENTICATION_FAILED)")
        }
        let banner = LibSSH2.serverBanner(session) ?? ""
        if let rsaKey, Self.refusesSHA1Signatures(banner: banner) {
            throw SourceError(.authentication, "\(endpoint.hostURL) refused \(user)'s RSA key \(rsaKey): libssh2 1.10 signs RSA keys with SHA-1 (ssh-rsa), which this server (\(Self.software(banner))) refuses unless its PubkeyAcceptedAlgorithms lets ssh-rsa in, as OpenSSH 8.8 and later do (where it does, the key is not in its authorized_keys); use an ed25519 or ECDSA key (ssh-keygen -t ed25519) and add its .pub to the server's authorized_keys")
        }
        let what = tried.isEmpty ? "no key or password was configured" : "tried \(tried.joined(separator: ", "))"
        // An RSA key refused by a server that may still take SHA-1: most likely not in authorized_keys, but the
        // server may refuse ssh-rsa all the same (PubkeyAcceptedAlgorithms); the line names both.
        let rsaNote = rsaKey == nil ? "" : "; if the RSA key is there, the server may refuse its SHA-1 signatures (the only ones libssh2 1.10 makes): use an ed25519 key"
        // A password-file the server does not take: "set password-file" would send the user back to what is set.
        let keysOnly = endpoint.passwordFile != nil && !methods.contains("password") && !asksByPrompt
        let fix = refusedPasswordFile.map { "check the password in \($0), or add the public key to ~\(user)/.ssh/authorized_keys on the server" }
            ?? (keysOnly ? "log in with a key: set identity (folio mirror: --identity) to one whose .pub is in ~\(user)/.ssh/authorized_keys on the server"
                : "add the public key to ~\(user)/.ssh/authorized_keys on the server or set identity / password-file")
        throw SourceError(.authentication, "\(endpoint.hostURL) refused to log in \(user) (\(what); server offers \(methods.joined(separator: ","))); \(fix)\(rsaNote)",
                          underlying: "libssh2 -18 (LIBSSH2_ERROR_AUTHENTICATION_FAILED)")
    }

    /// Tries the keys ssh-agent at `socket` holds; true when one was accepted (the session is then logged in),
    /// else notes what was tried. Throws when the server hung up on the agent's keys.
    private func tryAgent(_ socket: String, user: String, tried: inout [String]) throws(SourceError) -> Bool {
        let hungUp = { (underlying: String) in
            SourceError(.authentication, "\(endpoint.hostURL) closed the connection while ssh-agent's keys were tried for \(user): it refused more of them than it allows (sshd's MaxAuthTries, 6 by default); set identity to the key it takes, or remove keys from the agent (ssh-add -d)",
                        underlying: underlying)
        }
        let accepted: Bool
        do {
            accepted = try LibSSH2.authenticateWithAgent(session, user: user)
        } catch where error.isConnectionLoss {
            throw hungUp(error.description)
        } catch {
            tried.append("ssh-agent (cannot use the agent at \(socket): \(error.message.isEmpty ? LibSSH2Error.name(of: error.code) : error.message))")
            return false
        }
        if accepted { return true }
        tried.append("ssh-agent")
        // Why ask: libssh2 reports the keys after the server hung up as unverified, not as a lost connection, and
        // only a request shows which it was (a round trip, paid only when the agent's keys all failed).
        do { _ = try LibSSH2.authenticationMethods(session, user: user) } catch { throw hungUp(error.description) }
        return false
    }

    private static func lostConnection(_ endpoint: SFTPEndpoint) -> String {
        "lost the connection to \(endpoint.hostURL) while logging in; check the network and the server, then run again"
    }

    /// The configured identity, or ssh's default ed25519 and ECDSA key files that exist.
    private func keyFiles() -> [String] {
        if let identity = endpoint.identity { return [identity] }
        return ["id_ed25519", "id_ecdsa"].map { "\(endpoint.defaultKeyFolder)/\($0)" }.filter { FileManager.default.isReadableFile(atPath: $0) }
    }

    private func readSecret(_ path: String, what: String) throws(SourceError) -> String {
        do { return try SecretFile.read(path, what: what) } catch let error as SourceError { throw error } catch {
            throw SourceError(.authentication, "cannot read \(what) \(path)")
        }
    }

    /// Whether the server's identification line names OpenSSH 8.8 or later, which refuses `ssh-rsa` (SHA-1)
    /// signatures unless its configuration allows them again. Other servers (older OpenSSH, Dropbear, a NAS's
    /// own) may take them, so a refused RSA key there is not blamed on SHA-1.
    static func refusesSHA1Signatures(banner: String) -> Bool {
        guard let range = banner.range(of: "-OpenSSH_") else { return false }
        var rest = banner[range.upperBound...]
        if rest.hasPrefix("for_Windows_") { rest = rest.dropFirst("for_Windows_".count) }
        let version = rest.prefix { $0.isNumber || $0 == "." }.split(separator: ".").compactMap { Int($0) }
        guard let major = version.first else { return false }
        return major > 8 || (major == 8 && version.dropFirst().first.map { $0 >= 8 } == true)
    }

    /// The software part of an identification line: `OpenSSH_9.2p1` of `SSH-2.0-OpenSSH_9.2p1 Debian-2`.
    static func software(_ banner: String) -> String {
        String(banner.split(separator: "-", maxSplits: 2).dropFirst(2).first?.split(separator: " ").first ?? "")
    }

    /// Whether a private key file holds an RSA key (PEM `RSA PRIVATE KEY` or an OpenSSH key of type `ssh-rsa`).
    static func isRSAKey(_ path: String) -> Bool {
        guard let text = keyText(path) else { return false }
        if text.contains("BEGIN RSA PRIVATE KEY") { return true }
        guard let decoded = openSSHKeyBytes(text) else { return false }
        let rsaName: [UInt8] = [0, 0, 0, 7] + Array("ssh-rsa".utf8)
        return decoded.prefix(200).firstRange(of: rsaName) != nil
    }

    /// Whether the private key file is protected by a passphrase: a PEM key with `Proc-Type: 4,ENCRYPTED`, an
    /// encrypted PKCS#8 key, or an OpenSSH key whose cipher is not `none`.
    static func isEncryptedKey(_ path: String) -> Bool {
        guard let text = keyText(path) else { return false }
        if text.contains("Proc-Type: 4,ENCRYPTED") || text.contains("BEGIN ENCRYPTED PRIVATE KEY") { return true }
        // "openssh-key-v1\0", then the cipher's name as an SSH string.
        let magic = Array("openssh-key-v1".utf8) + [0]
        guard let decoded = openSSHKeyBytes(text), decoded.starts(with: magic) else { return false }
        let none: [UInt8] = [0, 0, 0, 4] + Array("none".utf8)
        return !decoded.dropFirst(magic.count).starts(with: none)
    }

    private static func keyText(_ path: String) -> String? {
        FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The decoded body of an `OPENSSH PRIVATE KEY` file.
    private static func openSSHKeyBytes(_ text: String) -> [UInt8]? {
        guard text.contains("BEGIN OPENSSH PRIVATE KEY") else { return nil }
        let body = text.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        return Data(base64Encoded: body).map { [UInt8]($0) }
    }
}
