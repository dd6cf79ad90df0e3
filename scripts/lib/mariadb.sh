# shellcheck shell=bash
# MariaDB as the dev stack and the cluster's nodes run it (scripts/lib/common.sh first).

# Every TodoSync MariaDB server's options besides its paths: the dev stack passes them to
# mariadbd, the cluster writes them into each node's my.cnf (without the leading --).
MARIADB_SERVER_OPTIONS=(
    --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci
    --skip-name-resolve --max-connections=500
)

# mariadb_install_db LOG CMD...: a new data dir by CMD (`mariadb-install-db --no-defaults ...`,
# behind setpriv if need be), with no test database and no name resolution, its output in LOG; on
# failure the log's end, and die.
mariadb_install_db() {
    local logfile=$1
    shift
    if ! "$@" --skip-test-db --skip-name-resolve >"$logfile" 2>&1; then
        show_tail "$logfile"
        die "mariadb-install-db failed"
    fi
}
