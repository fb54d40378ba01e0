/// A failed libssh2 call, keeping the C code, its name and libssh2's own message.
///
/// Internal only: `SSHSession` turns it into a `SourceError` that names the host and path and says what to do.
struct LibSSH2Error: Error, Sendable, CustomStringConvertible {
    /// The `LIBSSH2_ERROR_*` code (negative).
    var code: Int32
    /// libssh2's message from `libssh2_session_last_error`.
    var message: String
    /// The SFTP status (`LIBSSH2_FX_*`) when `code` is `LIBSSH2_ERROR_SFTP_PROTOCOL`.
    var sftpStatus: UInt?
    /// Folio's own SFTP channel read text where the subsystem's first answer belonged (see `SFTPPipe.init`).
    var isTextBeforeSFTP = false
    /// Folio gave up on a folder whose listing did not end (`FolderNames`): `message` says why.
    var isEndlessListing = false

    var description: String {
        var text = "libssh2 \(code) (\(Self.name(of: code)))"
        if let sftpStatus { text += " SFTP status \(sftpStatus) (\(Self.sftpName(of: sftpStatus)))" }
        if !message.isEmpty { text += ": \(message)" }
        return text
    }

    static func name(of code: Int32) -> String {
        let names: [Int32: String] = [
            -1: "SOCKET_NONE", -2: "BANNER_RECV", -3: "BANNER_SEND", -4: "INVALID_MAC", -5: "KEX_FAILURE", -6: "ALLOC",
            -7: "SOCKET_SEND", -8: "KEY_EXCHANGE_FAILURE", -9: "TIMEOUT", -10: "HOSTKEY_INIT", -11: "HOSTKEY_SIGN",
            -12: "DECRYPT", -13: "SOCKET_DISCONNECT", -14: "PROTO", -15: "PASSWORD_EXPIRED", -16: "FILE",
            -17: "METHOD_NONE", -18: "AUTHENTICATION_FAILED", -19: "PUBLICKEY_UNVERIFIED", -20: "CHANNEL_OUTOFORDER",
            -21: "CHANNEL_FAILURE", -22: "CHANNEL_REQUEST_DENIED", -23: "CHANNEL_UNKNOWN", -24: "CHANNEL_WINDOW_EXCEEDED",
            -25: "CHANNEL_PACKET_EXCEEDED", -26: "CHANNEL_CLOSED", -27: "CHANNEL_EOF_SENT", -28: "SCP_PROTOCOL",
            -29: "ZLIB", -30: "SOCKET_TIMEOUT", -31: "SFTP_PROTOCOL", -32: "REQUEST_DENIED", -33: "METHOD_NOT_SUPPORTED",
            -34: "INVAL", -35: "INVALID_POLL_TYPE", -36: "PUBLICKEY_PROTOCOL", -37: "EAGAIN", -38: "BUFFER_TOO_SMALL",
            -39: "BAD_USE", -40: "COMPRESS", -41: "OUT_OF_BOUNDARY", -42: "AGENT_PROTOCOL", -43: "SOCKET_RECV",
            -44: "ENCRYPT", -45: "BAD_SOCKET", -46: "KNOWN_HOSTS", -47: "CHANNEL_WINDOW_FULL",
            -48: "KEYFILE_AUTH_FAILED", -49: "RANDGEN",
        ]
        return "LIBSSH2_ERROR_" + (names[code] ?? "UNKNOWN")
    }

    static func sftpName(of status: UInt) -> String {
        let names = [
            "OK", "EOF", "NO_SUCH_FILE", "PERMISSION_DENIED", "FAILURE", "BAD_MESSAGE", "NO_CONNECTION",
            "CONNECTION_LOST", "OP_UNSUPPORTED", "INVALID_HANDLE", "NO_SUCH_PATH", "FILE_ALREADY_EXISTS",
            "WRITE_PROTECT", "NO_MEDIA", "NO_SPACE_ON_FILESYSTEM", "QUOTA_EXCEEDED", "UNKNOWN_PRINCIPAL",
            "LOCK_CONFLICT", "DIR_NOT_EMPTY", "NOT_A_DIRECTORY", "INVALID_FILENAME", "LINK_LOOP",
        ]
        return "LIBSSH2_FX_" + (status < names.count ? names[Int(status)] : "UNKNOWN")
    }

    /// The connection itself failed (dropped, reset, timed out): no later call on this session can succeed.
    var isConnectionLoss: Bool { [-7, -9, -13, -30, -43, -45].contains(code) }
    var isKeyExchangeFailure: Bool { code == -5 || code == -8 }
    /// libssh2's generic socket error (SOCKET_NONE), which some of its paths return for a cut connection.
    var isGenericSocketError: Bool { code == -1 }
    /// The server refused a channel request (an exec, a subsystem).
    var isRequestDenied: Bool { code == -22 }
    /// The server closed the channel (for `SFTPPipe`: the SFTP subsystem ended before it answered).
    var isChannelClosed: Bool { code == -26 }
    /// A blocking call waited out the session's timeout.
    var isTimeout: Bool { code == -9 }
    var isNoSuchFile: Bool { sftpStatus == 2 || sftpStatus == 10 }
    var isPermissionDenied: Bool { sftpStatus == 3 }
}
