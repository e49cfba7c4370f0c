#!/usr/bin/env bash
# make demo: install what is missing, build idem, start a scratch cluster of
# its own under tmp_check/demo and show, with the SQL in test/demo/:
#   1. hundreds of concurrent retries of the same 20 payments (pgbench, the
#      in-transaction pattern): one charge per key, the rest replayed;
#   2. a retry with the same key and another amount: mismatch;
#   3. a two-phase payment whose first worker dies after the gateway call:
#      the second attempt, once the lease has run out, is claimed with the
#      first one's checkpoint and completes; the stale token is rejected.
# Then it stops the cluster and prints how to start it again.
# It installs only what building idem and running this needs (test/deps.sh
# demo), and says how long that and the whole demo took.
# Settings: IDEM_DEMO_PORT (default 5493), IDEM_DEMO_CLIENTS (16),
# IDEM_DEMO_TRIES (25 transactions per client), IDEM_DEMO_KEYS (20).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# How long the install and the whole demo took, from the first start (a
# run from a readable copy, below, inherits these).
if [ -z "${IDEM_STAGED:-}" ]; then
	IDEM_DEMO_T0=$(date +%s)
	bash test/deps.sh demo || exit 1
	IDEM_DEMO_T1=$(date +%s)
	export IDEM_DEMO_T0 IDEM_DEMO_T1
fi
. test/lib.sh
IDEM_KEEP_STAGE=1 idem_run_readable_copy test/demo.sh "$@"

if locale -a 2>/dev/null | grep -qix 'C\.utf-\?8'; then
	export LC_ALL=C.UTF-8
else
	export LC_ALL=C
fi
unset LANGUAGE PGHOST PGPORT PGDATABASE PGUSER PGSERVICE PGOPTIONS

CLIENTS=${IDEM_DEMO_CLIENTS:-16}
TRIES=${IDEM_DEMO_TRIES:-25}
KEYS=${IDEM_DEMO_KEYS:-20}
DEMO=$IDEM_BUILD/demo
LOG=$DEMO/server.log

die() {
	echo "demo: $*" >&2
	exit 1
}

echo "== build =="
idem_private_install || die "the build failed"
BIN=$IDEM_BINDIR
echo "built; installed privately in $IDEM_PRIVATE"

# Stop the cluster however the demo ends, and say how to get it back.
stop_cluster() {
	idem_scratch_stop || return
	local who=""
	[ "$(id -u)" = 0 ] && who="runuser -u postgres -- "
	echo ""
	echo "The demo cluster is stopped. To start it again and look around:"
	echo "    ${who}$BIN/pg_ctl -D $IDEM_DATA -l $LOG start"
	echo "    ${who}$BIN/psql -h $IDEM_SOCK -p $IDEM_PORT -U postgres demo"
}
trap stop_cluster EXIT

# The cluster lives in tmp_check/demo (a cluster an earlier demo left
# running there goes first), reached through a Unix socket only.
echo ""
echo "== a scratch cluster in $DEMO/data =="
idem_scratch_start "$DEMO" "${IDEM_DEMO_PORT:-5493}" <<EOF || die "the cluster did not start"
idem.database = 'demo'
max_connections = $((CLIENTS + 20))
EOF
SOCK=$IDEM_SOCK
PORT=$IDEM_PORT
echo "started (socket $SOCK, port $PORT)"

psql_demo() {
	as_server_user "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$SOCK" -p "$PORT" -U postgres "$@"
}
psql_demo -d postgres -c 'CREATE DATABASE demo' || die "could not create the database"
psql_demo -d demo -f test/demo/setup.sql || die "the set-up failed"

echo ""
echo "== 1. $CLIENTS clients retry the same $KEYS payments, $((CLIENTS * TRIES)) attempts in all =="
echo "Each attempt: BEGIN; idem_claim(key, fingerprint); if claimed: INSERT a charge,"
echo "UPDATE the balance, idem_complete(key, response); COMMIT.  (test/demo/pay.sql)"
as_server_user "$BIN/pgbench" -n -h "$SOCK" -p "$PORT" -U postgres \
	-c "$CLIENTS" -j 2 -t "$TRIES" -D keys="$KEYS" -f test/demo/pay.sql demo \
	>"$DEMO/pgbench.log" 2>&1
rc=$?
grep -E '^(number of (clients|transactions actually processed|failed transactions)|tps)' "$DEMO/pgbench.log" |
	sed 's/^/  pgbench: /'
if [ "$rc" != 0 ]; then
	grep -m 5 -E 'ERROR|error|abort' "$DEMO/pgbench.log"
	die "pgbench failed (see $DEMO/pgbench.log)"
fi
psql_demo -d demo -f test/demo/retries.sql || die "the retries did not come out as they should"
echo "idem's own counters (idem_stats):"
if ! stats=$(psql_demo -d demo -P footer=off -c \
	'SELECT claimed, completed, replayed, in_progress, mismatched FROM idem_stats WHERE datname = current_database()' 2>&1); then
	stats="  (not available: $stats)"
fi
echo "$stats"
stats_replayed=$(psql_demo -d demo -At -c \
	'SELECT replayed FROM idem_stats WHERE datname = current_database()' 2>/dev/null)

echo ""
echo "== 2. a retry with the same key and a different amount =="
psql_demo -d demo -f test/demo/mismatch.sql || die "the mismatch did not come out as it should"

echo ""
echo "== 3. a two-phase payment whose first worker dies =="
psql_demo -d demo -f test/demo/two_phase.sql || die "the two-phase payment did not come out as it should"

fact() {
	psql_demo -d demo -At -c "SELECT value FROM demo_facts WHERE name = '$1'"
}
echo ""
echo "== what this showed =="
echo "- $(fact attempts) concurrent attempts ($CLIENTS clients) at $(fact keys) payments made $(fact charges) charges, one per key;"
echo "  the other $(fact replayed) got status completed and replayed the stored response${stats_replayed:+ (idem_stats: replayed $stats_replayed)}."
echo "- The same key with a different amount was rejected: status $(fact mismatch)."
echo "- Two-phase: a retry during the lease got $(fact two_phase_in_progress) (retry after $(fact two_phase_retry_after));"
echo "  after it ran out, attempt $(fact two_phase_attempt) was claimed with checkpoint $(fact two_phase_checkpoint)"
echo "  (charge $(fact two_phase_charge)) and completed; the dead worker's stale token was rejected"
echo "  ($(fact two_phase_stale))."
now=$(date +%s)
echo "- Installing packages took $(( ${IDEM_DEMO_T1:-$now} - ${IDEM_DEMO_T0:-$now} ))s; the whole demo, $(( now - ${IDEM_DEMO_T0:-$now} ))s."
