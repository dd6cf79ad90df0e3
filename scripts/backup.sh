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
#       [--binlog-dir DIR] [--admin-user NAME] [--dir DIR] [--force] [--without-deletions-journal]
#       Replaces the database with FILE's (the dump drops and recreates it), applies the
#       migrations the binary has and the backup lacks, and gives the database a new sync epoch
#       (`todosync new-epoch`). Refuses while other sessions of the account are connected (the
#       responders: stop them first) unless --force.
#       Deleted accounts stay deleted: before the import it reads the journal of account
#       deletions (Sql/029) of the database it replaces and merges it into
#       DIR/account-deletions.tsv (kept across restores, refreshed by every backup); after the
#       import it deletes again every restored account that file names and erases them
#       (`todosync purge`), then checks that none is left. When neither the database's journal
#       nor that file can be read it refuses, unless --without-deletions-journal (deleted
#       accounts may come back: only for a first install or a deliberate choice).
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
WITHOUT_JOURNAL=0
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
        --without-deletions-journal) WITHOUT_JOURNAL=1; shift ;;
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

# The journal of account deletions (Sql/029): one line per deleted account, "id<TAB>created
# at<TAB>deleted at" (UTC, as the database stores them), in DIR/account-deletions.tsv. It is the
# union of every journal read so far, so it outlives the database it came from: a restore reads
# the journal of the database it is about to replace into it before the import, and re-applies
# all of it after (a deletion made after the backup was taken is not in the dump). Every backup
# refreshes it too, so it lies next to the dumps it protects (copy both off the host).
JOURNAL=""
JOURNAL_LINE='^[0-9]+\t[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?\t[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?$'

sql() { # SQL...: runs it in the configured database as the application's account; rows on stdout
    mariadb --defaults-extra-file="$OPTIONS" --batch --skip-column-names --database="$DATABASE" -e "$*"
}

# Reads the database's journal into $1 (a file). Status: 0 read; 2 the database has no journal
# table yet (a schema before Sql/029): its accounts deleted and not yet erased are read instead;
# 1 the database could not be read.
read_database_journal() {
    local out=$1 error
    if sql "SELECT account_id, account_created_at, deleted_at FROM account_deletions" >"$out" 2>"$WORK/journal.err"; then
        return 0
    fi
    error=$(cat "$WORK/journal.err")
    if [[ $error == *"ERROR 1146"* ]] &&
        sql "SELECT id, created_at, deleted_at FROM users WHERE deleted_at IS NOT NULL" >"$out" 2>>"$WORK/journal.err"; then
        return 2
    fi
    log "reading the journal of account deletions of $DATABASE failed: ${error:-no answer}"
    return 1
}

# Merges the lines of file $1 into the journal file (written whole, then renamed).
merge_journal() {
    local bad
    bad=$(grep -cvP "$JOURNAL_LINE" "$1" || true)
    ((bad == 0)) || die "$bad line(s) of the journal of account deletions are not id, created, deleted: nothing changed"
    install -d -m 0700 "$(dirname "$JOURNAL")"
    if [[ -e $JOURNAL ]] && grep -qvP "$JOURNAL_LINE" "$JOURNAL"; then
        die "$JOURNAL holds lines that are not id, created, deleted: fix it by hand"
    fi
    { [[ ! -e $JOURNAL ]] || cat "$JOURNAL"; cat "$1"; } | LC_ALL=C sort -u >"$JOURNAL.partial"
    mv "$JOURNAL.partial" "$JOURNAL"
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
    # After the dump: every deletion it holds, and any made while it ran.
    JOURNAL=$DIR/account-deletions.tsv
    local status=0
    read_database_journal "$WORK/journal.now" || status=$?
    if ((status == 1)); then
        die "$name is written, but the journal of account deletions could not be read into $JOURNAL"
    fi
    merge_journal "$WORK/journal.now"
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

# Before the import: the journal of the database about to be replaced, into the journal file.
# Without either, refuse: the restore would bring back every account deleted since the backup.
save_journal() {
    JOURNAL=$DIR/account-deletions.tsv
    local status=0
    read_database_journal "$WORK/journal.now" || status=$?
    case $status in
        0) merge_journal "$WORK/journal.now"
           log "journal of account deletions: $(wc -l <"$WORK/journal.now") from $DATABASE, $(wc -l <"$JOURNAL") in $JOURNAL" ;;
        2) merge_journal "$WORK/journal.now"
           log "WARNING: $DATABASE has no journal of account deletions (a schema before Sql/029): only its $(wc -l <"$WORK/journal.now") account(s) deleted and not yet erased are known, with the $(wc -l <"$JOURNAL") of $JOURNAL" ;;
        *) if [[ -s $JOURNAL ]]; then
               log "WARNING: $DATABASE could not be read: the $(wc -l <"$JOURNAL") deletion(s) of $JOURNAL are re-applied, any made after its last refresh are not"
           elif ((WITHOUT_JOURNAL)); then
               log "WARNING: no journal of account deletions (--without-deletions-journal): accounts deleted after the backup come back"
               JOURNAL=""
           else
               die "no journal of account deletions: $DATABASE could not be read and $JOURNAL is missing or empty, so accounts deleted after the backup would come back. Restore $JOURNAL from where the backups are copied (or name its directory with --dir), or pass --without-deletions-journal to accept that"
           fi ;;
    esac
}

# After the import and the migrations: the journal file back into the table, every restored
# account it names (same id and creation time) deleted again as `POST /account/delete` does, and
# erased by `todosync purge`; then no account of the journal may be left.
reapply_deletions() {
    [[ -n $JOURNAL ]] || return 0
    local rows=$WORK/journal.sql count left
    awk -F'\t' -v q="'" 'BEGIN { n = 0 }
        { if (n % 500 == 0) { if (n) print ";"; printf "INSERT IGNORE INTO account_deletions (account_id, account_created_at, deleted_at) VALUES " }
          else printf ","
          printf "(%s,%s%s%s,%s%s%s)", $1, q, $2, q, q, $3, q; n++ }
        END { if (n) print ";" }' "$JOURNAL" >"$rows"
    [[ ! -s $rows ]] || mariadb --defaults-extra-file="$OPTIONS" --database="$DATABASE" <"$rows" ||
        die "loading $JOURNAL into account_deletions failed: do not start the responders; run the restore again"
    count=$(sql "UPDATE users u JOIN account_deletions d ON d.account_id = u.id AND d.account_created_at = u.created_at
                    SET u.deleted_at = d.deleted_at, u.email = '', u.email_key = CONCAT('deleted:', u.id), u.password_hash = ''
                  WHERE u.deleted_at IS NULL;
                 SELECT ROW_COUNT();
                 DELETE t FROM auth_tokens t JOIN users u ON u.id = t.user_id WHERE u.deleted_at IS NOT NULL") ||
        die "deleting the journal's accounts again failed: do not start the responders; run the restore again"
    log "$count restored account(s) deleted again from the journal of account deletions; erasing"
    "$TODOSYNC" purge </dev/null >&2 || die "todosync purge failed after the restore: do not start the responders; run the restore again"
    left=$(sql "SELECT COUNT(*) FROM users u JOIN account_deletions d ON d.account_id = u.id AND d.account_created_at = u.created_at") ||
        die "checking the erase failed: do not start the responders; run the restore again"
    ((left == 0)) || die "$left account(s) of the journal of account deletions are still in the database: do not start the responders"
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
    save_journal
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
    reapply_deletions
    # Not optional: the restore rewound every user's change sequence (docs/OPERATIONS.md, "Restore").
    local epoch
    epoch=$("$TODOSYNC" new-epoch </dev/null) || die "todosync new-epoch failed: do not start the responders before it succeeds"
    log "restored in $((SECONDS - start)) s; new sync epoch $epoch: devices' earlier cursors get 410 and they pull again"
}

"$MODE"
