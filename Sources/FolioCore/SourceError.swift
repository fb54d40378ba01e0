/// The one error type every `Source` throws: what went wrong, where, and whether trying again can help.
///
/// `message` is a single line that names the path or URL (never a credential) and, where there is one, the fix.
public struct SourceError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure: decides whether it fails the run (`failsRun`) and the default `isRetryable`.
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
    }

    /// What kind of failure.
    public var code: Code
    /// One line for people: what failed, naming the path or URL, and the fix where there is one.
    public var message: String
    /// The entry concerned, when the error is about one file or folder.
    public var path: RelativePath?
    /// The underlying cause as the lower layer reported it, e.g. `libssh2 -18 (LIBSSH2_ERROR_AUTHENTICATION_FAILED)`.
    public var underlying: String?
    /// Whether trying the same thing again can help.
    public var isRetryable: Bool

    /// An error; without `isRetryable`, retryable for `.unreachable`, `.changed` and `.serverError` only.
    public init(_ code: Code, _ message: String, path: RelativePath? = nil, underlying: String? = nil, isRetryable: Bool? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.underlying = underlying
        self.isRetryable = isRetryable ?? [.unreachable, .changed, .serverError].contains(code)
    }

    /// Errors that mean the whole run cannot go on, as opposed to one file failing.
    public var failsRun: Bool { [.unreachable, .authentication, .cancelled].contains(code) }

    /// The message alone.
    public var description: String { message }
}
