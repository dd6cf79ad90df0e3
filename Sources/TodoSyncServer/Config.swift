import ArgumentParser
import Foundation
import MariaDB
import TodoSyncConfig
import TodoSyncStore

/// `todosync config`: the effective configuration, as the other commands see it.
struct Config: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the effective configuration: defaults, then the config file ($TODOSYNC_CONFIG), then the environment.",
        discussion: "Each line is NAME=VALUE and its source; secrets print as <redacted>. Other TODOSYNC_* variables that are set are listed last (the dev stack's own, or misspellings).")

    @Flag(name: .shortAndLong, help: "Also print what each variable means.")
    var verbose = false

    @Flag(help: "Print only NAME=VALUE lines of the variables todosync reads, secrets left out (for scripts).")
    var assignments = false

    @Flag(help: ArgumentHelp(
        "Check the configuration as a responder would use it, then exit: 0 and 'configuration ok' when every value is valid, no TODOSYNC_* name is unknown, a database session opens and no migration is pending or edited.",
        discussion: "Exit codes, one per cause: 78 a bad value, file or unknown name, or a password file that cannot be read; 77 the database refused the account or password; 75 the database could not be reached; 65 a migration pending or edited (docs/OPERATIONS.md, \"Exit codes\")."))
    var check = false

    @Option(help: "With --check: directory of the NNN_name.sql migrations to compare with the database (default: $TODOSYNC_SQL_DIR or ./Sql; the installed ones: /usr/local/share/todosync/Sql).")
    var sqlDir: String?

    func run() {
        if check {
            Self.check(sqlDir: sqlDir)
            return
        }
        let configuration = Environment(validating: false).configuration
        print(assignments ? configuration.renderAssignments() : configuration.render(verbose: verbose), terminator: "")
    }

    /// `config --check`: every cheap problem first (all of them at once, exit 78), then the
    /// database session (77, 78 or 75), then the migration state (65). Returns only when all pass.
    static func check(sqlDir: String?) {
        let environment = Environment(validating: false)
        let configuration = environment.configuration
        var problems = configuration.problems()
        problems += configuration.unknownNames().map(\.description)
        var database: ConnectionConfiguration?
        do {
            database = try environment.database
        } catch {
            problems.append("\(error)")
        }
        let directory = sqlDir ?? environment.string("TODOSYNC_SQL_DIR")
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) || !isDirectory.boolValue {
            problems.append(sqlDir != nil
                ? "--sql-dir \(directory): no such directory"
                : "TODOSYNC_SQL_DIR=\(directory) (\(configuration.lookup("TODOSYNC_SQL_DIR").source)): no such directory (pass --sql-dir, e.g. /usr/local/share/todosync/Sql)")
        }
        guard problems.isEmpty, let database else {
            ExitStatus.fail(.configuration, problems.joined(separator: "\ntodosync: "))
        }

        MariaDBLibrary.initialize()
        let connection = Connection(configuration: database)
        do {
            try connection.connect()
        } catch let error as DatabaseError {
            let status = ExitStatus.forConnectFailure(error)
            let hint = switch status {
            case .permission where error.code == 1044:
                "the database refused the account access to database \(database.database) (TODOSYNC_DB_NAME, or the account's grant)"
            case .permission: "the database refused the account or its password (TODOSYNC_DB_USER, TODOSYNC_DB_PASSWORD / _FILE)"
            case .configuration: "the database server does not know this database (TODOSYNC_DB_NAME)"
            default: "the database could not be reached (TODOSYNC_DB_SOCKET, TODOSYNC_DB_HOST / _PORT / TODOSYNC_DB_HOSTS); retry once it is up"
            }
            ExitStatus.fail(status, "cannot open a database session (\(database)): \(error)\ntodosync: \(hint)")
        } catch {
            ExitStatus.fail(.temporary, "cannot open a database session (\(database)): \(error)")
        }

        let status: Migrator.Status
        do {
            status = try Migrator(connection: connection, directory: URL(fileURLWithPath: directory)).status()
        } catch let error as DatabaseError {
            ExitStatus.fail(error.isConnectionError ? .temporary : .failure, "cannot read the migration state: \(error)")
        } catch {
            ExitStatus.fail(.configuration, "migrations in \(directory): \(error)")
        }
        var mismatches = status.edited.map(\.description)
        if !status.pending.isEmpty {
            mismatches.append("\(status.pending.count) migration(s) pending (\(status.pending.map(\.name).joined(separator: ", "))): run `todosync migrate` (systemctl restart todosync-migrate.service)")
        }
        if !mismatches.isEmpty { ExitStatus.fail(.migrations, mismatches.joined(separator: "\ntodosync: ")) }
        print("configuration ok: \(database), \(status.applied.count) migrations applied, none pending or edited")
    }
}
