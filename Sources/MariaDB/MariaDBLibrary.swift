import CMariaDB

/// Process-wide set-up of the MariaDB Connector/C library.
public enum MariaDBLibrary {
    /// Initialises Connector/C (`mysql_server_init`).
    ///
    /// Call it once on the main thread before starting worker threads: the C library's own
    /// lazy initialisation is not thread-safe. Repeated calls are cheap no-ops, and
    /// ``Connection/init(configuration:)`` calls it as a safety net.
    public static func initialize() {
        precondition(libraryInitialized, "mysql_server_init failed")
    }
}

/// Swift runs a global's initialiser exactly once, thread-safely.
private let libraryInitialized: Bool = mysql_server_init(0, nil, nil) == 0
