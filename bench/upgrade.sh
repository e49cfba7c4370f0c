#!/usr/bin/env bash
# bench/upgrade.sh (make bench-upgrade): ALTER EXTENSION idem UPDATE on a
# live payment database.  A database at idem's version BENCH_BASE holds
# BENCH_KEYS completed keys (10 million) and a tenth as many webhook ids,
# 1% of each expired; idem1 payments (the one-statement payment of
# bench/seeds) run from BENCH_CLIENTS clients for BENCH_SECONDS; in their
# middle a session runs the update as doc/install.md says, with a
# lock_timeout, again if it expires.  It reports:
#   - how long the update took, and how many tries (lock_timeout expired);
#   - the payments: how many, how many failed, their latency before and
#     after the update, the slowest of those that started while it ran and
#     of the others; each payment is checked booked once;
#   - then the purge's first passes on the updated tables (from 1.6 the
#     purge sweeps the tables, and the expiry map knows nothing of them
#     yet): idem.purge_backlog(), and idem_purge() until it has caught up.
# Keys are loaded by SQL (a claim each would take an hour), in the order of
# a random-looking prefix, as the keys of bench/wal.sh.  About five minutes
# at 10 million keys, most of it loading; the database takes 4 GB.
#
# Settings (environment):
#   BENCH_KEYS     completed keys loaded                        (10000000)
#   BENCH_BASE     idem's version before the update             (1.5)
#   BENCH_SECONDS  seconds of payments                          (30)
#   BENCH_CLIENTS  pgbench clients (-c)                         (8)
#   BENCH_JOBS     pgbench threads (-j)                         (2)
#   BENCH_PORT     port of the scratch server                   (5498)
#   PG=17 (or 18)  run on that server (test/servers.sh)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=test/lib.sh
source test/lib.sh

PG=${PG:-${BENCH_PG:-}}
if [ -n "$PG" ] && [ -z "${IDEM_FLAVOUR:-}" ]; then
	idem_on_server "$PG" bench/upgrade.sh
	exit $?
fi

KEYS=${BENCH_KEYS:-10000000}
BASE=${BENCH_BASE:-1.5}
SECS=${BENCH_SECONDS:-30}
CLIENTS=${BENCH_CLIENTS:-8}
JOBS=${BENCH_JOBS:-2}
PORT=${BENCH_PORT:-5498}
DIR=$IDEM_BUILD/bench_upgrade

log() { echo "bench/upgrade [$SECONDS s]: $*" >&2; }

log "building idem and installing it privately"
idem_private_install
trap 'idem_scratch_stop || true' EXIT
idem_scratch_start "$DIR" "$PORT" <<EOF
idem.purge_interval = 0
shared_buffers = 1GB
max_wal_size = 16GB
checkpoint_timeout = 5min
synchronous_commit = on
log_lock_waits = on
deadlock_timeout = 100ms
EOF

PSQL=("$IDEM_BINDIR/psql" -h "$IDEM_SOCK" -p "$IDEM_PORT" -U postgres -X -q -At -v ON_ERROR_STOP=1 -d postgres)
FP="'\\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'::bytea"

log "loading $KEYS keys and $((KEYS / 10)) webhook ids at idem $BASE"
"${PSQL[@]}" >/dev/null <<EOF
CREATE EXTENSION idem VERSION '$BASE';
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT i, 0 FROM generate_series(1, 1000) i;
CREATE TABLE ledger (id bigserial PRIMARY KEY, k text NOT NULL, account int NOT NULL, amount bigint NOT NULL);
SET synchronous_commit = off;
-- as idem1 leaves them: completed, the response the charge's id; created
-- over the last day, kept a day, the first 1% expired
INSERT INTO idem.keys (scope, key, state, token, attempt, fingerprint, response,
                       created_at, completed_at, expires_at)
SELECT '', (((i * 2654435761) % 90000000 + 1) * 100000000000 + i)::text, 'completed',
       i, 1, $FP, jsonb_build_object('charge', i), t, t, t + interval '1 day'
FROM generate_series(1, $KEYS) i,
     LATERAL (SELECT now() - interval '1 day' * (1.01 - i::float8 / $KEYS)) c(t);
SELECT setval('idem.token_seq', $KEYS);
INSERT INTO idem.webhooks (source, event_id, received_at, expires_at)
SELECT 'stripe', 'evt_' || (((i * 2654435761) % 90000000 + 1) * 100000000000 + i), t, t + interval '7 days'
FROM generate_series(1, $KEYS / 10) i,
     LATERAL (SELECT now() - interval '7 days' * (1.01 - i::float8 / ($KEYS / 10))) c(t);
VACUUM ANALYZE;
CHECKPOINT;
EOF
"${PSQL[@]}" -F ' ' -c "SELECT 'idem.keys: ' || pg_size_pretty(pg_total_relation_size('idem.keys'))
	|| ', idem.webhooks: ' || pg_size_pretty(pg_total_relation_size('idem.webhooks'))" |
	while read -r line; do log "  $line"; done

cat >"$DIR/idem1.sql" <<EOF
\set n :n + 1
\set k random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n
\set a random(1, 1000)
\set m random(1, 97)
$(cat bench/idem1.sql)
EOF

log "payments for $SECS s from $CLIENTS clients; the update after $((SECS / 3)) s"
rm -f "$DIR"/pgbench_log.*
(cd "$DIR" && "$IDEM_BINDIR/pgbench" -h "$IDEM_SOCK" -p "$IDEM_PORT" -U postgres -n -M prepared \
	-c "$CLIENTS" -j "$JOBS" -T "$SECS" -D n=1000000 -l -f idem1.sql postgres >pgbench.out 2>&1) &
BENCH_PID=$!
sleep $((SECS / 3))

# The update as doc/install.md says: under a lock_timeout, again if it
# expires.  Each try's start and end, in epoch microseconds.
TRIES=0
: >"$DIR/update.tsv"
while :; do
	TRIES=$((TRIES + 1))
	if out=$("${PSQL[@]}" -F $'\t' 2>&1 <<'EOF'
SET lock_timeout = '2s';
SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint AS t0 \gset
ALTER EXTENSION idem UPDATE;
SELECT :t0, (extract(epoch FROM clock_timestamp()) * 1e6)::bigint;
EOF
	); then
		printf '%s\n' "$out" >>"$DIR/update.tsv"
		break
	fi
	log "  try $TRIES: $out"
	[ "$TRIES" -lt 5 ] || { log "the update failed 5 times"; exit 1; }
done
wait "$BENCH_PID" || { log "pgbench failed:"; sed 's/^/    /' "$DIR/pgbench.out" >&2; exit 1; }
read -r U0 U1 <"$DIR/update.tsv"

# pgbench's per-transaction log: client, transaction, latency (us), script,
# epoch seconds and microseconds of the end
cat "$DIR"/pgbench_log.* | awk -v u0="$U0" -v u1="$U1" '
	{
		lat = $3; t1 = $5 * 1000000 + $6; t0 = t1 - lat
		if (t0 < u0 - 2000000 && t1 < u0) print "before", lat
		else if (t0 > u1 + 1000000) print "after", lat
		if (t0 <= u1 && t1 >= u0) print "during", lat
		else print "outside", lat
	}' | sort -k1,1 -k2,2n >"$DIR/latency.txt"
# lat <class> <p>: the p-quantile (0 to 1) of a class's latencies, in ms;
# count <class>: how many
lat() {
	awk -v c="$1" -v p="$2" '$1 == c { a[++n] = $2 }
		END { printf "%.2f", n ? a[int((n - 1) * p) + 1] / 1000 : 0 }' "$DIR/latency.txt"
}
count() { awk -v c="$1" '$1 == c { n++ } END { print n + 0 }' "$DIR/latency.txt"; }
FAILED=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$DIR/pgbench.out")
ABORTED=$(grep -c 'aborted\|ERROR' "$DIR/pgbench.out" || true)

# every payment booked once, every key it made completed
CHECK=$("${PSQL[@]}" -F ' ' -c "
	SELECT (SELECT count(*) FROM ledger), (SELECT count(DISTINCT k) FROM ledger),
	       (SELECT count(*) FROM idem.keys k JOIN ledger l ON l.k = k.key AND k.scope = ''
	        WHERE k.state = 'completed' AND k.response = jsonb_build_object('charge', l.id))")
read -r BOOKED DISTINCT COMPLETED <<<"$CHECK"
VERSION=$("${PSQL[@]}" -c "SELECT extversion FROM pg_extension WHERE extname = 'idem'")

# the purge's first passes over the swept tables
timed() { "${PSQL[@]}" -F ' ' -c "SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint" -c "$1" \
	-c "SELECT (extract(epoch FROM clock_timestamp()) * 1e6)::bigint" |
	awk 'NR == 1 { t0 = $0; next } { if (prev != "") out = out (out == "" ? "" : ";") prev; prev = $0 }
	     END { printf "%s\t%.0f\n", out, (prev - t0) / 1000 }'; }
BACKLOG1=$(timed "SELECT string_agg(\"table\" || '=' || expired, ',') FROM idem.purge_backlog()")
PURGES=""
PURGED=0
PURGE_MS=0
# until a pass deletes less than its batch: keys go on expiring (about one
# a second for each 86,400 kept a day)
for ((i = 0; i < 100; i++)); do
	IFS=$'\t' read -r n ms <<<"$(timed "SELECT idem_purge(100000)")"
	PURGED=$((PURGED + n))
	PURGE_MS=$((PURGE_MS + ms))
	PURGES="$PURGES $n in $ms ms,"
	[ "$n" -ge 100000 ] || break
done
BACKLOG2=$(timed "SELECT string_agg(\"table\" || '=' || expired, ',') FROM idem.purge_backlog()")

{
	echo "# ALTER EXTENSION idem UPDATE on a live database"
	echo
	echo "$KEYS keys and $((KEYS / 10)) webhook ids at idem $BASE, now at $VERSION;"
	echo "idem1 payments from $CLIENTS clients for $SECS s."
	echo
	echo "| | |"
	echo "|---|---|"
	echo "| update | $(((U1 - U0) / 1000)) ms, try $TRIES |"
	echo "| payments | $(($(count during) + $(count outside))), $(count during) while the update ran, ${FAILED:-?} failed |"
	echo "| latency p50 / p99 before | $(lat before 0.5) / $(lat before 0.99) ms |"
	echo "| latency p50 / p99 after | $(lat after 0.5) / $(lat after 0.99) ms |"
	echo "| slowest payment while the update ran | $(lat during 1) ms |"
	echo "| slowest payment at any other time | $(lat outside 1) ms |"
	echo "| booked / distinct keys / completed with their charge | $BOOKED / $DISTINCT / $COMPLETED |"
	echo "| purge_backlog(), first | ${BACKLOG1%%$'\t'*} in ${BACKLOG1##*$'\t'} ms |"
	echo "| idem_purge(100000) until a pass deletes less | $PURGED rows in $PURGE_MS ms:${PURGES%,} |"
	echo "| purge_backlog() after | ${BACKLOG2%%$'\t'*} in ${BACKLOG2##*$'\t'} ms |"
} | tee "$DIR/results.md"

if [ "$BOOKED" != "$DISTINCT" ] || [ "$BOOKED" != "$COMPLETED" ] || [ "${FAILED:-0}" != 0 ] ||
	[ "$ABORTED" != 0 ] || [ "$VERSION" = "$BASE" ]; then
	log "FAILED: a payment booked twice or not completed, a failed payment, or no update"
	exit 1
fi
