@testable import FolioSFTP
import XCTest

/// Parsing a server's identification and key exchange init from the bytes as they arrive (the exchange with a
/// real sshd is tested in `SFTPAuthenticationTests`).
final class ServerAlgorithmsTests: XCTestCase {
    /// A KEXINIT packet with `lists` as its ten name-lists (RFC 4253 §7.1), padded as a server pads it.
    private func packet(_ lists: [String]) -> [UInt8] {
        var payload: [UInt8] = [20] + [UInt8](repeating: 7, count: 16)
        for list in lists {
            let bytes = Array(list.utf8)
            payload += withUnsafeBytes(of: UInt32(bytes.count).bigEndian, Array.init) + bytes
        }
        payload += [0, 0, 0, 0, 0]
        let padding = 8 - (payload.count + 5) % 8 + 4
        let length = UInt32(1 + payload.count + padding)
        return withUnsafeBytes(of: length.bigEndian, Array.init) + [UInt8(padding)] + payload + [UInt8](repeating: 0, count: padding)
    }

    private let lists = ["curve25519-sha256,ext-info-s,kex-strict-s-v00@openssh.com", "ssh-ed25519", "aes128-gcm@openssh.com", "aes128-gcm@openssh.com",
                         "hmac-sha2-256", "hmac-sha2-256", "none", "none", "", ""]

    func testParsesTheOfferAfterTheIdentificationLineAndAnyLineBeforeIt() throws {
        let bytes = Array("Welcome\r\nSSH-2.0-OpenSSH_9.2p1 Debian-2\r\n".utf8) + packet(lists)
        guard case .parsed(let offer) = ServerAlgorithms.parse(bytes) else { return XCTFail("\(ServerAlgorithms.parse(bytes))") }
        XCTAssertEqual(offer.offered(.keyExchange), ["curve25519-sha256"])
        XCTAssertEqual(offer.offered(.cipher), ["aes128-gcm@openssh.com"])
        XCTAssertTrue(offer.shares(.mac, with: ["hmac-sha2-512", "hmac-sha2-256"]))
        XCTAssertFalse(offer.shares(.cipher, with: ["aes128-ctr"]))
        XCTAssertEqual(offer.unsharedLine(display: "sftp://h", libssh2Version: "1.10.0", supported: { $0 == .cipher ? ["aes256-cbc", "aes128-ctr"] : ["curve25519-sha256", "ssh-ed25519", "hmac-sha2-256"] }),
                       "sftp://h: the server offers no cipher that Folio's libssh2 1.10.0 can use (server: aes128-gcm@openssh.com; libssh2: aes128-ctr); in the server's sshd_config, add one of libssh2's ciphers to Ciphers")
        XCTAssertNil(offer.unsharedLine(display: "sftp://h", libssh2Version: "1.10.0", supported: { _ in ["curve25519-sha256", "ssh-ed25519", "aes128-gcm@openssh.com", "hmac-sha2-256"] }))
    }

    /// Every prefix of a valid exchange asks for more; nothing that is not SSH, or claims an impossible size, is
    /// read past its limit.
    func testPartialAndMalformedInputNeverParses() {
        let bytes = Array("SSH-2.0-OpenSSH_9.2p1\r\n".utf8) + packet(lists)
        for end in 0 ..< bytes.count {
            XCTAssertEqual(ServerAlgorithms.parse(Array(bytes[..<end])), .needMore, "prefix of \(end) bytes")
        }
        XCTAssertEqual(ServerAlgorithms.parse(Array(repeating: UInt8(ascii: "x"), count: 9_000)), .invalid)
        XCTAssertEqual(ServerAlgorithms.parse(Array("SSH-2.0-x\r\n".utf8) + [0x7f, 0xff, 0xff, 0xff, 4]), .invalid)
        var notInit = bytes
        notInit[Array("SSH-2.0-OpenSSH_9.2p1\r\n".utf8).count + 5] = 21
        XCTAssertEqual(ServerAlgorithms.parse(notInit), .invalid)
        var shortList = Array("SSH-2.0-x\r\n".utf8) + packet(lists)
        shortList[Array("SSH-2.0-x\r\n".utf8).count + 5 + 17 + 3] = 200
        XCTAssertEqual(ServerAlgorithms.parse(shortList), .invalid)
    }
}
