# Sourced by bench/client.sh and bench/client-snapshot.sh: the knobs they share, the build, a
# private stack (torn down on exit) and one account seeded through push. The caller sets
# REPO_ROOT, CLIENT_BENCH_NAME (its state dir under .state) and its default ports
# (CLIENT_BENCH_DEFAULT_HTTP_PORT, CLIENT_BENCH_DEFAULT_HTTPS_PORT). Leaves: TAGS, TODOS, RUNS,
# PAGE, BASE, STACK, WORK, CLIENT, EMAIL, PASSWORD, RECORDS, and TODOSYNC_SERVER /
# TODOSYNC_PASSWORD exported for the client.
cd "$REPO_ROOT"

TAGS=${CLIENT_BENCH_TAGS:-635}
TODOS=${CLIENT_BENCH_TODOS:-64000}
RUNS=${CLIENT_BENCH_RUNS:-3}
PAGE=${CLIENT_BENCH_PAGE_SIZE:-1000}
export TODOSYNC_CONFIG=/dev/null
export TODOSYNC_STATE_DIR=$(realpath -m "${CLIENT_BENCH_STATE_DIR:-.state/$CLIENT_BENCH_NAME}")
export TODOSYNC_HTTP_PORT=${CLIENT_BENCH_HTTP_PORT:-$CLIENT_BENCH_DEFAULT_HTTP_PORT}
export TODOSYNC_HTTPS_PORT=${CLIENT_BENCH_HTTPS_PORT:-$CLIENT_BENCH_DEFAULT_HTTPS_PORT}
export TODOSYNC_AUTH_RATE=1000 TODOSYNC_AUTH_BURST=1000 TODOSYNC_ENABLE_TEST_HOOKS=0
BASE=http://127.0.0.1:$TODOSYNC_HTTP_PORT
STACK=scripts/stack.sh
WORK=$TODOSYNC_STATE_DIR/client
command -v /usr/bin/time >/dev/null || apt-get install -y -qq time >/dev/null

"$STACK" deps >/dev/null
if [[ ${CLIENT_BENCH_SKIP_BUILD:-0} != 1 ]]; then
    "$STACK" build
    swift build -c release --product todosync-client --quiet
fi
CLIENT=$(swift build -c release --show-bin-path)/todosync-client
trap '"$STACK" down >/dev/null 2>&1 || true' EXIT
"$STACK" down >/dev/null 2>&1 || true
rm -rf "$TODOSYNC_STATE_DIR"
"$STACK" up >/dev/null
mkdir -p "$WORK"

EMAIL=bench-$RANDOM$RANDOM@example.com
PASSWORD='client bench password'
t0=$(date +%s.%N)
RECORDS=$(python3 bench/client_seed.py "$BASE" "$EMAIL" "$PASSWORD" "$TAGS" "$TODOS")
printf 'seeded %d records (%d tags, %d todos, the rest daily stats) through push in %.1f s\n' \
    "$RECORDS" "$TAGS" "$TODOS" "$(echo "$(date +%s.%N) - $t0" | bc)"
export TODOSYNC_SERVER=$BASE TODOSYNC_PASSWORD=$PASSWORD
