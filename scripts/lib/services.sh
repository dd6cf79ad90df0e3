# shellcheck shell=bash
# The dev stack's daemons as runit services (scripts/lib/common.sh first). The caller sets STATE,
# LOG_DIR, PID_DIR and TODOSYNC_STOP_TIMEOUT, and defines service_pattern NAME (a string in that
# daemon's command line). scripts/stack.sh's mariadb, responder-N and nginx run this way.

# Each daemon is a runit service in <state>/sv/NAME (mariadb, responder-N, nginx): runsv (Debian's
# runit) runs ./run, restarts it when it exits (at most once a second), and `sv` stops it with
# one SIGTERM (nginx: QUIT, graceful), SIGKILL after TODOSYNC_STOP_TIMEOUT. Production: systemd.
service_dir() { printf '%s/sv/%s\n' "$STATE" "$1"; }

runsv_pid() { pidfile_process "$PID_DIR/runsv-$1.pid" "runsv $(service_dir "$1")"; }

service_pid() { pidfile_process "$(service_dir "$1")/supervise/pid" "$(service_pattern "$1")"; } # the daemon's own pid, as runsv records it

# write_service NAME CMD...: ./run execs CMD, its output appended to <log>/NAME.log; ./finish
# logs each exit there.
write_service() {
    local name=$1 dir log
    shift
    dir=$(service_dir "$name")
    log=$(printf '%q' "$LOG_DIR/$name.log")
    mkdir -p "$dir"
    cat >"$dir/run.tmp" <<RUN
#!/bin/bash
exec </dev/null >>$log 2>&1
# Supervisor lines are JSON like the daemon's own (one schema for every line: issue 34, item 10).
echo "{\"ts\":\"\$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)\",\"level\":\"notice\",\"logger\":\"runsv\",\"msg\":\"starting\",\"service\":\"$name\"}"
exec $(printf '%q ' "$@")
RUN
    cat >"$dir/finish.tmp" <<FINISH
#!/bin/bash
echo "{\"ts\":\"\$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)\",\"level\":\"notice\",\"logger\":\"runsv\",\"msg\":\"exited\",\"service\":\"$name\",\"exit_code\":\$1,\"wait_status\":\$2}" >>$log
FINISH
    chmod 755 "$dir/run.tmp" "$dir/finish.tmp"
    mv -f "$dir/run.tmp" "$dir/run"
    mv -f "$dir/finish.tmp" "$dir/finish"
}

start_service() { # NAME: runsv for its dir, unless one runs
    [[ -z $(runsv_pid "$1") ]] || return 0
    stop_services "$1" # a daemon left by a killed runsv would hold its socket
    (spawn_detached "$LOG_DIR/$1.log" runsv "$(service_dir "$1")") &
    echo "$!" >"$PID_DIR/runsv-$1.pid"
}

stop_services() { # NAME...: the daemons stop (no restart) and their runsv exit
    local name pid dirs=() kids=() entry
    for name in "$@"; do
        pid=$(service_pid "$name")
        [[ -n $pid ]] && kids+=("$pid:$(service_pattern "$name")")
        if [[ -n $(runsv_pid "$name") ]]; then
            dirs+=("$(service_dir "$name")")
        elif [[ -n $pid ]]; then
            kill -TERM "$pid" 2>/dev/null || true # orphaned: its runsv is gone
        fi
    done
    ((${#dirs[@]} + ${#kids[@]})) || return 0
    log "stopping $*"
    ((${#dirs[@]} == 0)) || sv -w "$TODOSYNC_STOP_TIMEOUT" force-shutdown "${dirs[@]}" >/dev/null 2>&1 ||
        log "not stopped within ${TODOSYNC_STOP_TIMEOUT}s: SIGKILL sent"
    for entry in "${kids[@]}"; do
        wait_gone "$TODOSYNC_STOP_TIMEOUT" "${entry#*:}" "${entry%%:*}" || kill -KILL "${entry%%:*}" 2>/dev/null || true
    done
    for name in "$@"; do
        pid=$(runsv_pid "$name")
        [[ -z $pid ]] || wait_gone 5 runsv "$pid" || kill -KILL "$pid" 2>/dev/null || true
        rm -f "$PID_DIR/runsv-$name.pid"
    done
}
