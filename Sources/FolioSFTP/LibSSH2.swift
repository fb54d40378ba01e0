import CLibSSH2
import FolioCore
import Glibc

/// Every libssh2 call Folio makes goes through here; each one turns a return code and
/// `libssh2_session_last_error` into a `LibSSH2Error`.
///
/// The handles are plain `OpaquePointer`s; their owner (`SSHSession`, and the channels and files it opens)
/// guarantees that one handle is only ever used from one thread at a time (a `SessionWorker`'s serial queue or
/// a download worker's thread), as libssh2 requires.
enum LibSSH2 {
    /// Why a static let: Swift runs it exactly once, thread-safely, at the first `initialize` (the run's preload,
    /// or the first source created), which is before any worker opens a session (libssh2_init is not
    /// thread-safe, and no libssh2 function may run before the library is loaded).
    private static let initResult: Result<Void, SourceError> = {
        if let problem = folio_ssh2_load() {
            return .failure(SourceError(.localIO, "cannot load libssh2, which SFTP needs (\(String(cString: problem))); install the libssh2-1 package"))
        }
        let code = libssh2_init(0)
        guard code == 0 else {
            return .failure(SourceError(.localIO, "cannot initialise libssh2", underlying: LibSSH2Error(code: code, message: "libssh2_init failed").description))
        }
        return .success(())
    }()

    /// Loads and initialises libssh2 on first use; every session and source calls it before any other libssh2 call.
    static func initialize() throws(SourceError) {
        try initResult.get()
    }

    static func lastError(_ session: OpaquePointer, sftp: OpaquePointer? = nil) -> LibSSH2Error {
        var text: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        let code = libssh2_session_last_error(session, &text, &length, 0)
        let message = text.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: Int(length)), as: UTF8.self) } ?? ""
        var status: UInt?
        if code == LIBSSH2_ERROR_SFTP_PROTOCOL, let sftp { status = libssh2_sftp_last_error(sftp) }
        return LibSSH2Error(code: code == 0 ? LIBSSH2_ERROR_SOCKET_NONE : code, message: message, sftpStatus: status)
    }

    private static func check(_ result: Int32, _ session: OpaquePointer, sftp: OpaquePointer? = nil) throws(LibSSH2Error) {
        guard result < 0 else { return }
        var error = lastError(session, sftp: sftp)
        // Why: some failures (a connection cut during the key exchange) return a code without setting libssh2's
        // last error, which then reads 0; the returned code is the one that says what happened.
        if error.code == LIBSSH2_ERROR_SOCKET_NONE && error.message.isEmpty { error.code = result }
        throw error
    }

    // MARK: Session

    static func makeSession(timeoutMilliseconds: Int) throws(LibSSH2Error) -> OpaquePointer {
        guard let session = folio_ssh2_session_init(nil) else { throw LibSSH2Error(code: LIBSSH2_ERROR_ALLOC, message: "libssh2_session_init failed") }
        libssh2_session_set_blocking(session, 1)
        folio_ssh2_acknowledge_at_once(session)
        // Why: blocking libssh2 calls otherwise wait forever on a silent server. Why no libssh2 keepalive
        // (`libssh2_keepalive_config`) on any session: libssh2 1.10 then waits on the socket only until the next
        // keepalive is due and fails the call with LIBSSH2_ERROR_TIMEOUT if nothing came by then, so a server
        // busy for a few seconds (disks spinning up) would fail a call long before this timeout. Folio keeps no
        // session idle long enough for a NAT to drop it (see `IdleSessions.maximumIdle`), so it sends none.
        libssh2_session_set_timeout(session, timeoutMilliseconds)
        return session
    }

    /// Key exchange.
    static func handshake(_ session: OpaquePointer, socket: Int32) throws(LibSSH2Error) {
        try check(libssh2_session_handshake(session, socket), session)
    }

    /// The algorithms this libssh2 can negotiate in `category`, in its order of preference.
    static func supportedAlgorithms(_ category: ServerAlgorithms.Category) -> [String] {
        let method = switch category {
        case .keyExchange: LIBSSH2_METHOD_KEX
        case .hostKey: LIBSSH2_METHOD_HOSTKEY
        case .cipher: LIBSSH2_METHOD_CRYPT_CS
        case .mac: LIBSSH2_METHOD_MAC_CS
        }
        // Why a session of its own: libssh2 allocates the list with a session's allocator, and the handshake's
        // session is already freed when this is asked.
        guard let session = folio_ssh2_session_init(nil) else { return [] }
        defer { libssh2_session_free(session) }
        var names: UnsafeMutablePointer<UnsafePointer<CChar>?>?
        let count = libssh2_session_supported_algs(session, method, &names)
        guard count > 0, let names else { return [] }
        defer { libssh2_free(session, names) }
        return (0 ..< Int(count)).compactMap { names[$0].map { String(cString: $0) } }
    }

    /// The loaded libssh2's version ("1.10.0").
    static var version: String { libssh2_version(0).map { String(cString: $0) } ?? "(unknown version)" }

    /// Has libssh2 send one keepalive (a global request sshd answers) at its next wait on the socket, which is
    /// in the first channel's opening (see `readingFirstAnswer` for when), and none after. Why: sshd keeps
    /// Nagle's algorithm on for a session like Folio's, so of two small replies written apart, the second waits
    /// for the first's acknowledgement. Across a TCP proxy (docker-proxy in front of an SFTP container, a
    /// bastion, the benchmark's delay proxy) the proxy acknowledges late (Linux's 40 ms delayed ACK) unless it
    /// has data for sshd: the keepalive is that data. Measured at 20 ms RTT through the benchmark's proxy: a
    /// no-change run 199 ms with it, 236 ms without (2026-11-25); 215 ms once sent as `readingFirstAnswer` has it.
    ///
    /// Why this interval: libssh2 1.10 ends any wait on the socket when the next keepalive is due, as a timeout,
    /// so keepalives due within a run would fail calls long before `timeout`. 2,000,000 s (23 days) is never due
    /// again in a session's life, and in milliseconds still fits the `int` libssh2 computes the wait in. Only
    /// after log-in: sshd takes a global request before it as a protocol error.
    static func keepaliveOnceAfterLogin(_ session: OpaquePointer) {
        libssh2_keepalive_config(session, 1, 2_000_000)
    }

    /// The server's host key (raw SSH wire format) and its `LIBSSH2_HOSTKEY_TYPE_*`.
    static func hostKey(_ session: OpaquePointer) throws(LibSSH2Error) -> (key: [UInt8], type: Int32) {
        var length = 0
        var type: Int32 = 0
        guard let key = libssh2_session_hostkey(session, &length, &type) else { throw lastError(session) }
        return (Array(UnsafeRawBufferPointer(start: key, count: length)), type)
    }

    static func hostKeySHA256(_ session: OpaquePointer) throws(LibSSH2Error) -> [UInt8] {
        guard let hash = libssh2_hostkey_hash(session, LIBSSH2_HOSTKEY_HASH_SHA256) else { throw lastError(session) }
        return Array(UnsafeRawBufferPointer(start: hash, count: 32))
    }

    enum KnownHostResult { case match, mismatch, notFound }

    /// The host key algorithms Folio lets libssh2 1.10 negotiate (all it has but the `-cert-v01` ones: Folio checks
    /// plain keys against known_hosts, not certificates), each with its known_hosts key type, in the order Folio
    /// prefers them for a host known_hosts lists no key of: ed25519 first, the key `ssh` records first and the one
    /// people are told to compare (`ssh_host_ed25519_key.pub`); ssh-dss last, kept so no server that connected
    /// before stops connecting. libssh2's own order puts ECDSA (and its certificates) before ed25519.
    private static let hostKeyAlgorithms: [(name: String, knownHostType: Int32)] = [
        ("ssh-ed25519", LIBSSH2_KNOWNHOST_KEY_ED25519),
        ("ecdsa-sha2-nistp256", LIBSSH2_KNOWNHOST_KEY_ECDSA_256),
        ("ecdsa-sha2-nistp384", LIBSSH2_KNOWNHOST_KEY_ECDSA_384),
        ("ecdsa-sha2-nistp521", LIBSSH2_KNOWNHOST_KEY_ECDSA_521),
        // rsa-sha2-*: libssh2 1.11 (Debian 13, Ubuntu 24.04) signs RSA host keys with SHA-2 under these names, and
        // OpenSSH 8.8 and later offers no `ssh-rsa`; libssh2 1.10 drops the names it does not know from the list.
        ("rsa-sha2-512", LIBSSH2_KNOWNHOST_KEY_SSHRSA),
        ("rsa-sha2-256", LIBSSH2_KNOWNHOST_KEY_SSHRSA),
        ("ssh-rsa", LIBSSH2_KNOWNHOST_KEY_SSHRSA),
        ("ssh-dss", LIBSSH2_KNOWNHOST_KEY_SSHDSS),
    ]

    /// Sets the host key algorithms the handshake asks for: first those whose key type known_hosts lists under
    /// exactly one of `names` (hashed entries included), then the rest, each group in `hostKeyAlgorithms`' order. Why,
    /// as OpenSSH does: the server sends the key of the first type both sides have, and a host pinned with its
    /// ed25519 key (or, by older Folio versions, its ECDSA one) must be asked for that key, not another one it
    /// also has, which would count as unknown. Call before `handshake`.
    static func preferKnownHostKeyTypes(_ session: OpaquePointer, lines: [String], names: [String]) throws(LibSSH2Error) {
        let known = try withKnownHosts(session, lines: lines) { hosts throws(LibSSH2Error) in
            var known: [String] = []
            // Why a check with a dummy key: libssh2 has no call that lists a name's key types, and
            // libssh2_knownhost_get gives no name for a hashed entry. A check says MISMATCH when `name` is listed
            // with a key of the type asked (4 bytes match no real key), NOTFOUND when it is not.
            let dummy: [CChar] = [0, 0, 0, 1]
            for algorithm in hostKeyAlgorithms {
                for name in names {
                    let result = libssh2_knownhost_checkp(hosts, name, -1, dummy, dummy.count,
                                                          LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | algorithm.knownHostType, nil)
                    switch result {
                    case LIBSSH2_KNOWNHOST_CHECK_MATCH, LIBSSH2_KNOWNHOST_CHECK_MISMATCH: known.append(algorithm.name)
                    case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND: continue
                    default: throw lastError(session)
                    }
                    break
                }
            }
            return known
        }
        let order = known + hostKeyAlgorithms.map(\.name).filter { !known.contains($0) }
        try check(libssh2_session_method_pref(session, LIBSSH2_METHOD_HOSTKEY, order.joined(separator: ",")), session)
    }

    /// Checks a host key against known_hosts lines (hashed entries included) listed under exactly one of `names`,
    /// the known_hosts names of the host and port (`HostKeyTrust.knownHostsNames`), the first name listed deciding.
    static func checkKnownHosts(_ session: OpaquePointer, lines: [String], names: [String], key: [UInt8], keyType: Int32) throws(LibSSH2Error) -> KnownHostResult {
        let typeBit: Int32 = switch keyType {
        case LIBSSH2_HOSTKEY_TYPE_RSA: LIBSSH2_KNOWNHOST_KEY_SSHRSA
        case LIBSSH2_HOSTKEY_TYPE_DSS: LIBSSH2_KNOWNHOST_KEY_SSHDSS
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_256: LIBSSH2_KNOWNHOST_KEY_ECDSA_256
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_384: LIBSSH2_KNOWNHOST_KEY_ECDSA_384
        case LIBSSH2_HOSTKEY_TYPE_ECDSA_521: LIBSSH2_KNOWNHOST_KEY_ECDSA_521
        case LIBSSH2_HOSTKEY_TYPE_ED25519: LIBSSH2_KNOWNHOST_KEY_ED25519
        default: LIBSSH2_KNOWNHOST_KEY_UNKNOWN
        }
        let result = try withKnownHosts(session, lines: lines) { hosts throws(LibSSH2Error) in
            // Why port -1 with the name already bracketed: given a port, libssh2 checks `[host]:port` and then
            // plain `host` too, so a server on port 2222 would be held to (or pass with) the key of the host's port 22.
            var result = LIBSSH2_KNOWNHOST_CHECK_NOTFOUND
            for name in names where result == LIBSSH2_KNOWNHOST_CHECK_NOTFOUND {
                result = key.withUnsafeBufferPointer { keyBytes in
                    keyBytes.withMemoryRebound(to: CChar.self) {
                        libssh2_knownhost_checkp(hosts, name, -1, $0.baseAddress, $0.count,
                                                 LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_RAW | typeBit, nil)
                    }
                }
            }
            return result
        }
        switch result {
        case LIBSSH2_KNOWNHOST_CHECK_MATCH: return .match
        case LIBSSH2_KNOWNHOST_CHECK_MISMATCH: return .mismatch
        case LIBSSH2_KNOWNHOST_CHECK_NOTFOUND: return .notFound
        default: throw lastError(session)
        }
    }

    /// Runs `body` with libssh2's collection of the known_hosts `lines`. Lines libssh2 cannot parse (certificate
    /// authorities, security-key types) are ignored one by one, as OpenSSH does.
    private static func withKnownHosts<R>(_ session: OpaquePointer, lines: [String], _ body: (OpaquePointer) throws(LibSSH2Error) -> R) throws(LibSSH2Error) -> R {
        guard let hosts = libssh2_knownhost_init(session) else { throw lastError(session) }
        defer { libssh2_knownhost_free(hosts) }
        for line in lines {
            var bytes = Array(line.utf8)
            bytes.append(UInt8(ascii: "\n"))
            _ = bytes.withUnsafeBufferPointer {
                $0.withMemoryRebound(to: CChar.self) { libssh2_knownhost_readline(hosts, $0.baseAddress, $0.count, LIBSSH2_KNOWNHOST_FILE_OPENSSH) }
            }
        }
        return try body(hosts)
    }

    /// The authentication methods the server offers to `user` (none once already authenticated). Throws when the
    /// connection is gone: libssh2 reports a connection lost while it waited for a log-in's answer as a refusal,
    /// and only this request shows which it was.
    static func authenticationMethods(_ session: OpaquePointer, user: String) throws(LibSSH2Error) -> [String] {
        guard let list = libssh2_userauth_list(session, user, UInt32(user.utf8.count)) else {
            let error = lastError(session)
            if error.isConnectionLoss { throw error }
            return []
        }
        return String(cString: list).split(separator: ",").map(String.init)
    }

    /// The identification line the server sent (`SSH-2.0-OpenSSH_9.2p1 Debian-2`), if any.
    static func serverBanner(_ session: OpaquePointer) -> String? {
        libssh2_session_banner_get(session).map { String(cString: $0) }
    }

    static func authenticateWithKeyFile(_ session: OpaquePointer, user: String, keyPath: String, passphrase: String?) throws(LibSSH2Error) {
        try check(folio_ssh2_userauth_publickey_fromfile(session, user, UInt32(user.utf8.count), keyPath, passphrase), session)
    }

    static func authenticateWithPassword(_ session: OpaquePointer, user: String, password: String) throws(LibSSH2Error) {
        try check(folio_ssh2_userauth_password(session, user, UInt32(user.utf8.count), password, UInt32(password.utf8.count)), session)
    }

    /// Logs in by keyboard-interactive, answering the server's password prompt (see
    /// `folio_ssh2_userauth_password_prompts`).
    static func authenticateWithPasswordPrompts(_ session: OpaquePointer, user: String, password: String) throws(LibSSH2Error) {
        try check(folio_ssh2_userauth_password_prompts(session, user, UInt32(user.utf8.count), password, UInt32(password.utf8.count)), session)
    }

    /// Tries each identity ssh-agent holds; returns whether one was accepted.
    static func authenticateWithAgent(_ session: OpaquePointer, user: String) throws(LibSSH2Error) -> Bool {
        guard let agent = libssh2_agent_init(session) else { throw lastError(session) }
        defer { libssh2_agent_free(agent) }
        try check(libssh2_agent_connect(agent), session)
        defer { libssh2_agent_disconnect(agent) }
        try check(libssh2_agent_list_identities(agent), session)
        var previous: UnsafeMutablePointer<libssh2_agent_publickey>?
        while true {
            var identity: UnsafeMutablePointer<libssh2_agent_publickey>?
            let result = libssh2_agent_get_identity(agent, &identity, previous)
            if result == 1 { return false }
            try check(result, session)
            let answer = libssh2_agent_userauth(agent, user, identity)
            if answer == 0 { return true }
            // A server that has refused as many keys as it allows (MaxAuthTries) hangs up: no later key, nor the
            // password, can be tried on this connection.
            if answer < 0, LibSSH2Error(code: answer, message: "").isConnectionLoss { throw lastError(session) }
            previous = identity
        }
    }

    static func isAuthenticated(_ session: OpaquePointer) -> Bool { libssh2_userauth_authenticated(session) != 0 }

    /// Says goodbye and shuts the socket, so that from then on libssh2 neither sends nor waits: freeing a channel
    /// still open (a command left waiting for input) would otherwise wait a round trip for the server's close.
    /// Errors are moot at this point (the peer may be gone).
    static func hangUp(_ session: OpaquePointer, socket: Int32) {
        _ = folio_ssh2_session_disconnect(session, "done")
        _ = Glibc.shutdown(socket, Int32(SHUT_RDWR))
    }

    /// Frees the session and any channel still open on it; call `hangUp` first.
    static func free(_ session: OpaquePointer) { libssh2_session_free(session) }

    /// Hangs up, frees the session and closes its socket.
    static func end(_ session: OpaquePointer, socket: Int32) {
        hangUp(session, socket: socket)
        free(session)
        Glibc.close(socket)
    }

    // MARK: Exec

    /// Opens a session channel and starts `command` on it. stderr is discarded by libssh2, so a chatty command
    /// cannot stall the channel. `socket` is the session's.
    static func startExec(_ session: OpaquePointer, socket: Int32, command: String) throws(LibSSH2Error) -> OpaquePointer {
        try startChannel(session, socket: socket) { folio_ssh2_channel_exec($0, command, UInt32(command.utf8.count)) }
    }

    /// Opens a session channel and starts the subsystem `name` on it (`sftp`), stderr discarded as by `startExec`.
    static func startSubsystem(_ session: OpaquePointer, socket: Int32, name: String) throws(LibSSH2Error) -> OpaquePointer {
        try startChannel(session, socket: socket) { folio_ssh2_channel_subsystem($0, name, UInt32(name.utf8.count)) }
    }

    private static func startChannel(_ session: OpaquePointer, socket: Int32, _ start: (OpaquePointer) -> Int32) throws(LibSSH2Error) -> OpaquePointer {
        guard let channel = openSessionChannel(session, socket: socket) else { throw lastError(session) }
        do throws(LibSSH2Error) {
            try check(libssh2_channel_handle_extended_data2(channel, LIBSSH2_CHANNEL_EXTENDED_DATA_IGNORE), session)
            try check(start(channel), session)
        } catch {
            libssh2_channel_free(channel)
            throw error
        }
        return channel
    }

    /// How long the opening of a channel waits for the server's first bytes before libssh2's own wait takes over.
    private static let firstAnswerWaitMilliseconds: Int32 = 1_000

    /// Opens a session channel (see `readingFirstAnswer`). Nil with the session's error when it failed.
    private static func openSessionChannel(_ session: OpaquePointer, socket: Int32) -> OpaquePointer? {
        readingFirstAnswer(session, socket: socket) { folio_ssh2_channel_open_session(session) }
    }

    /// Runs `call`, a libssh2 call that opens a channel (nil while it is under way, or when it failed), so that
    /// its request goes out and the first bytes that come back are read before libssh2's own wait, which then
    /// waits for the rest: libssh2 goes on with the call under way.
    ///
    /// Why: libssh2 sends the session's one keepalive (`keepaliveOnceAfterLogin`) at its first wait on the socket.
    /// OpenSSH's sshd writes what it sends after a log-in (its host keys, the key's options as debug messages) as
    /// the session's process starts, often while the first channel's opening is on its way, and with Nagle's
    /// algorithm on holds its answer to the opening until those bytes are acknowledged. A TCP proxy on the way
    /// (docker-proxy, a bastion, the benchmark's delay proxy) acknowledges them only with data for sshd, or after
    /// its delayed-ACK timer (40 ms on Linux). Sent once those bytes are read, the keepalive is that data; sent
    /// with the opening, it came too early. Measured at 20 ms RTT through the benchmark's proxy, where the session's
    /// process starts 21 ms after the log-in: the opening took 61 ms (a round trip and the timer), now 41 (two
    /// round trips).
    private static func readingFirstAnswer(_ session: OpaquePointer, socket: Int32, _ call: () -> OpaquePointer?) -> OpaquePointer? {
        libssh2_session_set_blocking(session, 0)
        var result = call()
        // Only once the request is all out (see `sendIsUnfinished`); the second call reads what came.
        if result == nil, isWaiting(session), !sendIsUnfinished(session) {
            var ready = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            if poll(&ready, 1, firstAnswerWaitMilliseconds) > 0 { result = call() }
        }
        libssh2_session_set_blocking(session, 1)
        if result == nil, isWaiting(session) { result = call() }
        return result
    }

    /// Whether the session's last non-blocking call is under way, waiting on the socket.
    private static func isWaiting(_ session: OpaquePointer) -> Bool {
        libssh2_session_last_error(session, nil, nil, 0) == LIBSSH2_ERROR_EAGAIN
    }

    /// Writes all of `bytes` to the command's stdin.
    static func write(_ channel: OpaquePointer, _ session: OpaquePointer, _ bytes: [UInt8]) throws(LibSSH2Error) {
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBufferPointer {
                $0.withMemoryRebound(to: CChar.self) { folio_ssh2_channel_write(channel, $0.baseAddress! + written, $0.count - written) }
            }
            if count < 0 { throw lastError(session) }
            written += count
        }
    }

    static func sendEOF(_ channel: OpaquePointer, _ session: OpaquePointer) throws(LibSSH2Error) {
        try check(libssh2_channel_send_eof(channel), session)
    }

    /// Reads what the command wrote to stdout, blocking until some arrives; 0 at its end.
    static func read(_ channel: OpaquePointer, _ session: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer) throws(LibSSH2Error) -> Int {
        let count = folio_ssh2_channel_read(channel, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), buffer.count)
        if count < 0 { throw lastError(session) }
        return count
    }

    /// Closes the channel, waits for the server to close its side, and returns the command's exit status; nil
    /// when there is none to trust. Why nil rather than libssh2's status: libssh2 reports 0 for a command whose
    /// status never came (the connection dropped before the server closed the channel, which it does only after
    /// sending the status) and for one a signal killed, and a 0 vouches for everything the command wrote.
    static func close(channel: OpaquePointer) -> Int32? {
        guard libssh2_channel_close(channel) == 0, libssh2_channel_wait_closed(channel) == 0 else { return nil }
        var signalNameLength = 0
        _ = libssh2_channel_get_exit_signal(channel, nil, &signalNameLength, nil, nil, nil, nil)
        return signalNameLength == 0 ? libssh2_channel_get_exit_status(channel) : nil
    }

    static func free(channel: OpaquePointer) { libssh2_channel_free(channel) }

    // MARK: SFTP

    /// How long a blocking call may wait on a silent socket before it fails with LIBSSH2_ERROR_TIMEOUT.
    static func setTimeout(_ session: OpaquePointer, milliseconds: Int) {
        libssh2_session_set_timeout(session, milliseconds)
    }

    /// Starts libssh2's SFTP on a channel of its own (three round trips); the first answer is read as a channel's
    /// opening reads it (see `readingFirstAnswer`). `socket` is the session's.
    static func sftpInit(_ session: OpaquePointer, socket: Int32) throws(LibSSH2Error) -> OpaquePointer {
        guard let sftp = readingFirstAnswer(session, socket: socket, { libssh2_sftp_init(session) }) else { throw lastError(session) }
        return sftp
    }

    static func sftpShutdown(_ sftp: OpaquePointer) { _ = libssh2_sftp_shutdown(sftp) }

    private static func withPath<R>(_ path: [UInt8], _ body: (UnsafePointer<CChar>, UInt32) -> R) -> R {
        path.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { body($0.baseAddress!, UInt32($0.count)) }
        }
    }

    static func realpath(_ session: OpaquePointer, _ sftp: OpaquePointer, _ path: [UInt8]) throws(LibSSH2Error) -> [UInt8] {
        var target = [CChar](repeating: 0, count: 8192)
        let length = withPath(path) { pointer, count in
            target.withUnsafeMutableBufferPointer { folio_ssh2_sftp_realpath(sftp, pointer, count, $0.baseAddress, UInt32($0.count)) }
        }
        try check(length, session, sftp: sftp)
        // Why an empty answer is a failure: libssh2 1.10 takes a failed realpath's request id for its SFTP status,
        // so when the request was the channel's first (id 0, read as "OK") a failure comes back as an empty path.
        guard length > 0 else { throw LibSSH2Error(code: LIBSSH2_ERROR_SFTP_PROTOCOL, message: "the server resolved no path") }
        return target[0..<Int(length)].map { UInt8(bitPattern: $0) }
    }

    static func stat(_ session: OpaquePointer, _ sftp: OpaquePointer, _ path: [UInt8], followLinks: Bool) throws(LibSSH2Error) -> RemoteAttributes {
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        let result = withPath(path) { folio_ssh2_sftp_stat(sftp, $0, $1, followLinks ? 1 : 0, &attributes) }
        try check(result, session, sftp: sftp)
        return RemoteAttributes(attributes)
    }

    /// What `open` opens: a file for reading, or a folder for readdir.
    enum OpenKind { case file, folder }

    static func open(_ session: OpaquePointer, _ sftp: OpaquePointer, _ path: [UInt8], as kind: OpenKind) throws(LibSSH2Error) -> OpaquePointer {
        guard let handle = withPath(path, { request(sftp, kind, $0, $1) }) else { throw lastError(session, sftp: sftp) }
        return handle
    }

    private static func request(_ sftp: OpaquePointer, _ kind: OpenKind, _ path: UnsafePointer<CChar>, _ length: UInt32) -> OpaquePointer? {
        switch kind {
        case .file: folio_ssh2_sftp_open(sftp, path, length)
        case .folder: folio_ssh2_sftp_opendir(sftp, path, length)
        }
    }

    /// Opens `path` and closes `previous` (a file or a folder) in one round trip: both requests go out before
    /// either answer is awaited, then both answers are collected. Why the session is non-blocking while they are
    /// sent: libssh2's blocking calls send a request and wait for its answer; a non-blocking call sends it and
    /// returns `LIBSSH2_ERROR_EAGAIN`, and the same call made again, blocking, collects the answer. Nothing is left
    /// half done when this returns (a libssh2 SFTP call left waiting would keep its reply timer running into later
    /// calls). A close that fails is ignored, as by `close`.
    static func open(_ session: OpaquePointer, _ sftp: OpaquePointer, _ path: [UInt8], as kind: OpenKind, closing previous: OpaquePointer) throws(LibSSH2Error) -> OpaquePointer {
        libssh2_session_set_blocking(session, 0)
        var handle = withPath(path) { request(sftp, kind, $0, $1) }
        let opening = handle == nil && libssh2_session_last_error(session, nil, nil, 0) == LIBSSH2_ERROR_EAGAIN
        var failure = handle == nil && !opening ? lastError(session, sftp: sftp) : nil
        // The close only behind an open whose request is all out (see `readWithAttributes` for why, and why two).
        if opening && sendIsUnfinished(session) {
            libssh2_session_set_blocking(session, 1)
            handle = withPath(path) { request(sftp, kind, $0, $1) }
            if handle == nil { failure = lastError(session, sftp: sftp) }
            close(previous)
            guard let handle else { throw failure ?? lastError(session, sftp: sftp) }
            return handle
        }
        let closed = folio_ssh2_sftp_close(previous)
        libssh2_session_set_blocking(session, 1)
        if opening {
            // The same arguments: libssh2 goes on with the open under way (its state is the SFTP channel's, the
            // same for files and folders).
            handle = withPath(path) { request(sftp, kind, $0, $1) }
            if handle == nil { failure = lastError(session, sftp: sftp) }
        }
        // Only EAGAIN leaves the handle alive (the close sent, or waiting to be sent, its answer not in yet): the
        // blocking call then finishes it. Every other result has freed the handle already, a failure included
        // (a close that could not go out behind an open still being sent leaves the server's handle to the
        // session's end), so calling again would touch freed memory.
        if closed == LIBSSH2_ERROR_EAGAIN { _ = folio_ssh2_sftp_close(previous) }
        guard let handle else { throw failure ?? lastError(session, sftp: sftp) }
        return handle
    }

    /// The next name in a folder with its attributes (as lstat sees them), or nil at the end.
    static func readFolder(_ session: OpaquePointer, _ sftp: OpaquePointer, _ handle: OpaquePointer, buffer: inout [CChar]) throws(LibSSH2Error) -> (name: [UInt8], attributes: RemoteAttributes)? {
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        let length = buffer.withUnsafeMutableBufferPointer { folio_ssh2_sftp_readdir(handle, $0.baseAddress, $0.count, &attributes) }
        try check(length, session, sftp: sftp)
        return name(length, buffer, attributes)
    }

    private static func name(_ length: Int32, _ buffer: [CChar], _ attributes: LIBSSH2_SFTP_ATTRIBUTES) -> (name: [UInt8], attributes: RemoteAttributes)? {
        length == 0 ? nil : (buffer[0..<Int(length)].map { UInt8(bitPattern: $0) }, RemoteAttributes(attributes))
    }

    /// A request that can ride with a readdir's (see `readFolder(_:_:_:buffer:alongside:)`).
    enum Companion {
        /// The next folder's open.
        case openFolder([UInt8])
        /// The close of a handle whose reading is over.
        case close(OpaquePointer)
    }

    /// What `readFolder(_:_:_:buffer:alongside:)` got: the name (or the end, or why not), whether the companion
    /// went out (and is now done), and, for an open that did, its handle or why not.
    struct FolderStep {
        var name: Result<(name: [UInt8], attributes: RemoteAttributes)?, LibSSH2Error>
        var companionSent: Bool
        var opened: Result<OpaquePointer, LibSSH2Error>?
    }

    /// The next name, as `readFolder`; when it takes a request (the folder's names are asked for a screenful at a
    /// time), `companion` goes out right behind that request and both answers are collected, the name's first:
    /// one round trip for both. When the name came from what the last answer held, or its request could not all
    /// go out, the companion stays unsent. Nothing is left half done when this returns.
    ///
    /// Why one companion, and only behind the readdir: the same reasons as `readWithAttributes`' two requests.
    static func readFolder(_ session: OpaquePointer, _ sftp: OpaquePointer, _ handle: OpaquePointer, buffer: inout [CChar],
                           alongside companion: Companion) -> FolderStep {
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        func readdir() -> Int32 {
            buffer.withUnsafeMutableBufferPointer { folio_ssh2_sftp_readdir(handle, $0.baseAddress, $0.count, &attributes) }
        }
        libssh2_session_set_blocking(session, 0)
        var length = readdir()
        let waiting = length == LIBSSH2_ERROR_EAGAIN
        var opening: [UInt8]?
        var opened: OpaquePointer?
        var openFailure: LibSSH2Error?
        var closing: OpaquePointer?
        var closed: Int32 = 0
        if waiting && !sendIsUnfinished(session) {
            switch companion {
            case .openFolder(let path):
                opening = path
                opened = withPath(path) { folio_ssh2_sftp_opendir(sftp, $0, $1) }
                if opened == nil && libssh2_session_last_error(session, nil, nil, 0) != LIBSSH2_ERROR_EAGAIN {
                    openFailure = lastError(session, sftp: sftp)
                }
            case .close(let handle):
                closing = handle
                closed = folio_ssh2_sftp_close(handle)
            }
        }
        libssh2_session_set_blocking(session, 1)
        // The same calls, blocking: libssh2 goes on with each one under way (their states are apart).
        if waiting { length = readdir() }
        let name: Result<(name: [UInt8], attributes: RemoteAttributes)?, LibSSH2Error> =
            length < 0 ? .failure(lastError(session, sftp: sftp)) : .success(Self.name(length, buffer, attributes))
        if let opening, opened == nil, openFailure == nil {
            opened = withPath(opening) { folio_ssh2_sftp_opendir(sftp, $0, $1) }
            if opened == nil { openFailure = lastError(session, sftp: sftp) }
        }
        // As in `open(_:_:_:as:closing:)`: only EAGAIN leaves the handle alive; every other result freed it.
        if let closing, closed == LIBSSH2_ERROR_EAGAIN { _ = folio_ssh2_sftp_close(closing) }
        let result: Result<OpaquePointer, LibSSH2Error>? = if let opened { .success(opened) } else { openFailure.map { .failure($0) } }
        return FolderStep(name: name, companionSent: opening != nil || closing != nil, opened: result)
    }

    static func seek(_ handle: OpaquePointer, to offset: Int64) { libssh2_sftp_seek64(handle, UInt64(offset)) }

    /// Reads up to `count` bytes; 0 at end of file. libssh2 keeps up to four times `count` requested ahead.
    static func read(_ session: OpaquePointer, _ sftp: OpaquePointer, _ handle: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer, count: Int) throws(LibSSH2Error) -> Int {
        let result = libssh2_sftp_read(handle, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), min(count, buffer.count))
        if result < 0 { throw lastError(session, sftp: sftp) }
        return result
    }

    /// Whether the last non-blocking call left its request partly unsent, waiting on the socket: the same call
    /// must then be finished before any other, as libssh2 keeps one unfinished write per channel and would send
    /// the next call's bytes under this one's packet header.
    private static func sendIsUnfinished(_ session: OpaquePointer) -> Bool {
        libssh2_session_block_directions(session) & LIBSSH2_SESSION_BLOCK_OUTBOUND != 0
    }

    /// Reads up to `count` bytes, as `read`, and asks for the file's attributes in the same round trip: the read
    /// requests (libssh2 asks for up to four times `count` at once) go out, then the fstat, before either answer
    /// is awaited. The server answers in order, so the attributes are the file's after those reads. Nil
    /// attributes when the fstat could not go with them (ask again after reading).
    ///
    /// Why two requests at most, the read first: the read is the first request since the session's last blocking
    /// call, which finished any key exchange, so only a full socket can hold its request back, and that is seen
    /// (`sendIsUnfinished`): the read is then finished alone. A key exchange the server starts while the read
    /// waits for its answer can hold back the fstat's request; being the last, it goes out whole when collected.
    /// A third request could be written while the second was held back, under its header: a corrupt stream.
    /// Answers are collected read first, so the fstat never goes out before the reads.
    static func readWithAttributes(_ session: OpaquePointer, _ sftp: OpaquePointer, _ handle: OpaquePointer,
                                   into buffer: UnsafeMutableRawBufferPointer, count: Int) throws(LibSSH2Error) -> (count: Int, attributes: RemoteAttributes?) {
        let pointer = buffer.baseAddress!.assumingMemoryBound(to: CChar.self), size = min(count, buffer.count)
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        libssh2_session_set_blocking(session, 0)
        var result = libssh2_sftp_read(handle, pointer, size)
        let waiting = result == LIBSSH2_ERROR_EAGAIN
        var stat: Int32? = waiting && !sendIsUnfinished(session) ? folio_ssh2_sftp_fstat(handle, &attributes) : nil
        libssh2_session_set_blocking(session, 1)
        // The same calls, blocking: libssh2 goes on with each one under way (their states are apart).
        if waiting { result = libssh2_sftp_read(handle, pointer, size) }
        if result < 0 {
            let failure = lastError(session, sftp: sftp)
            if stat == LIBSSH2_ERROR_EAGAIN { _ = folio_ssh2_sftp_fstat(handle, &attributes) }  // nothing left half done
            throw failure
        }
        if stat == LIBSSH2_ERROR_EAGAIN { stat = folio_ssh2_sftp_fstat(handle, &attributes) }
        return (result, stat == 0 ? RemoteAttributes(attributes) : nil)
    }

    static func fstat(_ session: OpaquePointer, _ sftp: OpaquePointer, _ handle: OpaquePointer) throws(LibSSH2Error) -> RemoteAttributes {
        var attributes = LIBSSH2_SFTP_ATTRIBUTES()
        try check(folio_ssh2_sftp_fstat(handle, &attributes), session, sftp: sftp)
        return RemoteAttributes(attributes)
    }

    static func close(_ handle: OpaquePointer) { _ = folio_ssh2_sftp_close(handle) }
}

extension RemoteAttributes {
    init(_ attributes: LIBSSH2_SFTP_ATTRIBUTES) {
        let flags = attributes.flags
        self.init(
            mode: flags & UInt(LIBSSH2_SFTP_ATTR_PERMISSIONS) != 0 ? UInt32(truncatingIfNeeded: attributes.permissions) : nil,
            size: flags & UInt(LIBSSH2_SFTP_ATTR_SIZE) != 0 ? Int64(bitPattern: attributes.filesize) : nil,
            mtime: flags & UInt(LIBSSH2_SFTP_ATTR_ACMODTIME) != 0 ? Int64(attributes.mtime) : nil)
    }
}
