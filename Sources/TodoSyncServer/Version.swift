import CBuildInfo

/// The release version of the `todosync` binary: the one place it is written.
let todosyncVersion = "1.0.0"

/// `todosync --version`: the version, and the git commit when the build recorded one
/// (`scripts/stack.sh build` does; a plain `swift build` does not), e.g. `1.0.0 (commit 5e9fee6a1b2c)`.
var todosyncVersionDescription: String {
    let commit = String(cString: todosync_build_commit())
    return commit.isEmpty ? todosyncVersion : "\(todosyncVersion) (commit \(commit))"
}
