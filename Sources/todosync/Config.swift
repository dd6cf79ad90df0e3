import ArgumentParser

/// `todosync config`: the effective configuration, as the other commands see it.
struct Config: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the effective configuration: defaults, then the config file ($TODOSYNC_CONFIG), then the environment.",
        discussion: "Each line is NAME=VALUE and its source; secrets print as <redacted>. Other TODOSYNC_* variables that are set are listed last (the dev stack's own, or misspellings).")

    @Flag(name: .shortAndLong, help: "Also print what each variable means.")
    var verbose = false

    @Flag(help: "Print only NAME=VALUE lines of the variables todosync reads, secrets left out (for scripts).")
    var assignments = false

    @Flag(help: "Check every value and exit: 0 and 'configuration ok' when valid, else 78 (EX_CONFIG) with each problem on stderr.")
    var check = false

    func run() {
        let configuration = Environment(validating: check).configuration
        if check {
            print("configuration ok")
            return
        }
        print(assignments ? configuration.renderAssignments() : configuration.render(verbose: verbose), terminator: "")
    }
}
