#!/usr/bin/env bash
# bench/scale.sh (make bench-scale): does a payment cost more when idem.keys
# holds 50 million keys than when it holds 100,000?  Two databases on one
# scratch cluster, alike but for the keys loaded: small (BENCH_SCALE_SMALL
# keys) and large (BENCH_SCALE_KEYS).  The payment is bench/idem1.sql, the
# one-statement payment of bench/seeds, each with a new key.
#
# The keys are loaded as a restore writes them (INSERT into idem.keys,
# completed, a day to live), a million a transaction, in an order that puts
# them all over the primary key: key i is a prefix hashed from i and the
# suffix i, as a run's keys are a random prefix and a suffix of their own.
# So the primary key is a B-tree grown by random inserts, as in service.
# The ledger starts empty in both (its inserts go to its last page
# whatever its size).
#
# Two runs, the databases taking turns in each round:
#   cost: BENCH_SCALE_PAYMENTS payments a round, unthrottled, full_page_writes
#         off, each turn after a CHECKPOINT: the backends' CPU per payment
#         and the latency, WAL bytes per payment without page images.
#   wal:  a turn is one checkpoint interval: a CHECKPOINT, then
#         BENCH_SCALE_TURN seconds (30) at BENCH_SCALE_RATE payments a second
#         with full_page_writes on, checkpoint_timeout 30 s: the WAL and the
#         page images a payment brings once checkpoints come and go, and its
#         CPU with them.  A fixed rate, the same for both, so that each
#         interval adds as many keys to each.
#         The wal run is made for each method of BENCH_SCALE_METHODS in
#         turn (idem.wal_compression: what idem's page images cost to
#         compress, and what they weigh).
#   instructions: the server restarted under valgrind's callgrind, one
#         backend of each database making 200 payments and another 1,200:
#         the instructions of a payment (the difference over 1,000), which
#         unlike its CPU time do not depend on what the caches hold.
# Before the runs, the primary keys are read into shared buffers
# (pg_prewarm) and a checkpoint writes what the load left dirty, then a
# turn of each database goes unmeasured: a server in service has its hot
# pages in memory and its buffers clean.
# Medians of the rounds.  Loading 50 million keys takes about 15 GB of disk
# and twenty minutes here; BENCH_SCALE_REUSE=1 runs again on the cluster an
# earlier run loaded (its keys grown by that run's payments).  The output is
# two tables, also in $IDEM_BUILD/bench_scale/results.md.
#
# Settings (environment):
#   BENCH_SCALE_KEYS      keys of the large database     (50000000)
#   BENCH_SCALE_SMALL     keys of the small database     (100000)
#   BENCH_SCALE_PAYMENTS  payments a turn of the cost run (6000)
#   BENCH_SCALE_RATE      payments a second, wal run     (116)
#   BENCH_SCALE_TURN      seconds a turn, wal run        (30)
#   BENCH_SCALE_ROUNDS    rounds of each run             (3)
#   BENCH_SCALE_SHARED_BUFFERS                           (4GB)
#   BENCH_SCALE_METHODS   idem.wal_compression, wal run  (lz4 zstd inherit)
#   BENCH_SCALE_REUSE=1   keep the loaded cluster of an earlier run
#   BENCH_CLIENTS, BENCH_JOBS  pgbench -c, -j            (4, 2)
#   BENCH_PORT            port of the scratch server     (5495)
#   PG=17 (or 18, 19)     run on that server (test/servers.sh)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=test/lib.sh
source test/lib.sh

PG=${PG:-${BENCH_PG:-}}
if [ -n "$PG" ] && [ -z "${IDEM_FLAVOUR:-}" ]; then
	idem_on_server "$PG" bench/scale.sh
	exit $?
fi

LARGE=${BENCH_SCALE_KEYS:-50000000}
SMALL=${BENCH_SCALE_SMALL:-100000}
PAYMENTS=${BENCH_SCALE_PAYMENTS:-6000}
RATE=${BENCH_SCALE_RATE:-116}
TURN=${BENCH_SCALE_TURN:-30}
ROUNDS=${BENCH_SCALE_ROUNDS:-3}
SHARED_BUFFERS=${BENCH_SCALE_SHARED_BUFFERS:-4GB}
METHODS=${BENCH_SCALE_METHODS:-lz4 zstd inherit}
CLIENTS=${BENCH_CLIENTS:-4}
JOBS=${BENCH_JOBS:-2}
PORT=${BENCH_PORT:-5495}

# loaded suffixes are 1 .. keys, a run's are (client_id + 1) * 10^9 + n
if [ "$LARGE" -ge 1000000000 ] || [ "$SMALL" -ge "$LARGE" ] || [ "$CLIENTS" -ge 100 ]; then
	echo "bench/scale: BENCH_SCALE_SMALL < BENCH_SCALE_KEYS < 10^9 and BENCH_CLIENTS < 100" >&2
	exit 1
fi

DIR=$IDEM_BUILD/bench_scale
RUNS=$DIR/runs.tsv
RESULTS=$DIR/results.md

log() { echo "bench/scale [$SECONDS s]: $*" >&2; }

log "building idem and installing it privately"
idem_private_install
trap 'idem_scratch_stop || true' EXIT
REUSED=
if [ -n "${BENCH_SCALE_REUSE:-}" ] && [ -f "$DIR/loaded" ] &&
	[ "$(cat "$DIR/loaded")" = "$SMALL $LARGE" ]; then
	IDEM_DATA=$DIR/data
	IDEM_SOCK=$(sed -n "s/^unix_socket_directories = '\(.*\)'$/\1/p" "$IDEM_DATA/postgresql.conf" | tail -1)
	IDEM_PORT=$(sed -n 's/^port = \([0-9]*\)$/\1/p' "$IDEM_DATA/postgresql.conf" | tail -1)
	if [ -z "$IDEM_SOCK" ] || [ -z "$IDEM_PORT" ] ||
		! as_server_user "$IDEM_BINDIR/pg_ctl" -D "$IDEM_DATA" -l "$DIR/server.log" -w start >/dev/null; then
		log "the loaded cluster did not start (is a server of an earlier run still up?):"
		tail -n 20 "$DIR/server.log" >&2
		exit 1
	fi
	REUSED=1
else
	idem_scratch_start "$DIR" "$PORT" <<-EOF
		idem.purge_interval = 0
		autovacuum = off
		shared_buffers = $SHARED_BUFFERS
		max_wal_size = 4GB
		checkpoint_timeout = 1h
		log_checkpoints = on
		synchronous_commit = on
	EOF
fi

PSQL=("$IDEM_BINDIR/psql" -h "$IDEM_SOCK" -p "$IDEM_PORT" -U postgres -X -q -At -v ON_ERROR_STOP=1)
PGBENCH=("$IDEM_BINDIR/pgbench" -h "$IDEM_SOCK" -p "$IDEM_PORT" -U postgres -n -M prepared -c "$CLIENTS" -j "$JOBS")
FP="'\\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'::bytea"

# load <db> <keys>: the database, its tables and its keys
load() {
	local db=$1 keys=$2 lo hi
	"${PSQL[@]}" -d postgres -c "CREATE DATABASE $db"
	"${PSQL[@]}" -d "$db" >/dev/null <<-EOF
		CREATE EXTENSION idem;
		CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
		INSERT INTO accounts SELECT i, 0 FROM generate_series(1, 1000) i;
		UPDATE accounts SET balance = balance;
		VACUUM accounts;
		CREATE TABLE ledger (id bigserial PRIMARY KEY, k text NOT NULL, account int NOT NULL, amount bigint NOT NULL);
	EOF
	for ((lo = 1; lo <= keys; lo += 1000000)); do
		hi=$((lo + 999999 < keys ? lo + 999999 : keys))
		"${PSQL[@]}" -d "$db" -c "SET synchronous_commit = off" -c "
			INSERT INTO idem.keys (scope, key, state, token, attempt, fingerprint, response,
			                       created_at, completed_at, expires_at)
			SELECT '', (((hashint8(i)::bigint & 2147483647) % 90000000 + 1) * 100000000000 + i)::text,
			       'completed', i, 1, $FP, jsonb_build_object('charge', i),
			       now(), now(), now() + interval '1 day'
			FROM generate_series($lo, $hi) i"
		if ((hi % 10000000 == 0)); then
			log "$db: $hi keys"
		fi
	done
	"${PSQL[@]}" -d "$db" -c "VACUUM ANALYZE"
}

if [ -z "$REUSED" ]; then
	log "loading $SMALL keys into scale_small and $LARGE into scale_large"
	load scale_small "$SMALL"
	load scale_large "$LARGE"
	echo "$SMALL $LARGE" >"$DIR/loaded"
fi

cat >"$DIR/idem1.sql" <<EOF
\set n :n + 1
\set k random(1, 90000000) * 100000000000 + (:client_id + 1) * 1000000000 + :n
\set a random(1, 1000)
\set m random(1, 97)
$(cat bench/idem1.sql)
EOF

# shellcheck source=bench/lib.sh
source bench/lib.sh
sleep 1
BASE=$(pgrep -c -P "$PM_PID")
q() { "${PSQL[@]}" -d postgres -c "$1"; }
settings() {
	q "ALTER SYSTEM SET full_page_writes = $1" >/dev/null
	q "ALTER SYSTEM SET checkpoint_timeout = '$2'" >/dev/null
	q "SELECT pg_reload_conf()" >/dev/null
	sleep 0.5
}

RUN_INDEX=0
printf 'run\tdb\tpayments\tcpu_us\twal_bytes\tfpi\tlatency_ms\n' >"$RUNS"
# turn <run> <db> <pgbench args...>: a CHECKPOINT, one pgbench run; its
# payments, backend CPU, WAL, page images and mean latency added to $RUNS
turn() {
	local run=$1 db=$2 t0 w0 f0 n lat v
	shift 2
	RUN_INDEX=$((RUN_INDEX + 1))
	q "CHECKPOINT" >/dev/null
	wait_backends_gone "$BASE"
	v=$(q "SELECT pg_current_wal_insert_lsn() - '0/0', wal_fpi FROM pg_stat_wal")
	read -r w0 f0 <<<"${v//|/ }"
	t0=$(children_ticks)
	if ! "${PGBENCH[@]}" -D n=$((RUN_INDEX * 1000000)) -f "$DIR/idem1.sql" "$@" "$db" >"$DIR/last.out" 2>&1; then
		log "$db failed:"
		sed 's/^/    /' "$DIR/last.out" >&2
		exit 1
	fi
	wait_backends_gone "$BASE"
	n=$(awk -F': *' '/^number of transactions actually processed/ { split($2, a, "/"); print a[1]; exit }' "$DIR/last.out")
	lat=$(awk '/^latency average/ { print $4; exit }' "$DIR/last.out")
	v=$(q "SELECT (pg_current_wal_insert_lsn() - '0/0') - $w0, wal_fpi - $f0, $lat FROM pg_stat_wal")
	printf '%s\t%s\t%s\t%s\t%s\n' "$run" "$db" "$n" "$((($(children_ticks) - t0) * TICK_US))" \
		"${v//|/$'\t'}" >>"$RUNS"
}

log "warming: the primary keys read in, a checkpoint, a turn of each database"
for db in scale_small scale_large; do
	"${PSQL[@]}" -d "$db" -c "CREATE EXTENSION IF NOT EXISTS pg_prewarm" \
		-c "SELECT pg_prewarm('idem.keys_pkey')" >/dev/null
done
q "CHECKPOINT" >/dev/null
settings off 1h
for db in scale_small scale_large; do
	turn warm "$db" -t $((PAYMENTS / CLIENTS))
done
log "cost: $ROUNDS rounds of $PAYMENTS payments a database, full_page_writes off"
for ((r = 0; r < ROUNDS; r++)); do
	for db in scale_small scale_large; do
		turn cost "$db" -t $((PAYMENTS / CLIENTS))
	done
done
settings on 30s
for method in $METHODS; do
	log "wal ($method): $ROUNDS rounds of $TURN s a database at $RATE payments/s, full_page_writes on, checkpoint_timeout 30 s"
	q "ALTER SYSTEM SET idem.wal_compression = $method" >/dev/null
	q "SELECT pg_reload_conf()" >/dev/null
	for ((r = 0; r < ROUNDS; r++)); do
		for db in scale_large scale_small; do
			turn "wal:$method" "$db" -R "$RATE" -T "$TURN"
		done
	done
done
# what the runs set is not left to a run that reuses the cluster
q "ALTER SYSTEM RESET ALL" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null

log "instructions: a payment's, counted by callgrind"
# shellcheck source=bench/callgrind.sh
source bench/callgrind.sh
# shared_buffers smaller: valgrind runs the server in its own memory; no
# page images (what they cost is the wal run's)
callgrind_start "$DIR/callgrind" -c shared_buffers=1GB -c full_page_writes=off
declare -A INSTRUCTIONS
FEW=200
MANY=1200
for db in scale_small scale_large; do
	RUN_INDEX=$((RUN_INDEX + 2))
	a=$(callgrind_count "" "$FEW" -D n=$((RUN_INDEX * 1000000 - 1000000)) -f "$DIR/idem1.sql" "$db") || exit 1
	b=$(callgrind_count "" "$MANY" -D n=$((RUN_INDEX * 1000000)) -f "$DIR/idem1.sql" "$db") || exit 1
	INSTRUCTIONS[$db]=$(((b - a) / (MANY - FEW)))
done
as_server_user "$IDEM_BINDIR/pg_ctl" -D "$IDEM_DATA" -m fast -t 300 stop >/dev/null
as_server_user "$IDEM_BINDIR/pg_ctl" -D "$IDEM_DATA" -l "$DIR/server.log" -w start >/dev/null

# every payment booked once and its key completed
for db in scale_small scale_large; do
	keys=$([ "$db" = scale_small ] && echo "$SMALL" || echo "$LARGE")
	got=$("${PSQL[@]}" -d "$db" -F ' ' -c "
		SELECT (SELECT count(*) FROM ledger) - (SELECT count(*) FROM idem.keys) + $keys,
		       (SELECT count(*) FROM idem.keys WHERE state <> 'completed')")
	if [ "$got" != "0 0" ]; then
		log "CHECK FAILED: $db: ledger rows less new keys, keys unfinished: $got (expected 0 0)"
		exit 1
	fi
done

SERVER=$("${PSQL[@]}" -d postgres -c "SHOW server_version")
SIZES=$("${PSQL[@]}" -d scale_large -F ' ' -c "
	SELECT pg_size_pretty(pg_relation_size('idem.keys')), pg_size_pretty(pg_relation_size('idem.keys_pkey'))")
{
	echo "PostgreSQL $SERVER, $(nproc) cores, shared_buffers $("${PSQL[@]}" -d postgres -c "SHOW shared_buffers"), synchronous_commit = on, $CLIENTS clients."
	echo "Large: $LARGE keys (heap, primary key: $SIZES); small: $SMALL keys. Per payment, medians of $ROUNDS rounds."
	echo
	awk -F'\t' -v small="$SMALL" -v large="$LARGE" -v methods="$METHODS" \
		-v ins_small="${INSTRUCTIONS[scale_small]}" -v ins_large="${INSTRUCTIONS[scale_large]}" '
		function median(a, n,    i, j, t) {
			for (i = 2; i <= n; i++)
				for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
			return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		function m(arr, k,    i, v) { for (i = 1; i <= cnt[k]; i++) v[i] = arr[k, i]; return median(v, cnt[k]) }
		NR > 1 && $1 != "warm" && $3 > 0 {
			k = $1 SUBSEP $2; i = ++cnt[k]
			cpu[k, i] = $4 / $3; wal[k, i] = $5 / $3; fpi[k, i] = $6 / $3; lat[k, i] = $7
		}
		function row(name, k) {
			printf "| %s | %.1f | %.2f | %.0f | %.2f |\n", name, m(cpu, k), m(lat, k), m(wal, k), m(fpi, k)
		}
		function ratio(k1, k2) {
			printf "| large / small | %.2f | %.2f | %.2f | %s |\n", m(cpu, k2) / m(cpu, k1),
				m(lat, k2) / m(lat, k1), m(wal, k2) / m(wal, k1),
				(m(fpi, k1) > 0 ? sprintf("%.2f", m(fpi, k2) / m(fpi, k1)) : "–")
		}
		END {
			print "| cost run, no page images | CPU µs | latency ms | WAL bytes | page images |"
			print "|---|---:|---:|---:|---:|"
			row(small " keys", "cost" SUBSEP "scale_small"); row(large " keys", "cost" SUBSEP "scale_large")
			ratio("cost" SUBSEP "scale_small", "cost" SUBSEP "scale_large")
			print ""
			printf "Instructions (callgrind): %d with %s keys, %d with %s, large / small %.2f.\n",
				ins_small, small, ins_large, large, ins_large / ins_small
			print ""
			print "| wal run, 30 s checkpoints | CPU µs | latency ms | WAL bytes | page images |"
			print "|---|---:|---:|---:|---:|"
			n = split(methods, ms, " ")
			for (j = 1; j <= n; j++) {
				r = "wal:" ms[j]
				row(ms[j] ", " small " keys", r SUBSEP "scale_small"); row(ms[j] ", " large " keys", r SUBSEP "scale_large")
				ratio(r SUBSEP "scale_small", r SUBSEP "scale_large")
			}
		}' "$RUNS"
} | tee "$RESULTS"
