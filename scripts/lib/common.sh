# shellcheck shell=bash
# What scripts/stack.sh and scripts/cluster.sh share: logging, paths, processes, packages, the
# responder binary. Sourced by both after they set SELF (the script) and REPO_ROOT; they set
# LOG_TAG (the word in front of each log line) before sourcing. Nothing here runs on its own.
# A function both scripts need goes here (or in a sibling lib/*.sh), not into one of them.
shopt -u patsub_replacement 2>/dev/null || true
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

log() { printf '[%s %s] %s\n' "$LOG_TAG" "$(date +%H:%M:%S)" "$*" >&2 || true; } # never fatal (see stack.sh's cmd_run)
die() { log "ERROR: $*"; exit 1; }

abspath() { realpath -m -- "$1"; }

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

require_cmd() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || die "'$c' not found (run: scripts/stack.sh deps)"
    done
}

as_root() {
    if ((EUID == 0)); then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root for: $* (not root and no sudo)"
    fi
}

show_tail() { # show_tail FILE [LINES]
    local file=$1 lines=${2:-30}
    if [[ -s $file ]]; then
        echo "----- last $lines lines of $file -----" >&2
        tail -n "$lines" "$file" >&2
        echo "-----" >&2
    fi
}

# --- the responder binary ------------------------------------------------------------------------

# The release build's responder: `todosync`, or with TODOSYNC_ENABLE_TEST_HOOKS=1 `todosync-test`
# (the same commands with the test hooks linked in; the shipping binary has none).
resolve_bin() {
    if [[ -z $TODOSYNC_BIN ]]; then
        local bin_dir="" name=todosync
        if command -v swift >/dev/null 2>&1; then
            bin_dir=$(swift build -c release --show-bin-path 2>/dev/null || true)
        fi
        [[ ${TODOSYNC_ENABLE_TEST_HOOKS:-0} == 1 ]] && name=todosync-test
        TODOSYNC_BIN=${bin_dir:-$REPO_ROOT/.build/release}/$name
    fi
    TODOSYNC_BIN=$(abspath "$TODOSYNC_BIN")
    export TODOSYNC_BIN
}

require_bin() {
    resolve_bin
    [[ -x $TODOSYNC_BIN ]] || die "responder binary not found at $TODOSYNC_BIN (run: scripts/stack.sh build)"
}

# --- processes -----------------------------------------------------------------------------------

read_pidfile() { # prints the pid in FILE, if any
    local pid=""
    [[ -f $1 ]] && read -r pid 2>/dev/null <"$1" || true
    if is_uint "$pid"; then printf '%s\n' "$pid"; fi
}

# True when PID is a live (non-zombie) process whose command line contains PATTERN.
# The pattern check guards against stale pid files and pid reuse.
proc_matches() {
    local pid=$1 pattern=$2 cmdline
    [[ -n $pid && -r /proc/$pid/cmdline ]] || return 1
    cmdline=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
    [[ -n $cmdline && $cmdline == *"$pattern"* ]]
}

pidfile_process() { # pidfile_process FILE PATTERN: prints FILE's pid if proc_matches it
    local pid
    pid=$(read_pidfile "$1")
    if proc_matches "$pid" "$2"; then printf '%s\n' "$pid"; fi
}

# wait_gone SECONDS PATTERN PID...: wait until none of the pids matches; 0 if all gone.
wait_gone() {
    local timeout=$1 pattern=$2 deadline pid alive
    shift 2
    deadline=$((SECONDS + timeout))
    while :; do
        alive=0
        for pid in "$@"; do
            if proc_matches "$pid" "$pattern"; then alive=1; fi
        done
        ((alive)) || return 0
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

# wait_for SECONDS WHAT LOG CMD...: runs CMD every 0.1 s until it succeeds; after SECONDS, shows
# the end of LOG and dies saying WHAT (what did not happen).
wait_for() {
    local deadline=$((SECONDS + $1)) what=$2 logfile=$3
    shift 3
    until "$@"; do
        if ((SECONDS >= deadline)); then
            show_tail "$logfile"
            die "$what"
        fi
        sleep 0.1
    done
}

# wait_http_200 URL SECONDS [LOG...]: until URL answers 200; after SECONDS, the end of each LOG,
# and die.
wait_http_200() {
    local url=$1 timeout=$2 code="" deadline=$(($2 + SECONDS)) file
    shift 2
    while :; do
        code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$url" 2>/dev/null) || true
        [[ $code == 200 ]] && return 0
        if ((SECONDS >= deadline)); then
            for file in "$@"; do show_tail "$file" 20; done
            die "$url did not answer 200 within ${timeout}s (last status: ${code:-none})"
        fi
        sleep 0.2
    done
}

# Closes every inherited descriptor above 2 of this (sub)shell: a daemon must not keep its
# caller's pipes or the state lock open.
close_inherited_fds() {
    local fd
    for fd in /proc/"$BASHPID"/fd/*; do
        fd=${fd##*/}
        if [[ $fd =~ ^[0-9]+$ ]] && ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
}

# Run CMD with stdin from /dev/null, output appended to LOG, in a new session (so terminal signals
# never reach it), with every inherited descriptor above 2 closed (a daemon must not keep our
# caller's pipes or the state lock open). Background: `spawn_detached LOG CMD... &` ($! is CMD).
spawn_detached() {
    local logfile=$1
    shift
    close_inherited_fds
    exec setsid "$@" </dev/null >>"$logfile" 2>&1
}

# --- packages ------------------------------------------------------------------------------------

# apt_install_missing PRESENT PKG...: installs the Debian packages that are not installed (apt-get
# update first), logging "deps: PRESENT" when none is missing. A policy-rc.d keeps package scripts
# from starting system-wide services (mariadb, nginx, redis) meanwhile.
apt_install_missing() {
    local present=$1 missing=() pkg
    shift
    for pkg in "$@"; do
        if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
            missing+=("$pkg")
        fi
    done
    if ((${#missing[@]} == 0)); then
        log "deps: $present"
        return 0
    fi
    log "deps: installing ${missing[*]}"
    local policy=/usr/sbin/policy-rc.d created_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' | as_root tee "$policy" >/dev/null
        as_root chmod 755 "$policy"
        created_policy=1
    fi
    local rc=0
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q || rc=$?
    if ((rc == 0)); then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            "${missing[@]}" || rc=$?
    fi
    ((created_policy)) && as_root rm -f "$policy"
    ((rc == 0)) || die "apt-get failed (exit $rc)"
}
