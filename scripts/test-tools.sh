#!/usr/bin/env bash
# Puts the two Go binaries the integration suite runs into .state/tools/ (scripts/test.sh calls
# this; a no-op once they are there):
#
#   promtool  `promtool check rules` and `promtool test rules` on docs/alert-rules.yml and
#             docs/alert-rules.test.yml (Tests/integration/test_alert_rules.py)
#   mtail     scripts/mtail/todosync-nginx.mtail run over real access logs in --one_shot mode
#             (Tests/integration/test_metrics_nginx.py)
#
# Each is taken from its Debian 12 package with `apt-get download` and `dpkg-deb`, binary only:
# installing `prometheus` for promtool would bring 96 MB, eleven JavaScript packages and a
# Prometheus server unit; the two .debs are 23 MB to fetch, 59 MB for the two binaries (static
# but for libc). A promtool or mtail already on PATH is used instead.
set -euo pipefail

REPO_ROOT=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
TOOLS=$REPO_ROOT/.state/tools
mkdir -p "$TOOLS"

as_root() { if ((EUID == 0)); then "$@"; else sudo "$@"; fi; }

for pair in prometheus:promtool mtail:mtail; do
    pkg=${pair%%:*} bin=${pair#*:}
    if [[ -x $TOOLS/$bin ]] && "$TOOLS/$bin" --version >/dev/null 2>&1; then
        continue
    fi
    if found=$(command -v "$bin" 2>/dev/null); then
        ln -sfn "$found" "$TOOLS/$bin"
        echo "test-tools: $bin: $found" >&2
        continue
    fi
    tmp=$(mktemp -d)
    # apt-get download runs as the caller; as root it warns that _apt cannot write to $tmp
    if ! (cd "$tmp" && apt-get download -q "$pkg" 2>/dev/null); then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
        (cd "$tmp" && apt-get download -q "$pkg")
    fi
    dpkg-deb --fsys-tarfile "$tmp/${pkg}"_*.deb | tar -x -C "$tmp" "./usr/bin/$bin"
    mv "$tmp/usr/bin/$bin" "$TOOLS/$bin.new"
    mv "$TOOLS/$bin.new" "$TOOLS/$bin"
    rm -rf "$tmp"
    echo "test-tools: $bin: $("$TOOLS/$bin" --version 2>&1 | head -n 1)" >&2
done
