#!/usr/bin/env bash
# Seeds the benchmark database through a fast SQL path, then lets the app compute daily stats.
#
# Usage: bench/seed.sh        (normally called by bench/run.sh with the stack's environment)
#
# Needs (exported by bench/run.sh from `scripts/stack.sh env`): TODOSYNC_DB_SOCKET, TODOSYNC_DB_NAME,
# TODOSYNC_DB_USER, TODOSYNC_DB_PASSWORD, TODOSYNC_BIN; and BENCH_USERS, BENCH_TAGS, BENCH_TODOS,
# BENCH_DAYS, BENCH_START_DATE, BENCH_TOKEN_SALT, BENCH_SEED_JOBS.
#
# Rows are generated inside MariaDB from the Sequence engine (seq_1_to_N), in chunks of about
# 100k rows per INSERT ... SELECT, with deterministic ids so the drivers need no lookups:
#   user u (1..U)            id u, email bench<u>@example.com, any password hash (login is not used)
#   token of user u          "bench-<salt>-<u>", stored as UNHEX(SHA2(token, 256)) = BINARY(32)
#   tag k of user u          id (k-1)*U + u (interleaved) or (u-1)*T + k (blocks), version k;
#                            a third have no clientId (NULL)
#   todo k of user u         id (k-1)*U + u (interleaved) or (u-1)*N + k (blocks), version T + k
#                            (strictly increasing per user);
#                            deadline = start + floor((k-1)*DAYS/N) (about N/DAYS todos a day),
#                            created_at in the days before the deadline (distinct, so ordering is
#                            meaningful), a quarter without clientId, 80% tagged, 60% completed
#   users.change_seq         T + N (the highest version; also users.live_records, the live count);
#   users.tag_seq            T (the highest tag version, Sql/024)
# then `todosync recompute-stats` computes every daily stat through the app's own write path
# (versions continue from change_seq), `todosync rebuild-feed` renders the sync change feed of
# the rows loaded by SQL, and ANALYZE TABLE refreshes index statistics.
#
# BENCH_SEED_LAYOUT=interleaved (default) numbers rows as a live system does, where every user's
# writes interleave with everyone else's: a user's todos are scattered over the whole primary key
# (ids U apart), so any read that looks rows up by id pays for it. `blocks` gives each user a
# contiguous id range, which flatters such reads.
# Prints timings as `seed: ...` lines and one `SEED_JSON {...}` line.
set -euo pipefail

: "${BENCH_USERS:=200}" "${BENCH_TAGS:=50}" "${BENCH_TODOS:=5000}" "${BENCH_DAYS:=365}"
: "${BENCH_START_DATE:=2025-01-01}" "${BENCH_TOKEN_SALT:=s0}" "${BENCH_SEED_JOBS:=2}"
U=$BENCH_USERS T=$BENCH_TAGS N=$BENCH_TODOS D=$BENCH_DAYS START=$BENCH_START_DATE SALT=$BENCH_TOKEN_SALT
: "${BENCH_SEED_LAYOUT:=interleaved}"
case $BENCH_SEED_LAYOUT in
    interleaved) tag_id="(k.seq - 1) * $U + u.seq" todo_id="(k.seq - 1) * $U + u.seq"
                 tag_of_index() { echo "($1 - 1) * $U + u.seq"; } ;;
    blocks) tag_id="(u.seq - 1) * $T + k.seq" todo_id="(u.seq - 1) * $N + k.seq"
            tag_of_index() { echo "(u.seq - 1) * $T + $1"; } ;;
    *) echo "seed: BENCH_SEED_LAYOUT must be interleaved or blocks" >&2; exit 2 ;;
esac
for v in U T N D BENCH_SEED_JOBS; do
    [[ ${!v} =~ ^[0-9]+$ ]] || { echo "seed: $v must be a non-negative integer" >&2; exit 2; }
done
((U >= 1 && N >= 1 && D >= 1)) || { echo "seed: need at least 1 user, 1 todo and 1 day" >&2; exit 2; }
[[ $START =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || { echo "seed: BENCH_START_DATE must be YYYY-MM-DD" >&2; exit 2; }
[[ $SALT =~ ^[A-Za-z0-9]+$ ]] || { echo "seed: BENCH_TOKEN_SALT must be alphanumeric" >&2; exit 2; }

db() { mariadb --no-defaults --socket="$TODOSYNC_DB_SOCKET" --user=root --default-character-set=utf8mb4 --batch --skip-column-names "$TODOSYNC_DB_NAME" "$@"; }
now_ms() { date +%s%3N; }
t0=$(now_ms)

# A deterministic lower-case UUID (version 4 layout) from an MD5 hex digest expression.
uuid_of() { # SQL expression of a 32-hex-digit string
    local h=$1
    printf "CONCAT(SUBSTR(%s,1,8),'-',SUBSTR(%s,9,4),'-4',SUBSTR(%s,14,3),'-8',SUBSTR(%s,18,3),'-',SUBSTR(%s,21,12))" \
        "$h" "$h" "$h" "$h" "$h"
}

# Bulk-load settings: no per-commit flush and no secondary unique checks (ids are unique by
# construction). Restored before the stats pass so it runs like production.
db <<'SQL'
SET GLOBAL innodb_flush_log_at_trx_commit = 2;
SET FOREIGN_KEY_CHECKS = 0;
TRUNCATE sync_operations; TRUNCATE daily_stats; TRUNCATE todos; TRUNCATE tags; TRUNCATE auth_tokens; TRUNCATE users;
TRUNCATE sync_feed; TRUNCATE sync_feed_backfill; TRUNCATE sync_devices;
SQL

chunk_users=$(((100000 + N - 1) / N))
((chunk_users >= 1)) || chunk_users=1
sql="SET unique_checks = 0;"
sql+="
INSERT INTO users (id, email, email_key, password_hash, change_seq, live_records, tag_seq, created_at)
SELECT seq, CONCAT('bench', seq, '@example.com'), CONCAT('bench', seq, '@example.com'),
       '\$argon2id\$v=19\$m=19456,t=2,p=1\$YmVuY2hzYWx0YmVuY2g\$bm90LWEtcmVhbC1oYXNoLWJlbmNoLW9ubHktMDAwMDA',
       $T + $N, $T + $N, $T, TIMESTAMP('$START') - INTERVAL 60 DAY
  FROM seq_1_to_$U;
INSERT INTO auth_tokens (token_hash, user_id, created_at, expires_at)
SELECT UNHEX(SHA2(CONCAT('bench-$SALT-', seq), 256)), seq, NOW(3), NOW(3) + INTERVAL 30 DAY FROM seq_1_to_$U;
"
if ((T > 0)); then
    tag_uuid=$(uuid_of "MD5(CONCAT('tag-$SALT-', u.seq, '-', k.seq))")
    for ((lo = 1; lo <= U; lo += chunk_users * 10)); do
        hi=$((lo + chunk_users * 10 - 1)); ((hi > U)) && hi=$U
        sql+="
INSERT INTO tags (id, user_id, client_id, client_key, name, color, version, created_at, updated_at)
SELECT x.id, x.uid, x.cid, x.cid, x.name, x.color, x.k, x.ts, x.ts FROM (
  SELECT $tag_id AS id, u.seq AS uid, k.seq AS k,
         IF(k.seq % 3 = 0, NULL, $tag_uuid) AS cid,
         CONCAT(ELT(1 + k.seq % 8, 'Work', 'Home', 'Errands', 'Health', 'Reading', 'Family', 'Projekt', '운동'), ' ', k.seq) AS name,
         CONCAT('#', UPPER(SUBSTR(MD5(CONCAT('color-', k.seq)), 1, 6))) AS color,
         TIMESTAMP('$START') - INTERVAL 30 DAY + INTERVAL k.seq MINUTE AS ts
    FROM seq_${lo}_to_${hi} u JOIN seq_1_to_${T} k) x;"
    done
fi
tag_expr="NULL"
((T > 0)) && tag_expr="IF(k.seq % 5 = 0, NULL, $(tag_of_index "(1 + (k.seq * 7) % $T)"))"
todo_uuid=$(uuid_of "MD5(CONCAT('todo-$SALT-', u.seq, '-', k.seq))")
# todos LO HI COUNT ID_EXPR TAG_EXPR: COUNT todos for each of the users LO..HI.
todos() {
    local lo=$1 hi=$2 n=$3 id=$4 tag=$5
    sql+="
INSERT INTO todos (id, user_id, client_id, client_key, title, raw, is_important, is_life, tag_id, difficulty,
                   estimated_time, deadline, is_completed, version, created_at, updated_at)
SELECT x.id, x.uid, x.cid, x.cid, x.title, x.title, x.imp, x.life, x.tag, x.diff, x.est, x.deadline, x.done,
       x.version, x.created, x.created + INTERVAL (x.k % 5000) SECOND FROM (
  SELECT $id AS id, u.seq AS uid, k.seq AS k, $T + k.seq AS version,
         IF(k.seq % 4 = 0, NULL, $todo_uuid) AS cid,
         CONCAT(ELT(1 + k.seq % 12, 'Write report', 'Call the bank', 'Gym', 'Read chapter', 'Groceries',
                    'Review pull request', 'Plan the week', 'Water plants', 'Pay rent', 'Email Ada',
                    'Dentist appointment', 'Practise piano'), ' ', k.seq) AS title,
         k.seq % 7 = 0 AS imp, k.seq % 3 = 0 AS life, $tag AS tag,
         k.seq % 6 AS diff, (k.seq % 13) * 15 AS est,
         DATE('$START') + INTERVAL FLOOR((k.seq - 1) * $D / $n) DAY AS deadline,
         k.seq % 10 < 6 AS done,
         TIMESTAMP(DATE('$START') + INTERVAL FLOOR((k.seq - 1) * $D / $n) DAY)
           - INTERVAL (k.seq % 3) DAY + INTERVAL (7 * 3600 + (k.seq * 7919) % 50000) SECOND
           + INTERVAL (k.seq % 1000) * 1000 MICROSECOND AS created
    FROM seq_${lo}_to_${hi} u JOIN seq_1_to_${n} k) x;"
}
for ((lo = 1; lo <= U; lo += chunk_users)); do
    hi=$((lo + chunk_users - 1)); ((hi > U)) && hi=$U
    todos "$lo" "$hi" "$N" "$todo_id" "$tag_expr"
done

# One more user, U+1, with BIG records in all (BENCH_BIG_USER_RECORDS; T tags, a stat a day, the
# rest todos) for the "first full pull of a big user" figure. Not among the users wrk picks from.
BIG=${BENCH_BIG_USER_RECORDS:-0}
BIG_TODOS=$((BIG - T - D))
if ((BIG > 0 && BIG_TODOS > 0)); then
    B=$((U + 1))
    sql+="
INSERT INTO users (id, email, email_key, password_hash, change_seq, live_records, tag_seq, created_at)
VALUES ($B, 'bench$B@example.com', 'bench$B@example.com', 'x', $T + $BIG_TODOS, $T + $BIG_TODOS, $T, TIMESTAMP('$START') - INTERVAL 60 DAY);
INSERT INTO auth_tokens (token_hash, user_id, created_at, expires_at)
VALUES (UNHEX(SHA2(CONCAT('bench-$SALT-', $B), 256)), $B, NOW(3), NOW(3) + INTERVAL 30 DAY);"
    if ((T > 0)); then
        sql+="
INSERT INTO tags (id, user_id, client_id, client_key, name, color, version, created_at, updated_at)
SELECT $U * $T + k.seq, $B, NULL, NULL, CONCAT('Big ', k.seq), '#123456', k.seq, NOW(3), NOW(3) FROM seq_1_to_${T} k;"
    fi
    big_tag="NULL"
    ((T > 0)) && big_tag="IF(k.seq % 5 = 0, NULL, $U * $T + 1 + (k.seq * 7) % $T)"
    todos "$B" "$B" "$BIG_TODOS" "$U * $N + k.seq" "$big_tag"
    U_ALL=$B
else
    U_ALL=$U
fi
db <<<"$sql"
db <<<"SET GLOBAL innodb_flush_log_at_trx_commit = 1;"
t1=$(now_ms)
echo "seed: rows inserted in $(((t1 - t0) / 1000)).$(printf '%03d' $(((t1 - t0) % 1000))) s ($U users, $((U * T)) tags, $((U * N)) todos)" >&2

# Daily stats through the app's write path, BENCH_SEED_JOBS users at a time.
if ((BENCH_SEED_JOBS <= 1)); then
    TODOSYNC_LOG_LEVEL=warning "$TODOSYNC_BIN" recompute-stats </dev/null >/dev/null
else
    seq 1 "$U_ALL" | TODOSYNC_LOG_LEVEL=warning xargs -P "$BENCH_SEED_JOBS" -n 1 "$TODOSYNC_BIN" recompute-stats --user >/dev/null
fi
t2=$(now_ms)
stats=$(db <<<"SELECT COUNT(*) FROM daily_stats")
echo "seed: recompute-stats: $stats daily stats in $(((t2 - t1) / 1000)).$(printf '%03d' $(((t2 - t1) % 1000))) s" >&2
# The change feed of the rows loaded by SQL (the stats pass wrote only the stats' rows). One
# process, users in turn: rebuilds of neighbouring users in parallel deadlock on the gap locks of
# their `DELETE ... WHERE user_id = ?`.
# BENCH_SEED_FEED=0 skips it (bench/export_rss.sh: one user's million todos is more than one
# rebuild transaction finishes within the connection's 10 s read timeout).
[[ ${BENCH_SEED_FEED:-1} == 0 ]] || TODOSYNC_LOG_LEVEL=warning "$TODOSYNC_BIN" rebuild-feed </dev/null >/dev/null
t2b=$(now_ms)
echo "seed: rebuild-feed in $(((t2b - t2) / 1000)).$(printf '%03d' $(((t2b - t2) % 1000))) s" >&2
db <<<"ANALYZE TABLE users, auth_tokens, tags, todos, daily_stats, sync_feed;" >/dev/null
t3=$(now_ms)
size_mb=$(db <<<"SELECT ROUND(SUM(data_length + index_length) / 1048576) FROM information_schema.tables WHERE table_schema = DATABASE()")
echo "seed: total $(((t3 - t0) / 1000)).$(printf '%03d' $(((t3 - t0) % 1000))) s, ${size_mb} MB of tables and indexes" >&2
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b - a) / 1000 }'; }
printf 'SEED_JSON {"users": %d, "tags": %d, "todos": %d, "dailyStats": %d, "insertSeconds": %s, "statsSeconds": %s, "totalSeconds": %s, "sizeMB": %s}\n' \
    "$U" "$((U * T))" "$((U * N))" "$stats" "$(secs "$t0" "$t1")" "$(secs "$t1" "$t2")" "$(secs "$t0" "$t3")" "${size_mb:-0}"
