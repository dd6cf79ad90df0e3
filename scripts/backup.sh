#!/usr/bin/env bash
# todosync-backup: TodoSync's database to a file, and back (docs/OPERATIONS.md, "Backup" and
# "Restore"). scripts/install.sh installs it as /usr/local/bin/todosync-backup, run daily by
# todosync-backup.timer; `scripts/stack.sh backup|restore` runs it against the dev stack.
#
#   todosync-backup [--dir DIR] [--keep N]
#       A consistent snapshot, taken while the responders serve: DIR/todosync-<UTC time>.sql.gz
#       (default DIR /var/backups/todosync), written under a temporary name and renamed only when
#       complete and verified; then all but the newest N (default 14) are removed. Prints the path.
#   todosync-backup restore FILE [--until-time 'YYYY-MM-DD HH:MM:SS' | --through-gtid D-S-N]
#       [--binlog-dir DIR] [--admin-user NAME] [--force]
#       Replaces the database with FILE's (the dump drops and recreates it), applies the
#       migrations the binary has and the backup lacks, and gives the database a new sync epoch
#       (`todosync new-epoch`). Refuses while other sessions of the account are connected (the
#       responders: stop them first) unless --force.
#       Point-in-time recovery: with --until-time (the events before that local time of the
#       database host) or --through-gtid (up to and including that transaction: the last good
#       one), the binary log is replayed from the position the backup recorded, before the
#       migrations. On the database host only, as MariaDB's admin over its unix socket
#       (--admin-user, default root: replaying row events needs the BINLOG REPLAY privilege);
#       --binlog-dir defaults to the server's own.
#
# Where the database is, and as whom: the todosync binary's own configuration (TODOSYNC_CONFIG,
# default /etc/todosync/todosync.env when it exists; then the environment), as
# `todosync client-options` prints it: the application's account, which has every
# privilege on its database and none elsewhere. The binary: TODOSYNC_BIN, else `todosync` on
# PATH. Migrations for a restore: TODOSYNC_SQL_DIR, else <binary dir>/../share/todosync/Sql when
# it exists (the installed layout), else the binary's default.
#
# Why mariadb-dump --single-transaction and not mariadb-backup: every TodoSync table is InnoDB, so
# one REPEATABLE READ transaction sees one consistent state without blocking writers; the
# application's own account can take it (mariadb-backup needs the data directory, so root on the
# database host); the file restores into any MariaDB version and can be read, checked and
# restored into a scratch server; and with binary logging on it records the binlog position and
# GTID of that same snapshot, where point-in-time recovery starts. What it costs: a restore
# re-inserts every row and rebuilds every index (slower than copying files back for a large
# database), and DDL during the dump (a migration) breaks its consistency, so upgrades are not
# run in the backup window.
set -euo pipefail
umask 077 # a backup holds every user's data

die() { echo "todosync-backup: $*" >&2; exit 1; }
log() { echo "todosync-backup: $*" >&2; }

MODE=backup
DIR=/var/backups/todosync
KEEP=14
FILE=""
UNTIL_TIME=""
THROUGH_GTID=""
BINLOG_DIR=""
ADMIN_USER=root
FORCE=0
if [[ ${1:-} == restore ]]; then
    MODE=restore
    shift
    FILE=${1:-}
    [[ -n $FILE && $FILE != -* ]] || die "restore: which file? (todosync-backup restore FILE)"
    shift
fi
while (($#)); do
    case $1 in
        --dir) DIR=$2; shift 2 ;;
        --keep) KEEP=$2; shift 2 ;;
        --until-time) UNTIL_TIME=$2; shift 2 ;;
        --through-gtid) THROUGH_GTID=$2; shift 2 ;;
        --binlog-dir) BINLOG_DIR=$2; shift 2 ;;
        --admin-user) ADMIN_USER=$2; shift 2 ;;
        --force) FORCE=1; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
[[ $KEEP =~ ^[1-9][0-9]*$ ]] || die "--keep must be a positive number"
[[ -z $UNTIL_TIME || -z $THROUGH_GTID ]] || die "--until-time or --through-gtid, not both"

if [[ -z ${TODOSYNC_CONFIG:-} && -f /etc/todosync/todosync.env ]]; then
    export TODOSYNC_CONFIG=/etc/todosync/todosync.env
fi
TODOSYNC=${TODOSYNC_BIN:-$(command -v todosync || echo /usr/local/bin/todosync)}
[[ -x $TODOSYNC ]] || die "no todosync binary at $TODOSYNC (set TODOSYNC_BIN)"
for tool in mariadb mariadb-dump mariadb-admin gzip; do
    command -v "$tool" >/dev/null || die "$tool not found (Debian: apt-get install mariadb-client gzip)"
done

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
OPTIONS=$WORK/client.cnf # the account's password: readable by this process's user only
"$TODOSYNC" client-options >"$OPTIONS" || die "todosync client-options failed"
DATABASE=$("$TODOSYNC" config --assignments | sed -n 's/^TODOSYNC_DB_NAME=//p')
[[ -n $DATABASE ]] || die "todosync config names no TODOSYNC_DB_NAME"

server_variable() { # NAME: the server's value, from SHOW VARIABLES
    mariadb-admin --defaults-extra-file="$OPTIONS" variables 2>/dev/null |
        awk -F'|' -v name="$1" '{ gsub(/ /, "", $2) } $2 == name { sub(/^ +/, "", $3); sub(/ +$/, "", $3); print $3 }'
}

backup() {
    install -d -m 0700 "$DIR"
    local stamp name partial binlog=()
    stamp=$(date -u +%Y%m%dT%H%M%SZ)
    name=$DIR/todosync-$stamp.sql.gz
    partial=$DIR/.todosync-$stamp.sql.gz.partial
    # With binary logging on, the dump records the binlog file, position and GTID of its own
    # snapshot (as comments): where a point-in-time recovery replays from.
    [[ $(server_variable log_bin) == ON ]] && binlog=(--master-data=2)
    local start=$SECONDS
    if ! mariadb-dump --defaults-extra-file="$OPTIONS" --single-transaction --quick --hex-blob --routines \
        --triggers "${binlog[@]}" --add-drop-database --databases "$DATABASE" | gzip -c >"$partial"; then
        rm -f "$partial"
        die "mariadb-dump of $DATABASE failed; nothing written"
    fi
    if ! gzip -dc "$partial" | tail -n 1 | grep -q '^-- Dump completed'; then
        rm -f "$partial"
        die "the dump of $DATABASE is incomplete; nothing written"
    fi
    mv "$partial" "$name"
    log "$name: $(stat -c %s "$name") bytes in $((SECONDS - start)) s${binlog:+, binlog position recorded}"
    local old
    while IFS= read -r old; do
        rm -f -- "$old"
        log "removed $old (keeping the newest $KEEP)"
    done < <(find "$DIR" -maxdepth 1 -name 'todosync-*.sql.gz' | sort | head -n "-$KEEP")
    printf '%s\n' "$name"
}

dump_head() { # the dump's first lines (gzip, cut off by head, dies of SIGPIPE: not an error)
    { gzip -dcf "$FILE" 2>/dev/null || true; } | head -n 60
}

# Point-in-time recovery, before the import: where the backup's binlog position is, which files
# follow it, and a new binlog file for what the import and the replay write (never a file being
# read). Row events replay only with BINLOG REPLAY (or SUPER): as the admin, by unix_socket, on
# the socket the configuration names.
REPLAY_FROM=()
REPLAY_FILES=()
ADMIN_OPTIONS=$WORK/admin.cnf
prepare_replay() {
    local coordinates file position basename socket candidate
    coordinates=$(dump_head | sed -n "s/^-- CHANGE MASTER TO MASTER_LOG_FILE='\([^']*\)', MASTER_LOG_POS=\([0-9]*\);.*/\1 \2/p")
    [[ -n $coordinates ]] || die "$FILE records no binlog position (binary logging was off when it was taken): no point-in-time recovery from it"
    read -r file position <<<"$coordinates"
    if [[ -z $BINLOG_DIR ]]; then
        basename=$(server_variable log_bin_basename)
        [[ -n $basename ]] || die "the server has no binary log (log_bin_basename); name the files' directory with --binlog-dir"
        BINLOG_DIR=$(dirname "$basename")
    fi
    [[ -r $BINLOG_DIR/$file ]] || die "$BINLOG_DIR/$file (the backup's binlog) is not there or not readable: binlogs expired, or run as root"
    socket=$(grep '^socket=' "$OPTIONS") ||
        die "point-in-time recovery connects as MariaDB's admin over the unix socket: set TODOSYNC_DB_SOCKET (on the database host)"
    printf '[client]\n%s\nuser=%s\n' "$socket" "$ADMIN_USER" >"$ADMIN_OPTIONS"
    mariadb-admin --defaults-extra-file="$ADMIN_OPTIONS" flush-binary-log || die "flushing the binary log as $ADMIN_USER failed"
    for candidate in "$BINLOG_DIR/${file%.*}".[0-9]*; do
        [[ $candidate =~ \.[0-9]+$ && ! $(basename "$candidate") < $file ]] && REPLAY_FILES+=("$candidate")
    done
    unset 'REPLAY_FILES[-1]' # the file the flush just opened
    REPLAY_FROM=("$file" "$position")
}

replay_binlog() { # after the import: from the backup's position up to --until-time / --through-gtid
    local stop=()
    if [[ -n $UNTIL_TIME ]]; then stop=(--stop-datetime="$UNTIL_TIME"); else stop=(--stop-position="$THROUGH_GTID"); fi
    log "replaying ${#REPLAY_FILES[@]} binlog file(s) from ${REPLAY_FROM[0]}:${REPLAY_FROM[1]}, ${stop[*]}"
    # Only this database's events; the replayed transactions get new GTIDs from this server
    # (their old ones are left out).
    mariadb-binlog --database="$DATABASE" --start-position="${REPLAY_FROM[1]}" "${stop[@]}" "${REPLAY_FILES[@]}" |
        sed '/SET @@session\.gtid_seq_no=/d; /SET @@session\.server_id=/d' |
        mariadb --defaults-extra-file="$ADMIN_OPTIONS" --binary-mode ||
        die "replaying the binlog failed: the database holds the backup and part of the replay; run the restore again"
}

restore() {
    [[ -r $FILE ]] || die "cannot read $FILE"
    if [[ $FILE == *.gz ]]; then gzip -t "$FILE" || die "$FILE is not a complete gzip file"; fi
    local named
    named=$(dump_head | sed -n 's/^CREATE DATABASE .*`\([^`]*\)`.*/\1/p' | head -n 1)
    [[ -n $named ]] || die "$FILE is not a todosync-backup dump (no CREATE DATABASE in its head)"
    [[ $named == "$DATABASE" ]] || die "$FILE holds database '$named', the configuration names '$DATABASE'"
    local others
    others=$(mariadb-admin --defaults-extra-file="$OPTIONS" processlist |
        awk -F'|' 'NR > 3 && NF > 5 && $0 !~ /[Pp]rocesslist/ { n++ } END { print n + 0 }')
    if ((others > 0 && !FORCE)); then
        die "$others other session(s) of the account are connected: stop the responders first (or --force)"
    fi
    local pitr=0
    if [[ -n $UNTIL_TIME || -n $THROUGH_GTID ]]; then pitr=1; prepare_replay; fi
    local start=$SECONDS
    log "restoring $DATABASE from $FILE"
    gzip -dcf "$FILE" | mariadb --defaults-extra-file="$OPTIONS" --binary-mode ||
        die "the import failed: the database is incomplete; run the restore again"
    log "imported in $((SECONDS - start)) s"
    ((!pitr)) || replay_binlog
    local sql_dir=${TODOSYNC_SQL_DIR:-} migrate=(migrate)
    if [[ -z $sql_dir ]]; then
        sql_dir=$(dirname "$(readlink -f "$TODOSYNC")")/../share/todosync/Sql
        [[ -d $sql_dir ]] || sql_dir=""
    fi
    [[ -z $sql_dir ]] || migrate+=(--sql-dir "$sql_dir")
    "$TODOSYNC" "${migrate[@]}" </dev/null || die "todosync migrate failed after the import"
    # Not optional: the restore rewound every user's change sequence (docs/OPERATIONS.md, "Restore").
    local epoch
    epoch=$("$TODOSYNC" new-epoch </dev/null) || die "todosync new-epoch failed: do not start the responders before it succeeds"
    log "restored in $((SECONDS - start)) s; new sync epoch $epoch: devices' earlier cursors get 410 and they pull again"
}

"$MODE"
