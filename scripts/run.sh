#!/usr/bin/env bash
# Run the whole TodoSync stack in the foreground (deps, build, up; Ctrl-C stops it).
# Configuration: see the header of scripts/stack.sh.
set -euo pipefail
exec "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/stack.sh" run "$@"
