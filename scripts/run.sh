#!/usr/bin/env bash
# Run the whole TodoSync stack in the foreground (deps, build, up; Ctrl-C stops it).
# Configuration: docs/DEVELOPMENT.md "Configuration" (the stack's variables; `todosync config` for the binary's).
set -euo pipefail
exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/stack.sh" run "$@"
