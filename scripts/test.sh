#!/usr/bin/env bash
# Run every test: `swift test` (unit tests; DB-backed ones use a private MariaDB) and the pytest
# integration suite in Tests/integration against a private stack (nginx + responders + MariaDB).
#
# Works on a fresh Debian 12 machine (installs what is missing) and next to a running
# scripts/run.sh: the test stack has its own state dir, ports and unix-socket-only database.
# The stack is always torn down at the end; exit status is non-zero if any step or suite failed.
#
# Knobs (all optional; the caller's other TODOSYNC_* variables are ignored, for repeatability):
#   TODOSYNC_TEST_STATE_DIR       .state/test   wiped at the start unless TODOSYNC_TEST_KEEP_STATE=1
#   TODOSYNC_TEST_HTTP_PORT       18080
#   TODOSYNC_TEST_HTTPS_PORT      18443
#   TODOSYNC_TEST_RESPONDERS      2             responder processes in the test stack
#   TODOSYNC_TEST_KEEP_STATE      0
#   TODOSYNC_TEST_PYTHON          python3       interpreter used to create .state/venv
#   TODOSYNC_TEST_SWIFT_TIMEOUT   1200          seconds for `swift test` (includes its debug build)
#   TODOSYNC_TEST_PYTEST_TIMEOUT  900           seconds for the whole integration suite
#   TODOSYNC_TEST_CASE_TIMEOUT    120           seconds per integration test (pytest-timeout)
#   TODOSYNC_TEST_SKIP_SWIFT      0             1: skip `swift test`
#   TODOSYNC_TEST_SKIP_BUILD      0             1: skip `swift build -c release`
#   TODOSYNC_TEST_BIN             (built)       responder binary to test instead of the release build
#   TODOSYNC_TEST_PYTEST_ARGS     (empty)       extra pytest arguments (shell-quoted), e.g. "-k 'auth or tags' -x"
#   TODOSYNC_TEST_SWIFT_FILTER    (empty)       `swift test --filter` pattern (while iterating: the client's stack tests
#                                               against the test stack without the other unit tests)
#
# Cluster (scripts/cluster.sh: Galera nodes and responder hosts in network namespaces):
#   ./scripts/test.sh --cluster   the whole integration suite against a 3-node Galera cluster with
#                                 2 responder hosts, plus the cluster tests (no single stack, no swift test)
#   without the flag, after the suites above: a short cluster scenario (test_cluster.py: topology,
#   allow-list, one user's writers on several nodes, read-your-writes; then test_cluster_faults.py:
#   a Galera node killed and rejoining under load from 16 devices), a few minutes
#   TODOSYNC_TEST_CLUSTER_FAULTS_SHORT  1      0: the short scenario without test_cluster_faults.py
#   TODOSYNC_TEST_SKIP_CLUSTER          0      1: skip the short cluster scenario
#   TODOSYNC_TEST_CLUSTER_HTTP_PORT     HTTP port + 100 (and HTTPS port + 100): the cluster's front
#   TODOSYNC_TEST_CLUSTER_NET           10.213.0   the cluster's private /24 (each run has its own
#                                       bridge; a different one keeps concurrent runs apart in logs)
#   TODOSYNC_TEST_CLUSTER_SOAK_SECONDS  0      longer fault soak: node and host failures in cycles
#   TODOSYNC_TEST_CLUSTER_PARTITION_SECONDS 35 the history check under a partition (test_cluster_partitions.py;
#                                       0 skips it); _KIND and _SEED pick the nemesis and its seed
#   TODOSYNC_TEST_CLUSTER_DEVICES       16 short / 32 --cluster
#   TODOSYNC_TEST_CLUSTER_FRONTS        2 short / 1 --cluster: nginx fronts; 2 adds the second
#                                       front and the private redis-server of nchan's Redis mode
#                                       (test_cluster.py: a write through front 1 pokes streams on both)
#
# The suites get:
#   TODOSYNC_TEST_BASE_URL   http://127.0.0.1:18080
#   TODOSYNC_TEST_HTTPS_URL  https://127.0.0.1:18443
#   TODOSYNC_TEST_CA_CERT    the stack's self-signed certificate (for verify=...)
#   TODOSYNC_TEST_STACK      path of a command that runs scripts/stack.sh with the test stack's
#                            environment: "$TODOSYNC_TEST_STACK" db-stop | db-start | responder-pids ...
#   TODOSYNC_TEST_DB_SOCKET  MariaDB unix socket; user root by unix_socket (so the suite runs as OS root)
#   TODOSYNC_TEST_STATE_DIR  the test stack's state dir (logs in log/)
#   TODOSYNC_TEST_TOOLS      .state/tools: promtool and mtail (scripts/test-tools.sh)
set -euo pipefail

REPO_ROOT=$(dirname "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")")
cd "$REPO_ROOT"

# Hermetic: forget the caller's stack configuration, keep only TODOSYNC_TEST_* knobs.
while IFS= read -r _v; do
    [[ $_v == TODOSYNC_TEST_* ]] || unset "$_v"
done < <(compgen -e | grep '^TODOSYNC_' || true)
unset _v

STATE=$(realpath -m "${TODOSYNC_TEST_STATE_DIR:-.state/test}")
HTTP_PORT=${TODOSYNC_TEST_HTTP_PORT:-18080}
HTTPS_PORT=${TODOSYNC_TEST_HTTPS_PORT:-18443}
RESPONDERS=${TODOSYNC_TEST_RESPONDERS:-2}
KEEP_STATE=${TODOSYNC_TEST_KEEP_STATE:-0}
PYTHON=${TODOSYNC_TEST_PYTHON:-python3}
SWIFT_TIMEOUT=${TODOSYNC_TEST_SWIFT_TIMEOUT:-1200}
PYTEST_TIMEOUT=${TODOSYNC_TEST_PYTEST_TIMEOUT:-900}
CASE_TIMEOUT=${TODOSYNC_TEST_CASE_TIMEOUT:-120}
SKIP_SWIFT=${TODOSYNC_TEST_SKIP_SWIFT:-0}
SKIP_BUILD=${TODOSYNC_TEST_SKIP_BUILD:-0}
PYTEST_ARGS=${TODOSYNC_TEST_PYTEST_ARGS:-}
VENV=$REPO_ROOT/.state/venv
REQUIREMENTS=$REPO_ROOT/Tests/integration/requirements.txt
STACK_SH=$REPO_ROOT/scripts/stack.sh

case $STATE in
    / | "$REPO_ROOT" | "$REPO_ROOT/.state") echo "test.sh: refusing to use $STATE as state dir" >&2; exit 2 ;;
esac

export TODOSYNC_CONFIG=/dev/null
export TODOSYNC_STATE_DIR=$STATE
export TODOSYNC_HTTP_PORT=$HTTP_PORT
export TODOSYNC_HTTPS_PORT=$HTTPS_PORT
export TODOSYNC_RESPONDERS=$RESPONDERS
export TODOSYNC_ENABLE_TEST_HOOKS=1
export TODOSYNC_AUTH_RATE=50
export TODOSYNC_AUTH_BURST=100
# Tests of one user's concurrent writes send up to 24 requests at once with one token; the
# per-token limit (nginx) and the per-account one (responders) are tested on a second nginx and
# responders of their own (test_hardening_account_limits.py).
export TODOSYNC_ACCOUNT_CONCURRENCY=32
export TODOSYNC_ACCOUNT_IN_FLIGHT=32
# No CPU share per account either: one test's heavy pushes right after another test's requests
# would wait or get 429 for it. test_hardening_fairness.py tests it on a responder of its own.
export TODOSYNC_ACCOUNT_CPU_SHARE_MS=0
if [[ -n ${TODOSYNC_TEST_BIN:-} ]]; then export TODOSYNC_BIN=$TODOSYNC_TEST_BIN; fi

ensure_venv() {
    if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
        rm -rf "$VENV"
        "$PYTHON" -m venv "$VENV"
    fi
    local want have=""
    want=$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)
    [[ -f $VENV/.requirements.sha256 ]] && have=$(<"$VENV/.requirements.sha256")
    if [[ $want != "$have" ]]; then
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQUIREMENTS"
        printf '%s\n' "$want" >"$VENV/.requirements.sha256"
    else
        echo "venv: requirements already installed" >&2
    fi
}

# `test.sh __venv` is this script calling itself for a bounded venv step.
if [[ ${1:-} == __venv ]]; then
    ensure_venv
    exit 0
fi

# --- cluster mode (scripts/cluster.sh) ---------------------------------------------------------
CLUSTER_ONLY=0
[[ ${1:-} == --cluster ]] && CLUSTER_ONLY=1
CLUSTER_HTTP_PORT=${TODOSYNC_TEST_CLUSTER_HTTP_PORT:-$((HTTP_PORT + 100))}
CLUSTER_HTTPS_PORT=${TODOSYNC_TEST_CLUSTER_HTTPS_PORT:-$((HTTPS_PORT + 100))}

START=$SECONDS
SUMMARY=()
FAILED=0
CHILD=""
OWN_LOCK=0

say() { printf '\n=== test.sh: %s\n' "$*" >&2; }
note() { # note NAME STATUS SECONDS
    SUMMARY+=("$(printf '  %-14s %-40s %5ss' "$1" "$2" "$3")")
}

# run_bounded SECONDS CMD...: run CMD under `timeout` in the background so that SIGINT/SIGTERM
# to this script can be forwarded to it; returns CMD's status (124 on timeout).
run_bounded() {
    local limit=$1 rc=0
    shift
    timeout --kill-after=30 "$limit" "$@" &
    CHILD=$!
    wait "$CHILD" || rc=$?
    # interrupted by a trapped signal: wait for the child to finish
    while kill -0 "$CHILD" 2>/dev/null; do
        rc=0
        wait "$CHILD" || rc=$?
    done
    CHILD=""
    return "$rc"
}

# Test counts of both runners, from their own closing lines (XCTest's "Executed N tests, with F
# failures" for all tests; pytest's "N passed, M failed").
COUNT_DIR=$(mktemp -d)
count_tests() {
    local passed=0 failed=0 line n f
    sleep 0.2 # let the tee processes flush
    line=$(grep -Eo 'Executed [0-9]+ tests?, with [0-9]+ failures?' "$COUNT_DIR/swift.log" 2>/dev/null | tail -n 1 || true)
    if [[ $line =~ Executed\ ([0-9]+)\ tests?,\ with\ ([0-9]+) ]]; then
        n=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]}
        passed=$((passed + n - f)) failed=$((failed + f))
    fi
    # one closing line per pytest run (the integration suite, then the cluster scenario)
    while IFS= read -r line; do
        [[ $line =~ ([0-9]+)\ passed ]] && passed=$((passed + BASH_REMATCH[1]))
        [[ $line =~ ([0-9]+)\ failed ]] && failed=$((failed + BASH_REMATCH[1]))
        [[ $line =~ ([0-9]+)\ errors? ]] && failed=$((failed + BASH_REMATCH[1]))
    done < <(grep -E '^=+ .*(passed|failed).* in [0-9.]+s' "$COUNT_DIR/pytest.log" 2>/dev/null || true)
    printf 'total: %d passed, %d failed\n' "$passed" "$failed"
}

summary() {
    printf '\n=== test.sh summary (%ss) ===\n' "$((SECONDS - START))"
    local line
    for line in "${SUMMARY[@]}"; do printf '%s\n' "$line"; done
    if ((FAILED)); then
        printf '=== test.sh: FAILED ===\n'
    else
        printf '=== test.sh: OK ===\n'
    fi
    count_tests
    rm -rf "$COUNT_DIR"
}

teardown() {
    local rc=$?
    trap - EXIT INT TERM
    if [[ -n $CHILD ]]; then kill -TERM "$CHILD" 2>/dev/null || true; wait "$CHILD" 2>/dev/null || true; fi
    if ((OWN_LOCK)); then # never tear down a stack that another test run owns
        say "tearing down the test stack"
        timeout 120 "$STACK_SH" down || echo "test.sh: WARNING: stack down failed" >&2
    fi
    summary
    if ((rc == 0 && FAILED)); then rc=1; fi
    exit "$rc"
}
on_signal() {
    echo "test.sh: interrupted" >&2
    FAILED=1
    exit 130
}
trap teardown EXIT
trap on_signal INT TERM

# Only one test run per state dir at a time (the lock is released when this script exits).
mkdir -p "$(dirname "$STATE")"
exec 8>>"$STATE.lock"
if ! flock -n 8; then
    echo "test.sh: another test run is using $STATE" >&2
    FAILED=1
    exit 1
fi
OWN_LOCK=1

# A step that must succeed for the rest to make sense: stop with a summary when it fails.
step() { # step NAME SECONDS CMD...
    local name=$1 limit=$2 t0=$SECONDS rc=0
    shift 2
    say "$name"
    run_bounded "$limit" "$@" || rc=$?
    if ((rc != 0)); then
        note "$name" "FAILED (exit $rc$( ((rc == 124)) && echo ', timed out'))" "$((SECONDS - t0))"
        FAILED=1
        exit 1
    fi
    note "$name" "ok" "$((SECONDS - t0))"
}

SELF=$(readlink -f "${BASH_SOURCE[0]}")

step deps 600 "$STACK_SH" deps
step venv 300 "$SELF" __venv
step tools 300 "$REPO_ROOT/scripts/test-tools.sh" # promtool and mtail, binaries only
export TODOSYNC_TEST_TOOLS=$REPO_ROOT/.state/tools
if [[ $SKIP_BUILD == 1 ]]; then note build "skipped (TODOSYNC_TEST_SKIP_BUILD)" 0; else step build 1200 "$STACK_SH" build; fi

# --- cluster (scripts/cluster.sh) ----------------------------------------------------------------
# cluster_suite short|full: brings a cluster up under its own state dir, namespace prefix and
# ports, runs pytest against it and tears it down.
cluster_suite() {
    local mode=$1 t0=$SECONDS rc=0 args=()
    if [[ $mode == short ]]; then
        # The topology tests, then one Galera node killed under load (TODOSYNC_TEST_CLUSTER_FAULTS_SHORT=0
        # leaves the fault scenario out while iterating on something else).
        args=(Tests/integration/test_cluster.py)
        [[ ${TODOSYNC_TEST_CLUSTER_FAULTS_SHORT:-1} == 1 ]] && args+=(Tests/integration/test_cluster_faults.py)
        # issue 38's history check under a moving partition (TODOSYNC_TEST_CLUSTER_PARTITION_SECONDS, 35)
        args+=(Tests/integration/test_cluster_partitions.py)
    else
        args=(Tests/integration)
        [[ -n $PYTEST_ARGS ]] && eval "args+=($PYTEST_ARGS)"
    fi
    say "cluster ($mode): 3 Galera nodes, 2 responder hosts, front 1 on 127.0.0.1:$CLUSTER_HTTP_PORT"
    run_bounded 1800 env TODOSYNC_CLUSTER_STATE_DIR="$STATE-cluster" TODOSYNC_CLUSTER_PREFIX="tsx$((CLUSTER_HTTP_PORT % 100000))" \
        TODOSYNC_CLUSTER_HTTP_PORT="$CLUSTER_HTTP_PORT" TODOSYNC_CLUSTER_HTTPS_PORT="$CLUSTER_HTTPS_PORT" \
        TODOSYNC_TEST_CLUSTER_DEVICES="${TODOSYNC_TEST_CLUSTER_DEVICES:-$([[ $mode == short ]] && echo 16 || echo 32)}" \
        TODOSYNC_CLUSTER_FRONTS="${TODOSYNC_TEST_CLUSTER_FRONTS:-$([[ $mode == short ]] && echo 2 || echo 1)}" \
        TODOSYNC_CLUSTER_NET="${TODOSYNC_TEST_CLUSTER_NET:-10.213.0}" \
        TODOSYNC_TEST_CLUSTER_FAULTS="${TODOSYNC_TEST_CLUSTER_FAULTS:-$([[ $mode == short ]] && echo node || echo node,app)}" \
        "$REPO_ROOT/scripts/cluster.sh" test "$VENV/bin/python" "${args[@]}" -ra --timeout="$((CASE_TIMEOUT * 5))" \
        > >(tee -a "$COUNT_DIR/pytest.log") 2>&1 || rc=$?
    if ((rc == 0)); then
        note "cluster $mode" "passed" "$((SECONDS - t0))"
    else
        FAILED=1
        note "cluster $mode" "FAILED (exit $rc$( ((rc == 124)) && echo ', timed out'))" "$((SECONDS - t0))"
    fi
}
if ((CLUSTER_ONLY)); then
    step "cluster deps" 600 "$REPO_ROOT/scripts/cluster.sh" deps
    cluster_suite full
    exit 0
fi

# --- the test stack ------------------------------------------------------------------------------
say "starting the test stack ($STATE, http :$HTTP_PORT, https :$HTTPS_PORT)"
t0=$SECONDS
timeout 120 "$STACK_SH" down >/dev/null 2>&1 || true # leftovers of an interrupted run
if [[ $KEEP_STATE != 1 ]]; then
    rm -rf "$STATE"
fi
mkdir -p "$STATE"

# The command the suites use to drive this stack: stack.sh with the test configuration.
STACK_ENV=$("$STACK_SH" env)
export TODOSYNC_BIN=${TODOSYNC_BIN:-$(sed -n 's/^TODOSYNC_BIN=//p' <<<"$STACK_ENV")} # resolved once
STACK_CMD=$STATE/stack
{
    echo '#!/usr/bin/env bash'
    echo '# Generated by scripts/test.sh: scripts/stack.sh with the test stack configuration.'
    echo 'set -euo pipefail'
    echo 'while IFS= read -r v; do [[ $v == TODOSYNC_TEST_* ]] || unset "$v"; done < <(compgen -e | grep "^TODOSYNC_" || true)'
    # only what this script set: the stack and the binary supply their own defaults
    while IFS= read -r v; do printf 'export %s=%q\n' "$v" "${!v}"; done < <(compgen -e | grep '^TODOSYNC_' | grep -v '^TODOSYNC_TEST_')
    printf 'exec %q "$@"\n' "$STACK_SH"
} >"$STACK_CMD"
chmod +x "$STACK_CMD"

DB_SOCKET=$(sed -n 's/^TODOSYNC_DB_SOCKET=//p' <<<"$STACK_ENV")
export TODOSYNC_TEST_BASE_URL=http://127.0.0.1:$HTTP_PORT
export TODOSYNC_TEST_HTTPS_URL=https://127.0.0.1:$HTTPS_PORT
export TODOSYNC_TEST_CA_CERT=$STATE/tls/cert.pem
export TODOSYNC_TEST_STACK=$STACK_CMD
export TODOSYNC_TEST_DB_SOCKET=$DB_SOCKET
export TODOSYNC_TEST_STATE_DIR=$STATE

STACK_UP=1
if run_bounded 300 "$STACK_CMD" up; then
    note "stack up" "ok" "$((SECONDS - t0))"
else
    STACK_UP=0
    FAILED=1
    note "stack up" "FAILED" "$((SECONDS - t0))"
fi

# --- swift test ----------------------------------------------------------------------------------
if [[ $SKIP_SWIFT == 1 ]]; then
    note "swift test" "skipped (TODOSYNC_TEST_SKIP_SWIFT)" 0
else
    say "swift test (TODOSYNC_TEST_DB_SOCKET=$DB_SOCKET)"
    t0=$SECONDS
    rc=0
    # XCTest only: the package has no Swift Testing tests, whose "0 tests" line would mislead.
    filter=()
    [[ -n ${TODOSYNC_TEST_SWIFT_FILTER:-} ]] && filter=(--filter "$TODOSYNC_TEST_SWIFT_FILTER")
    run_bounded "$SWIFT_TIMEOUT" swift test --disable-swift-testing "${filter[@]}" > >(tee "$COUNT_DIR/swift.log") 2>&1 || rc=$?
    if ((rc == 0)); then
        note "swift test" "passed" "$((SECONDS - t0))"
    else
        FAILED=1
        note "swift test" "FAILED (exit $rc$( ((rc == 124)) && echo ', timed out'))" "$((SECONDS - t0))"
    fi
fi

# --- integration tests ---------------------------------------------------------------------------
if ((!STACK_UP)); then
    note "integration" "not run (stack did not start)" 0
else
    say "pytest Tests/integration against $TODOSYNC_TEST_BASE_URL"
    t0=$SECONDS
    rc=0
    extra_args=()
    [[ -n $PYTEST_ARGS ]] && eval "extra_args=($PYTEST_ARGS)"
    run_bounded "$PYTEST_TIMEOUT" "$VENV/bin/python" -m pytest Tests/integration -ra \
        --timeout="$CASE_TIMEOUT" "${extra_args[@]}" > >(tee "$COUNT_DIR/pytest.log") 2>&1 || rc=$?
    case $rc in
        0) note "integration" "passed" "$((SECONDS - t0))" ;;
        5) note "integration" "no tests collected" "$((SECONDS - t0))" ;;
        *)
            FAILED=1
            note "integration" "FAILED (exit $rc$( ((rc == 124)) && echo ', timed out'))" "$((SECONDS - t0))"
            ;;
    esac
fi

# --- short cluster scenario (scripts/cluster.sh) -------------------------------------------------
if [[ ${TODOSYNC_TEST_SKIP_CLUSTER:-0} == 1 ]]; then
    note "cluster short" "skipped (TODOSYNC_TEST_SKIP_CLUSTER)" 0
elif ((EUID != 0)); then
    note "cluster short" "skipped (network namespaces need root)" 0
else
    step "cluster deps" 600 "$REPO_ROOT/scripts/cluster.sh" deps
    cluster_suite short
fi

exit 0
