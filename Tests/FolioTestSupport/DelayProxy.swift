import Foundation
import Glibc

/// A TCP proxy on 127.0.0.1 that forwards to a local port with `delay` added each way, and counts turns: how many
/// times the client spoke after an answer had been delivered to it. Requests sent together cost one turn; a request
/// sent only once the previous answer came back costs one of its own, so tests can count round trips without
/// timing anything. Why delivered, not merely arrived at the proxy: a client cannot have waited for an answer it
/// has not been given, so a request it sends while the answer is still held here (a client thread descheduled
/// between two writes on a busy machine) belongs to the same turn.
/// Data is queued with a due time, not held stop-and-wait, so the delay does not cap throughput.
public final class DelayProxy: @unchecked Sendable {
    // Why @unchecked Sendable: `turnCount`, `clientSpokeLast`, `open`, `listenerClosed`, `acceptedCount` and
    // `stopped` are only touched under `lock`; each socket is read by one thread and written by another, which the
    // kernel allows, and closed only once both are done (see `Link`).
    public let port: Int
    private let targetPort: Int
    private let delay: TimeInterval
    private let listener: Int32
    private let lock = NSLock()
    private var turnCount = 0
    private var clientSpokeLast = false
    /// The connections whose sockets are not closed yet.
    private var open: [Link] = []
    private var listenerClosed = false
    private var acceptedCount = 0
    private var stopped = false
    private let mostConnections: Int
    private let cutAtTurn: Int

    /// Starts listening on a free port of 127.0.0.1; each connection is forwarded to 127.0.0.1:`targetPort`, up to
    /// `mostConnections` of them (later ones are closed at once, as by a server that caps each user's connections).
    /// The client's turn number `cutAtTurn` is not forwarded: the connection is cut there instead, both ways.
    public init(forwardingTo targetPort: Int, delay: TimeInterval = 0.005, mostConnections: Int = .max, cutAtTurn: Int = .max) throws {
        self.targetPort = targetPort
        self.delay = delay
        self.mostConnections = mostConnections
        self.cutAtTurn = cutAtTurn
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw LoopbackServer.Failure("socket: errno \(errno)") }
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(fd, pointer, length) == 0, listen(fd, 16) == 0 else { return -1 }
                return getsockname(fd, pointer, &length)
            }
        }
        guard bound == 0 else {
            close(fd)
            throw LoopbackServer.Failure("delay proxy: cannot listen: errno \(errno)")
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { self.acceptConnections() }
    }

    /// Turns counted so far, over every connection.
    public var turns: Int { lock.withLock { turnCount } }

    /// Connections forwarded so far.
    public var connections: Int { lock.withLock { acceptedCount } }

    /// Stops accepting and cuts every connection.
    public func stop() {
        // Why under the lock: sockets are closed only under it (see `Link`), so none here is closed or reused.
        lock.withLock {
            guard !stopped else { return }
            stopped = true
            if !listenerClosed { shutdown(listener, Int32(SHUT_RDWR)) }
            for link in open { link.cut() }
        }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return address
    }

    private func acceptConnections() {
        defer {
            lock.withLock {
                listenerClosed = true
                close(listener)
            }
        }
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 { return }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = Self.loopback(port: targetPort)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            let link = Link(client: client, server: server)
            let accepted = lock.withLock { () -> Bool in
                guard connected, !stopped, acceptedCount < mostConnections else { return false }
                open.append(link)
                acceptedCount += 1
                return true
            }
            guard accepted else {
                close(client)
                close(server)
                continue
            }
            forward(link, fromClient: true)
            forward(link, fromClient: false)
        }
    }

    /// One direction: a reader that notes each arrival and queues it with its due time, and a writer that sends
    /// it when due. Why two threads: the reader must see data the moment it arrives, or two requests sent
    /// together could look like two turns.
    private func forward(_ link: Link, fromClient: Bool) {
        let source = fromClient ? link.client : link.server
        let destination = fromClient ? link.server : link.client
        let queue = DueQueue()
        let delay = self.delay
        Thread.detachNewThread {
            defer { self.release(link) }
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = read(source, &buffer, buffer.count)
                if count > 0, fromClient, self.noteClientSpoke() {
                    link.cut()
                    queue.put(due: Date(), nil)
                    return
                }
                queue.put(due: Date() + delay, count > 0 ? Array(buffer[0..<count]) : nil)
                if count <= 0 { return }
            }
        }
        Thread.detachNewThread {
            defer { self.release(link) }
            while true {
                let (due, data) = queue.take()
                let wait = due.timeIntervalSinceNow
                if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
                guard let data else {
                    shutdown(destination, Int32(SHUT_WR))
                    return
                }
                // Marked before it is sent, never after: the client may answer the moment it has it.
                if !fromClient { self.noteAnswerDelivered() }
                var sent = 0
                while sent < data.count {
                    let count = data[sent...].withUnsafeBytes { send(destination, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if count <= 0 {
                        // The far end is gone: nothing more can be forwarded either way.
                        link.cut()
                        return
                    }
                    sent += count
                }
            }
        }
    }

    /// One of a link's four threads is done; the last closes its sockets.
    private func release(_ link: Link) {
        lock.withLock {
            link.users -= 1
            guard link.users == 0 else { return }
            open.removeAll { $0 === link }
            close(link.client)
            close(link.server)
        }
    }

    /// Counts the client's chunk as a new turn if an answer was delivered since it last spoke; true when it is the
    /// turn to cut at.
    private func noteClientSpoke() -> Bool {
        lock.withLock {
            let newTurn = !clientSpokeLast
            if newTurn { turnCount += 1 }
            clientSpokeLast = true
            return newTurn && turnCount == cutAtTurn
        }
    }

    /// The server's chunk is being delivered to the client: what the client sends next is a new turn.
    private func noteAnswerDelivered() {
        lock.withLock { clientSpokeLast = false }
    }
}

/// One forwarded connection: its two sockets, used by four threads (a reader and a writer each way).
///
/// Why the sockets are closed only when all four have ended, under the proxy's lock: a descriptor closed while
/// another thread may still read, send or shut it down can by then be reused for another file of this process (a
/// pipe to a child, another test's SSH connection, one of libdispatch's own), which that thread would then read
/// from or cut.
private final class Link: @unchecked Sendable {
    // Why @unchecked Sendable: `users` is only touched under the proxy's lock; the descriptors never change.
    let client: Int32
    let server: Int32
    var users = 4

    init(client: Int32, server: Int32) {
        self.client = client
        self.server = server
    }

    /// Cuts the connection both ways; every thread blocked on it wakes and ends.
    func cut() {
        shutdown(client, Int32(SHUT_RDWR))
        shutdown(server, Int32(SHUT_RDWR))
    }
}

/// Chunks waiting for their due time, in arrival order; nil data marks the end of the stream.
private final class DueQueue: @unchecked Sendable {
    // Why @unchecked Sendable: `items` is only touched while `condition` is locked.
    private let condition = NSCondition()
    private var items: [(Date, [UInt8]?)] = []

    func put(due: Date, _ data: [UInt8]?) {
        condition.withLock {
            items.append((due, data))
            condition.signal()
        }
    }

    /// The next chunk, waiting for one.
    func take() -> (Date, [UInt8]?) {
        condition.withLock {
            while items.isEmpty { condition.wait() }
            return items.removeFirst()
        }
    }
}
