#!/usr/bin/env bash
# What the per-address connection cap costs (issue 34, item 2; docs/BENCHMARKS.md, "The connection
# cap"): the same responders behind two nginx instances rendered by scripts/stack.sh, one with the
# cap (its stream server in front of the http server: the default) and one without
# (TODOSYNC_ADDRESS_CONNECTIONS=0), measured alternately with wrk in one run on three routes:
# nginx alone (/__bench/nginx), the responder without the database (/__bench/fastcgi) and
# /healthz (the responder and one database round trip). Prints req/s per round and the medians'
# ratio. A measurement, not a test.
#
# Knobs: CAP_ROUNDS (5), CAP_SECONDS (5), CAP_CONNECTIONS (32, under the cap's 64),
#        CAP_STATE_DIR (.state/bench-cap), CAP_PORT (20080: +1 and +100 are used too)
set -euo pipefail
REPO_ROOT=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
cd "$REPO_ROOT"
ROUNDS=${CAP_ROUNDS:-5} SECONDS_EACH=${CAP_SECONDS:-5} CONNECTIONS=${CAP_CONNECTIONS:-32}
STATE=$(realpath -m "${CAP_STATE_DIR:-.state/bench-cap}")
PORT=${CAP_PORT:-20080}
command -v wrk >/dev/null || { echo "address_cap.sh: needs wrk (apt-get install wrk)" >&2; exit 1; }
export TODOSYNC_CONFIG=/dev/null TODOSYNC_STATE_DIR=$STATE TODOSYNC_HTTP_PORT=$PORT TODOSYNC_HTTPS_PORT=$((PORT + 1))
export TODOSYNC_BENCH_LOCATIONS=1 TODOSYNC_ENABLE_TEST_HOOKS=1 TODOSYNC_SKIP_BUILD=${CAP_SKIP_BUILD:-1} TODOSYNC_SKIP_DEPS=1
export TODOSYNC_LOG_REQUESTS=0
scripts/stack.sh up >"$STATE.log" 2>&1 || { tail -n 20 "$STATE.log" >&2; exit 1; }
socket_dir=$(scripts/stack.sh env | sed -n 's/^TODOSYNC_SOCKET_DIR=//p')
bare=$STATE-nocap
conf=$(TODOSYNC_STATE_DIR=$bare TODOSYNC_HTTP_PORT=$((PORT + 100)) TODOSYNC_HTTPS_PORT=$((PORT + 101)) \
    TODOSYNC_SOCKET_DIR=$socket_dir TODOSYNC_ADDRESS_CONNECTIONS=0 scripts/stack.sh nginx-config 2>>"$STATE.log")
nginx -p "$bare/nginx/" -c "$conf" -e "$bare/log/nginx-error.log" -g "daemon off;" &
bare_pid=$!
cleanup() { kill -QUIT "$bare_pid" 2>/dev/null || true; scripts/stack.sh down >>"$STATE.log" 2>&1 || true; }
trap cleanup EXIT
for _ in $(seq 50); do curl -sf "http://127.0.0.1:$((PORT + 100))/healthz" >/dev/null && break; sleep 0.1; done
declare -A results
for ((round = 1; round <= ROUNDS; round++)); do
    for route in /__bench/nginx /__bench/fastcgi /healthz; do
        for variant in cap nocap; do
            port=$PORT
            [[ $variant == nocap ]] && port=$((PORT + 100))
            rps=$(wrk -t2 -c"$CONNECTIONS" -d"${SECONDS_EACH}s" "http://127.0.0.1:$port$route" | awk '/Requests\/sec/ { print $2 }')
            results[$route:$variant]+="$rps "
            printf 'round %d %-18s %-6s %10s req/s\n' "$round" "$route" "$variant" "$rps"
        done
    done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
printf '%-18s %12s %12s %8s\n' route "cap (median)" "no cap" ratio
for route in /__bench/nginx /__bench/fastcgi /healthz; do
    with=$(median <<<"${results[$route:cap]}")
    without=$(median <<<"${results[$route:nocap]}")
    printf '%-18s %12.0f %12.0f %8.3f\n' "$route" "$with" "$without" "$(awk -v a="$with" -v b="$without" 'BEGIN { print a / b }')"
done
