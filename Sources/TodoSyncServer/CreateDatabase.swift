import ArgumentParser
import Foundation
import Logging
import MariaDB

/// `todosync create-database`: the application's database and account, created (or brought up
/// to date) by a MariaDB administrator. Used by scripts/stack.sh and scripts/install.sh.
struct CreateDatabase: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create the application's database and account (idempotent), as a MariaDB administrator.",
        discussion: """
            Connects as --admin-user without a password (unix_socket authentication: run it as that OS \
            user) to the configured server, creates TODOSYNC_DB_NAME (utf8mb4) and TODOSYNC_DB_USER at \
            each of --account-hosts with the application's password, and grants that account every \
            privilege on the database. The password is TODOSYNC_DB_PASSWORD, else the first line of \
            TODOSYNC_DB_PASSWORD_FILE; a missing or empty password file is created with a random \
            password (mode 0600, its directory 0700).
            """)

    @Option(help: "Administrator account (default: the name of the OS user running this).")
    var adminUser: String?

    @Option(help: "Comma-separated hosts of the application account.")
    var accountHosts = "localhost"

    @Option(help: "Seconds to keep retrying while the database is not reachable yet.")
    var waitSeconds = 30

    @Flag(help: "Also make root@localhost unix_socket-only and drop root's TCP accounts (a private data dir).")
    var socketOnlyRoot = false

    func run() throws {
        let environment = Environment()
        let logger = bootstrapLogging(environment)
        let database = environment.string("TODOSYNC_DB_NAME"), user = environment.string("TODOSYNC_DB_USER")
        let hosts = accountHosts.split(separator: ",").map(String.init)
        // Names are spliced into DDL (identifiers cannot be bound): only plain characters.
        for (option, name) in [("TODOSYNC_DB_NAME", database), ("TODOSYNC_DB_USER", user)] + hosts.map({ ("--account-hosts", $0) })
        where name.isEmpty || !name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "_.:-".contains($0)) }) {
            throw ValidationError("\(option): '\(name)' may hold only letters, digits and _ . : -")
        }
        let password = try applicationPassword(environment)

        var admin = try environment.database
        admin.user = adminUser ?? getpwuid(geteuid()).map { String(cString: $0.pointee.pw_name) } ?? "root"
        admin.password = ""
        admin.database = ""
        MariaDBLibrary.initialize()
        let db = Connection(configuration: admin)
        try db.connectWaiting(seconds: waitSeconds, logger: logger)
        try db.execute("CREATE DATABASE IF NOT EXISTS `\(database)` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        if socketOnlyRoot {
            // Data dirs initialised before root became unix_socket-only (with no password).
            try db.execute("ALTER USER root@localhost IDENTIFIED VIA unix_socket")
            var host = [CChar](repeating: 0, count: 256)
            gethostname(&host, host.count - 1)
            for rootHost in ["127.0.0.1", "::1", String(cString: host)] where !rootHost.contains("'") {
                try db.execute("DROP USER IF EXISTS root@'\(rootHost)'")
            }
        }
        // The password is bound, never spliced into SQL: the server hashes it, and only that hash
        // (checked to be one) goes into the account statements, which take no parameters.
        guard let hash = try db.queryOne("SELECT PASSWORD(?)", [.text(password)])?.string(0),
              hash.count == 41, hash.first == "*", hash.dropFirst().allSatisfy(\.isHexDigit) else {
            throw ValidationError("the server did not hash the password as expected")
        }
        for host in hosts {
            try db.execute("CREATE USER IF NOT EXISTS '\(user)'@'\(host)' IDENTIFIED BY PASSWORD '\(hash)'")
            try db.execute("ALTER USER '\(user)'@'\(host)' IDENTIFIED BY PASSWORD '\(hash)'")
            try db.execute("GRANT ALL PRIVILEGES ON `\(database)`.* TO '\(user)'@'\(host)'")
        }
        logger.info("database and account ready", metadata: [
            "database": "\(database)", "user": "\(user)", "hosts": "\(accountHosts)"])
    }

    /// The configured password; a missing or empty TODOSYNC_DB_PASSWORD_FILE is generated first.
    private func applicationPassword(_ environment: Environment) throws -> String {
        let explicit = environment.configuration.lookup("TODOSYNC_DB_PASSWORD").source != .defaultValue
        if !explicit, let path = environment.optionalString("TODOSYNC_DB_PASSWORD_FILE"),
           (FileManager.default.contents(atPath: path) ?? Data()).isEmpty {
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
            var generator = SystemRandomNumberGenerator()
            let generated = String((0..<32).map { _ in alphabet[Int(generator.next(upperBound: UInt(alphabet.count)))] })
            let directory = (path as NSString).deletingLastPathComponent
            let previous = umask(0o077)
            defer { umask(previous) }
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: path + ".tmp", contents: Data(generated.utf8)),
                  rename(path + ".tmp", path) == 0 else {
                throw ValidationError("could not write TODOSYNC_DB_PASSWORD_FILE \(path)")
            }
        }
        return try environment.databasePassword
    }
}

extension Connection {
    /// Connects, retrying connection errors for up to `seconds` (the server may still be starting).
    func connectWaiting(seconds: Int, logger: Logger) throws {
        let deadline = Date().addingTimeInterval(TimeInterval(seconds))
        while true {
            do {
                try connect()
                return
            } catch let error as DatabaseError where error.isConnectionError && Date() < deadline {
                logger.info("waiting for the database", metadata: ["error": "\(error)"])
                Thread.sleep(forTimeInterval: 0.5)
            }
        }
    }
}
