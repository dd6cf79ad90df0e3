#ifndef CBUILDINFO_H
#define CBUILDINFO_H

/// The git commit the binary was built from ("" when the build did not record one).
///
/// `scripts/stack.sh build` compiles a one-line object that defines
/// `todosync_build_commit_value` and links it (`-Xlinker`); a plain `swift build` links the
/// weak empty default instead. Only the link step sees the commit, so a new commit relinks the
/// binary without recompiling any module, and the same commit always gives the same bytes.
const char *todosync_build_commit(void);

#endif
