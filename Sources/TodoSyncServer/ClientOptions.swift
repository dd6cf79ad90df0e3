import ArgumentParser
import MariaDB

/// `todosync client-options`: the database account as a MariaDB client option file, so that
/// `mariadb-dump` and `mariadb` (todosync-backup) reach the same server as the same account as the
/// responders, from the same configuration, without a second parser of it.
struct ClientOptions: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client-options",
        abstract: "Print a MariaDB client option file for the database account (it holds the password).",
        discussion: """
            A [client] group with the socket (or host and port: the first of TODOSYNC_DB_HOSTS), the user \
            and the password the other commands use, for `mariadb-dump --defaults-extra-file=FILE`. \
            todosync-backup writes it to a private temporary file.
            """)

    func run() throws {
        print(try Environment().database.clientOptionFile, terminator: "")
    }
}

extension ConnectionConfiguration {
    /// Values are double-quoted with `\` and `"` escaped, so that a `#` in a password is not a
    /// comment: the option file reader strips the quotes and reads `\\` and `\"` back.
    var clientOptionFile: String {
        func quoted(_ value: String) -> String {
            let escaped = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            return "\"" + escaped + "\""
        }
        var lines = ["# MariaDB client options of todosync's database account (todosync client-options).", "[client]"]
        if let unixSocket {
            lines.append("socket=\(quoted(unixSocket))")
        } else {
            lines += ["host=\(quoted(host))", "port=\(port)", "protocol=TCP"]
        }
        lines += ["user=\(quoted(user))", "password=\(quoted(password))"]
        return lines.joined(separator: "\n") + "\n"
    }
}
