import FolioCore
import Glibc

/// The algorithms an SSH server offers in its key exchange init (RFC 4253 §7.1), read on a connection of its own
/// after a failed key exchange to say why it failed.
///
/// Why a connection of its own: libssh2 1.10 reports "no algorithm in common" and "connection lost during the key
/// exchange" with the same code and message, and keeps neither the server's offer nor which list failed. The
/// server's init comes in clear text right after its identification line, so reading it costs one round trip
/// and no key exchange, and only on a handshake that already failed.
struct ServerAlgorithms: Equatable {
    /// A list both sides must share one algorithm of, in the order a handshake settles them.
    enum Category: CaseIterable {
        case keyExchange, hostKey, cipher, mac

        /// The name in the error line ("the server offers no cipher…").
        var name: String {
            switch self {
            case .keyExchange: "key exchange"
            case .hostKey: "host key type"
            case .cipher: "cipher"
            case .mac: "MAC"
            }
        }

        /// What to change in the server's sshd_config.
        var remedy: String {
            switch self {
            case .keyExchange: "add one of libssh2's key exchanges to KexAlgorithms"
            case .hostKey: "add a HostKey of one of libssh2's host key types"
            case .cipher: "add one of libssh2's ciphers to Ciphers"
            case .mac: "add one of libssh2's MACs to MACs"
            }
        }

    }

    /// The server's name-lists in the order of the message: key exchange, host key, cipher and MAC each way
    /// (client to server first), compression each way, languages each way.
    let lists: [[String]]

    /// What the server offers in `category`, in its order, without the pseudo-algorithms that only signal an
    /// extension (`ext-info-s`, `kex-strict-s-v00@openssh.com`).
    func offered(_ category: Category) -> [String] {
        let list = switch category {
        case .keyExchange: lists[0]
        case .hostKey: lists[1]
        case .cipher: lists[2]
        case .mac: lists[4]
        }
        return list.filter { !$0.hasPrefix("ext-info-") && !$0.hasPrefix("kex-strict-") }
    }

    /// Whether the server shares an algorithm of `category` with `supported` in both directions.
    func shares(_ category: Category, with supported: [String]) -> Bool {
        let indices = switch category {
        case .keyExchange: [0]
        case .hostKey: [1]
        case .cipher: [2, 3]
        case .mac: [4, 5]
        }
        return indices.allSatisfy { lists[$0].contains(where: supported.contains) }
    }

    /// The error line for a handshake that failed in the key exchange: the lists the server shares
    /// nothing of with libssh2 (`supported`, in libssh2's order), each with both sides' offers and what to change;
    /// nil when every list has an algorithm in common, so the failure was not the offers.
    func unsharedLine(display: String, libssh2Version: String, supported: (Category) -> [String]) -> String? {
        let unshared = Category.allCases.filter { !shares($0, with: supported($0)) }
        guard !unshared.isEmpty else { return nil }
        let offers = unshared.enumerated().map { index, category in
            let ours = supported(category)
            let suggested = ours.filter(Self.isWorthSuggesting)
            let which = index == 0 ? "\(category.name) that Folio's libssh2 \(libssh2Version) can use" : category.name
            return "\(which) (server: \(offered(category).joined(separator: ", ")); libssh2: \((suggested.isEmpty ? ours : suggested).joined(separator: ", ")))"
        }
        return "\(display): the server offers no \(offers.joined(separator: ", and no ")); in the server's sshd_config, \(unshared.map(\.remedy).joined(separator: " and "))"
    }

    /// Whether an algorithm libssh2 supports is one to suggest to a server's owner: not one OpenSSH has retired as
    /// weak (SHA-1, MD5, CBC modes, RC4, DSA, the ssh-rsa signature), nor a certificate type (which needs a CA).
    static func isWorthSuggesting(_ name: String) -> Bool {
        let weak = ["sha1", "md5", "-cbc", "cbc@", "arcfour", "ssh-dss", "ripemd", "3des", "blowfish", "cast128", "-cert-v01"]
        return name != "ssh-rsa" && !weak.contains(where: name.contains)
    }

    // MARK: Parsing

    /// How far `parse` got with the bytes read so far.
    enum Reading: Equatable {
        case needMore
        case invalid
        case parsed(ServerAlgorithms)
    }

    /// The largest packet RFC 4253 §6.1 requires an implementation to take; a server's init is far smaller.
    private static let largestPacket = 35_000
    /// How much may come before the identification line (RFC 4253 §4.2 allows other lines first).
    private static let largestPreface = 8_192

    /// Parses what a server sent from the start of the connection: lines up to its `SSH-` identification line,
    /// then its first binary packet, which must be SSH_MSG_KEXINIT.
    static func parse(_ bytes: [UInt8]) -> Reading {
        var lineStart = 0
        var packetStart: Int?
        while packetStart == nil {
            guard let newline = bytes[lineStart...].firstIndex(of: UInt8(ascii: "\n")) else {
                return bytes.count > largestPreface ? .invalid : .needMore
            }
            if bytes[lineStart...].starts(with: Array("SSH-".utf8)) { packetStart = newline + 1 }
            lineStart = newline + 1
            if lineStart > largestPreface { return .invalid }
        }
        guard let start = packetStart, bytes.count >= start + 5 else { return .needMore }
        let length = bytes[start ..< start + 4].reduce(0) { $0 << 8 | Int($1) }
        guard length >= 5, length <= largestPacket else { return .invalid }
        guard bytes.count >= start + 4 + length else { return .needMore }
        let padding = Int(bytes[start + 4])
        guard padding < length - 1 else { return .invalid }
        let payload = bytes[start + 5 ..< start + 4 + length - padding]
        guard let algorithms = ServerAlgorithms(keyExchangeInit: payload) else { return .invalid }
        return .parsed(algorithms)
    }

    /// Reads an SSH_MSG_KEXINIT payload: the message number 20, a 16-byte cookie, then ten name-lists, each a
    /// 32-bit length and comma-separated names.
    init?(keyExchangeInit payload: ArraySlice<UInt8>) {
        var at = payload.startIndex
        guard payload.count > 17, payload[at] == 20 else { return nil }
        at += 17
        var lists: [[String]] = []
        for _ in 0 ..< 10 {
            guard payload.endIndex - at >= 4 else { return nil }
            let length = payload[at ..< at + 4].reduce(0) { $0 << 8 | Int($1) }
            at += 4
            guard payload.endIndex - at >= length else { return nil }
            let text = String(decoding: payload[at ..< at + length], as: UTF8.self)
            lists.append(text.split(separator: ",").map(String.init))
            at += length
        }
        self.lists = lists
    }

    // MARK: Reading from the server

    /// Connects to `host`:`port`, sends an identification line and reads the server's up to its key exchange
    /// init; nil when the connection fails or closes first, or what comes is not SSH. Blocks, at most
    /// `timeoutSeconds` per wait; a stop of the run (`interrupter`) ends it at once.
    static func read(host: String, port: Int, timeoutSeconds: Int, display: String, interrupter: SocketInterrupter? = nil) -> ServerAlgorithms? {
        guard let socket = try? TCPSocket.connect(host: host, port: port, timeoutSeconds: timeoutSeconds, display: display, interrupter: interrupter) else { return nil }
        defer {
            // Why unwatched first: see `SocketInterrupter.interrupt`.
            interrupter?.unwatch(socket)
            Glibc.close(socket)
        }
        var wait = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        _ = setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        let identification = Array("SSH-2.0-Folio\r\n".utf8)
        guard send(socket, identification, identification.count, Int32(MSG_NOSIGNAL)) == identification.count else { return nil }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            switch parse(received) {
            case .parsed(let algorithms): return algorithms
            case .invalid: return nil
            case .needMore: break
            }
            let count = recv(socket, &chunk, chunk.count, 0)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return nil }
            received += chunk[..<count]
        }
    }
}
