/// The one error type every `Source` throws: what went wrong, where, and (by its code) whether trying again can help.
///
/// `message` is a single line that names the path or URL (never a credential) and, where there is one, the fix.
public struct SourceError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure: decides whether it fails the run (`failsRun`) and whether trying again soon can help
    /// (`isRetryable`).
    public enum Code: String, Sendable {
        /// The server could not be reached (DNS, refused, timed out, dropped).
        case unreachable
        /// Credentials or the host key were refused.
        case authentication
        case notFound
        case permission
        /// The server answered something Folio cannot accept (malformed, hostile, unexpected).
        case protocolViolation = "protocol"
        /// Reading or writing on this machine failed (disk full, read-only destination).
        case localIO
        case cancelled
        /// The file changed on the source while it was being copied; the next run tries again.
        case changed
        /// The server kept failing on this one file or folder (an HTTP 5xx after retries) while it answered
        /// the rest: that entry fails, not the run, and the next run tries again.
        case serverError

        /// Whether trying again within minutes can help: for every failure but a refusal (credentials, a host key,
        /// a certificate), which comes back until someone fixes it. A missing source root (a share not mounted
        /// yet), a full disk or a server being fixed can all be gone a minute later; the daemon retries a run that
        /// failed on those after 10 s, 20 s, 40 s…, and a refused one only at its next interval.
        public var isRetryable: Bool { self != .authentication }
    }

    /// What kind of failure.
    public var code: Code
    /// One line for people: what failed, naming the path or URL, and the fix where there is one.
    public var message: String
    /// The entry concerned, when the error is about one file or folder.
    public var path: RelativePath?
    /// The underlying cause as the lower layer reported it, e.g. `libssh2 -18 (LIBSSH2_ERROR_AUTHENTICATION_FAILED)`.
    public var underlying: String?
    /// An error of kind `code`, saying `message`, about the entry at `path` when there is one.
    public init(_ code: Code, _ message: String, path: RelativePath? = nil, underlying: String? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.underlying = underlying
    }

    /// Errors that mean the whole run cannot go on, as opposed to one file failing.
    public var failsRun: Bool { [.unreachable, .authentication, .cancelled].contains(code) }

    /// The message alone.
    public var description: String { message }
}
