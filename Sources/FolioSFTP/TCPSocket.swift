import FolioCore
import Glibc

/// Opens the TCP connection a session runs over, with a connect timeout (libssh2 only takes a ready socket).
enum TCPSocket {
    /// Tries each address the host resolves to; returns a blocking socket, watched by `interrupter` (if any) from
    /// before it connects: the caller unwatches it before closing it.
    static func connect(host: String, port: Int, timeoutSeconds: Int, display: String, interrupter: SocketInterrupter? = nil) throws(SourceError) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw SourceError(.unreachable, "cannot resolve host \(host) for \(display): \(String(cString: gai_strerror(status))); check the host name and DNS",
                              underlying: "getaddrinfo \(status)")
        }
        defer { freeaddrinfo(list) }
        var lastErrno: Int32 = ECONNREFUSED
        var address: UnsafeMutablePointer<addrinfo>? = list
        while let current = address {
            address = current.pointee.ai_next
            let fd = socket(current.pointee.ai_family, current.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), current.pointee.ai_protocol)
            guard fd >= 0 else { lastErrno = errno; continue }
            // Why watched while connecting: a stop shuts the socket down, which ends the wait for a host that
            // drops the connection attempt, rather than after the connect timeout.
            if let interrupter, !interrupter.watch(fd) {
                Glibc.close(fd)
                throw SourceError(.cancelled, "stopped before connecting to \(display)")
            }
            if let error = connect(fd, current.pointee.ai_addr, current.pointee.ai_addrlen, timeoutSeconds: timeoutSeconds) {
                lastErrno = error
                interrupter?.unwatch(fd)
                Glibc.close(fd)
                continue
            }
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            _ = setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, socklen_t(MemoryLayout<Int32>.size))
            return fd
        }
        let reason = lastErrno == ETIMEDOUT ? "timed out after \(timeoutSeconds) s" : String(cString: strerror(lastErrno))
        throw SourceError(.unreachable, "cannot connect to \(host) port \(port) for \(display): \(reason); check that the host is up and sshd listens on that port",
                          underlying: "errno \(lastErrno)")
    }

    /// A non-blocking connect bounded by poll, then back to blocking; returns errno on failure.
    private static func connect(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: socklen_t, timeoutSeconds: Int) -> Int32? {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        if Glibc.connect(fd, address, length) != 0 {
            guard errno == EINPROGRESS else { return errno }
            var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            var ready: Int32
            repeat { ready = poll(&descriptor, 1, Int32(timeoutSeconds * 1000)) } while ready < 0 && errno == EINTR
            if ready == 0 { return ETIMEDOUT }
            if ready < 0 { return errno }
            var error: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size)
            if error != 0 { return error }
        }
        _ = fcntl(fd, F_SETFL, flags)
        return nil
    }
}
