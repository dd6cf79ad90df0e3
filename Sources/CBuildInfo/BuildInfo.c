#include "CBuildInfo.h"

// Defined weakly in DefaultCommit.c (a separate translation unit, so the compiler cannot fold
// the empty default into this function); a linked strong definition wins.
extern const char todosync_build_commit_value[];

const char *todosync_build_commit(void) {
    return todosync_build_commit_value;
}
