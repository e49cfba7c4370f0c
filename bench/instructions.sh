#!/usr/bin/env bash
# bench/instructions.sh (make bench-instructions): the instructions a
# backend executes for one payment, counted by valgrind's callgrind, for
# idem1, dedupe1 and nodedup of bench/seeds (their statements as
# bench/seeds/loadgen.c sends them).  A count of instructions does not move
# when other work shares the cores, so it settles what tps on a noisy
# machine cannot: which of two designs does more work.  It leaves out what
# the kernel does (the WAL flush, the socket) and what waiting costs: those
# the designs share, and bench-seeds measures them.
#
# One scratch server runs under callgrind, its backends each counted apart.
# For each kind of request, one client sends it BENCH_FEW times, another
# BENCH_MANY times, in a backend of its own; (many - few) over the
# difference is the count of one request, without the backend's start and
# exit.  full_page_writes is off: what page images cost is bench-wal's.
# The counts of the larger backends stay, for callgrind_annotate:
# <kind>.<design>.callgrind.
# The kinds:
#   new     each request a new key (idem1, dedupe1, nodedup)
#   replay  each request a key completed before (idem1, dedupe1): a retry
# About two minutes.
#
# Settings (environment):
#   BENCH_FEW, BENCH_MANY   requests of the two backends   (200, 1200)
#   BENCH_PORT              port of the scratch server     (5494)
#   PG=17 (or 18, 19)       run on that server (test/servers.sh)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=test/lib.sh
source test/lib.sh

PG=${PG:-${BENCH_PG:-}}
if [ -n "$PG" ] && [ -z "${IDEM_FLAVOUR:-}" ]; then
	idem_on_server "$PG" bench/instructions.sh
	exit $?
fi

FEW=${BENCH_FEW:-200}
MANY=${BENCH_MANY:-1200}
PORT=${BENCH_PORT:-5494}
DIR=$IDEM_BUILD/bench_instructions
RESULTS=$DIR/results.md

log() { echo "bench/instructions [$SECONDS s]: $*" >&2; }

log "building idem and installing it privately"
idem_private_install
trap 'idem_scratch_stop || true' EXIT
idem_scratch_start "$DIR" "$PORT" < <(
	cat bench/seeds/server.conf
	echo "full_page_writes = off"
)
PSQL=("$IDEM_BINDIR/psql" -h "$IDEM_SOCK" -p "$IDEM_PORT" -U postgres -X -q -At -v ON_ERROR_STOP=1)
PGBENCH=("$IDEM_BINDIR/pgbench" -h "$IDEM_SOCK" -p "$IDEM_PORT" -U postgres -n -M prepared -c 1)
"${PSQL[@]}" -d postgres -c "CREATE DATABASE seeds"
"${PSQL[@]}" -d seeds -f bench/seeds/schema.sql >/dev/null

# The statements of bench/seeds/loadgen.c ("idem1": bench/idem1.sql, "d1",
# "pay"), with pgbench's variables for its parameters: key :k, account :a,
# amount :m; the fingerprint, a SHA-256, bench/idem1.sql's
FP='\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'
declare -A STATEMENT
STATEMENT[idem1]=$(grep -v '^--' bench/idem1.sql)
STATEMENT[dedupe1]="WITH id AS (SELECT nextval('ledger_id_seq') AS id),
     r AS (INSERT INTO dedupe1 (scope, key, state, token, attempt, fingerprint, response,
                                created_at, completed_at, expires_at)
           SELECT '', :k, 'completed', 0, 1, '$FP'::bytea, jsonb_build_object('charge', id.id),
                  now(), now(), now() + interval '1 day' FROM id
           ON CONFLICT DO NOTHING RETURNING 1),
     pay AS (INSERT INTO ledger (id, k, account, amount)
             SELECT id.id, :k, :a, :m FROM id, r RETURNING id),
     bal AS (UPDATE accounts SET balance = balance + :m
             WHERE id = :a AND EXISTS (SELECT FROM pay))
SELECT (SELECT id FROM pay),
       (SELECT d.response FROM dedupe1 d
        WHERE d.key = :k AND d.scope = '' AND NOT EXISTS (SELECT FROM pay));"
STATEMENT[nodedup]="WITH pay AS (INSERT INTO ledger (k, account, amount) VALUES (:k, :a, :m) RETURNING id),
     bal AS (UPDATE accounts SET balance = balance + :m WHERE id = :a)
SELECT id FROM pay;"

# script <design> <keys>: a pgbench script of the design; keys new: a key
# never seen; replay: 1 .. 300, every one completed by the load below
script() {
	local f=$DIR/$1.$2.sql
	{
		if [ "$2" = new ]; then
			echo '\set k random(1, 9000000000000000)'
		else
			echo '\set k random(1, 300)'
		fi
		echo '\set a random(1, 1000)'
		echo '\set m random(1, 97)'
		echo "${STATEMENT[$1]}"
	} >"$f"
	echo "$f"
}

# the keys the replays retry: 1 .. 300, in each design's table
for d in idem1 dedupe1; do
	cat >"$DIR/$d.load.sql" <<-EOF
		\\set n :n + 1
		\\set k :n
		\\set a 1
		\\set m 1
		${STATEMENT[$d]}
	EOF
	"${PGBENCH[@]}" -D n=0 -t 300 -f "$DIR/$d.load.sql" seeds >"$DIR/load.out" 2>&1 ||
		{ cat "$DIR/load.out" >&2; exit 1; }
done
if [ "$("${PSQL[@]}" -d seeds -c "SELECT (SELECT count(*) FROM idem.keys WHERE key::bigint <= 300 AND state = 'completed'),
		(SELECT count(*) FROM dedupe1 WHERE key::bigint <= 300)")" != "300|300" ]; then
	log "the replays' keys were not all loaded"
	exit 1
fi

log "restarting the server under callgrind"
# shellcheck source=bench/callgrind.sh
source bench/callgrind.sh
callgrind_start "$DIR/callgrind" -c idem.purge_interval=0

printf 'kind\tdesign\tinstructions\n' >"$DIR/counts.tsv"
for kind in new replay; do
	for d in idem1 dedupe1 nodedup; do
		[ "$kind:$d" != replay:nodedup ] || continue
		log "$kind: $d"
		s=$(script "$d" "$kind")
		a=$(callgrind_count "" "$FEW" -f "$s" seeds) || exit 1
		b=$(callgrind_count "$DIR/$kind.$d.callgrind" "$MANY" -f "$s" seeds) || exit 1
		printf '%s\t%s\t%s\n' "$kind" "$d" "$(((b - a) / (MANY - FEW)))" >>"$DIR/counts.tsv"
	done
done

SERVER=$("${PSQL[@]}" -d postgres -c "SHOW server_version")
{
	echo "PostgreSQL $SERVER, instructions a backend executes per request (callgrind), full_page_writes off."
	echo
	echo "| per request | idem1 | dedupe1 | nodedup | idem1 / dedupe1 |"
	echo "|---|---:|---:|---:|---:|"
	awk -F'\t' '
		function commas(n,    s, r) {
			s = sprintf("%d", n); r = ""
			while (length(s) > 3) { r = "," substr(s, length(s) - 2) r; s = substr(s, 1, length(s) - 3) }
			return s r
		}
		NR > 1 { v[$1, $2] = $3 }
		END {
			split("new replay", ks, " ")
			for (i = 1; i <= 2; i++) {
				k = ks[i]
				printf "| %s | %s | %s | %s | %.2f |\n", k == "new" ? "new key" : "retry of a completed key", commas(v[k, "idem1"]), commas(v[k, "dedupe1"]),
					((k, "nodedup") in v) ? commas(v[k, "nodedup"]) : "–", v[k, "idem1"] / v[k, "dedupe1"]
			}
		}' "$DIR/counts.tsv"
} | tee "$RESULTS"
