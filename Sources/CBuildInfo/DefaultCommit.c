// The commit of a build that recorded none. scripts/stack.sh build links a strong definition.
__attribute__((weak)) const char todosync_build_commit_value[] = "";
