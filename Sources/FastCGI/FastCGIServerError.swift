#if canImport(Glibc)
import Glibc
#endif

/// Why ``FastCGIServer/run(makeHandler:)`` could not start.
public enum FastCGIServerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A configuration value is out of range; the message names the field.
    case invalidConfiguration(String)
    /// `run` was called a second time on the same server.
    case alreadyStarted
    /// `FCGX_Init` failed with the given code.
    case libraryInitializationFailed(code: Int32)
    /// Another live process accepts connections on the socket path.
    case socketInUse(path: String)
    /// Something that is not a socket exists at the socket path; it is left alone.
    case socketPathOccupied(path: String)
    /// A system call failed; `operation` names the call and, where relevant, the path.
    case systemCallFailed(operation: String, errno: Int32)

    public var description: String {
        switch self {
        case .invalidConfiguration(let message):
            return "invalid FastCGI configuration: \(message)"
        case .alreadyStarted:
            return "FastCGIServer.run was already called on this server"
        case .libraryInitializationFailed(let code):
            return "FCGX_Init failed with code \(code)"
        case .socketInUse(let path):
            return "another process is already serving the FastCGI socket \(path)"
        case .socketPathOccupied(let path):
            return "\(path) exists and is not a socket; refusing to replace it"
        case .systemCallFailed(let operation, let code):
            return "\(operation) failed: \(String(cString: strerror(code))) (errno \(code))"
        }
    }
}
