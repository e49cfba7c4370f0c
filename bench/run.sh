#!/usr/bin/env bash
# bench/run.sh: idem against a PL/pgSQL implementation of the same contract
# and against bare SQL, measured with pgbench on one scratch cluster.
#
# Every variant runs for BENCH_DURATION seconds, once per round, the variants
# interleaved (A B C A B C ...), so that a noisy neighbour or a growing table
# weighs on all of them alike.  The report gives the median tps of each and
# ratios of the medians.  doc/performance.md explains the variants.
#
# Settings (environment):
#   BENCH_DURATION  seconds per pgbench run                 (5; quick: 2)
#   BENCH_ROUNDS    rounds, each running every variant once (8; quick: 2)
#   BENCH_WARMUP    seconds of one warm-up run per variant  (2; quick: 1)
#   BENCH_CLIENTS   pgbench clients (-c)                    (4)
#   BENCH_JOBS      pgbench threads (-j)                    (2)
#   BENCH_KEYS      completed keys and webhook ids loaded before the runs
#                                                           (100000; quick: 5000)
#   BENCH_PORT      port of the scratch server              (5494)
#   BENCH_ONLY      extended regexp: run only the variants whose name matches
#   BENCH_SERVER_CPUS, BENCH_CLIENT_CPUS
#                   CPU lists (taskset -c) for the server and for pgbench
#                   (default: pgbench on the last CPU, the server on the
#                   others, so that the load generator's own work does not
#                   take the server's cores)
#   BENCH_PIN=0     no pinning: the server and pgbench share every core
#   BENCH_QUICK=1   a short smoke run with the defaults marked quick
#   BENCH_BASELINE  another source tree of idem (an earlier commit's
#                   git archive, say): it is built and installed privately
#                   too and runs a second cluster of the same settings and
#                   data, and every variant also runs there, as
#                   <name>@baseline, in the same rounds; the report gives
#                   each variant over its twin.  Both clusters share the
#                   same CPUs, so a change shows against the same noise.
#   PG=17 (18, 19)  run on that server (test/servers.sh) instead of the host's
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=test/lib.sh
source test/lib.sh

# make bench PG=17 (18, 19): the same run on that server of test/servers.sh,
# in its copy of the tree
if [ -n "${PG:-}" ] && [ -z "${IDEM_FLAVOUR:-}" ]; then
	idem_on_server "$PG" bench/run.sh
	exit $?
fi

if [ "${BENCH_QUICK:-0}" = 1 ]; then
	DURATION=${BENCH_DURATION:-2}
	ROUNDS=${BENCH_ROUNDS:-2}
	WARMUP=${BENCH_WARMUP:-1}
	KEYS=${BENCH_KEYS:-5000}
else
	DURATION=${BENCH_DURATION:-5}
	ROUNDS=${BENCH_ROUNDS:-8}
	WARMUP=${BENCH_WARMUP:-2}
	KEYS=${BENCH_KEYS:-100000}
fi
CLIENTS=${BENCH_CLIENTS:-4}
JOBS=${BENCH_JOBS:-2}
PORT=${BENCH_PORT:-5494}
ONLY=${BENCH_ONLY:-}
SERVER_CPUS=${BENCH_SERVER_CPUS:-}
CLIENT_CPUS=${BENCH_CLIENT_CPUS:-}
NCPU=$(nproc)
if [ "${BENCH_PIN:-1}" != 0 ] && [ -z "$SERVER_CPUS$CLIENT_CPUS" ] && [ "$NCPU" -ge 2 ]; then
	SERVER_CPUS=0-$((NCPU - 2))
	CLIENT_CPUS=$((NCPU - 1))
fi
# pin <cpu list>: the words that run a command on those CPUs (none if unset)
pin() {
	if [ -n "$1" ]; then
		echo "taskset -c $1"
	fi
}

# The scripts build unique keys from client_id (below 100) and a counter that
# starts at a new million for each pgbench run (fewer than 1000 runs).
if [ "$CLIENTS" -ge 100 ] || [ "$ROUNDS" -gt 80 ] || [ "$ROUNDS" -lt 1 ]; then
	echo "bench: BENCH_CLIENTS must be below 100 and BENCH_ROUNDS between 1 and 80" >&2
	exit 1
fi

BENCH_DIR=$IDEM_BUILD/bench
RAW=$BENCH_DIR/raw.tsv
RESULTS=$BENCH_DIR/results.md
SCRIPTS=$IDEM_ROOT/bench/scripts

# name, pgbench script, synchronous_commit, group.  The order is the order of
# the runs inside a round.
VARIANTS="
claim_idem_sync      claim_idem.sql      on  claim
claim_plpgsql_sync   claim_plpgsql.sql   on  claim
claim_bare_sync      claim_bare.sql      on  claim
claim_doselect_sync  claim_doselect.sql  on  claim
claim_idem_async     claim_idem.sql      off claim
claim_plpgsql_async  claim_plpgsql.sql   off claim
claim_bare_async     claim_bare.sql      off claim
claim_doselect_async claim_doselect.sql  off claim
replay_idem          replay_idem.sql     off replay
replay_plpgsql       replay_plpgsql.sql  off replay
replay_select        replay_select.sql   off replay
webhook_idem         webhook_idem.sql    off webhook
webhook_plpgsql      webhook_plpgsql.sql off webhook
receive_idem         receive_idem.sql    off receive
receive_idem_list    receive_idem_list.sql off receive
receive_app          receive_app.sql     off receive
receive_app2         receive_app2.sql    off receive
claim_sqled_sync     claim_idem.sql      on  claim
claim_sqled_async    claim_idem.sql      off claim
replay_sqled         replay_idem.sql     off replay
webhook_sqled        webhook_idem.sql    off webhook
receive_sqled        receive_idem.sql    off receive
"
# The variants whose name has _sqled run idem's scripts against the SQL
# edition (idem_sql), in a database of their own, bench_sql, of the same
# cluster: the C edition and the SQL edition cannot share a database.
# The server_version_num a script needs, where older servers cannot run it
declare -A NEEDS=([claim_doselect.sql]=190000)

log() { echo "bench: $*" >&2; }

# --- the scratch cluster ---------------------------------------------------

BASELINE=${BENCH_BASELINE:-}
if [ -n "$BASELINE" ]; then
	BASELINE=$(cd "$BASELINE" && pwd) || exit 1
	# the baseline's builds go beside this tree's, in a directory of their own
	BASE_BUILD=$IDEM_BUILD/bench_baseline
	log "building the baseline in $BASELINE and installing it privately"
	(IDEM_ROOT=$BASELINE IDEM_BUILD=$BASE_BUILD IDEM_PRIVATE=$BASE_BUILD/install idem_private_install) || exit 1
fi

log "building idem and installing it privately"
idem_private_install
# the SQL edition beside it (no C: the scripts only)
SQLED_INSTALLED=1
make -C idem_sql -s install PG_CONFIG="$PG_CONFIG" DESTDIR="$IDEM_PRIVATE" >/dev/null || SQLED_INSTALLED=0

# The clusters: "main" of this tree's build, and "baseline" of
# BENCH_BASELINE's, whose variants' names end in @baseline
CLUSTERS=(main)
declare -A C_SOCK=() C_PORT=() C_DATA=() C_BINDIR=()
stop_clusters() {
	local c
	for c in "${!C_DATA[@]}"; do
		IDEM_DATA=${C_DATA[$c]} IDEM_BINDIR=${C_BINDIR[$c]} idem_scratch_stop || true
	done
}
trap stop_clusters EXIT
# start_cluster <cluster> <dir> <port>: a scratch cluster of the build
# in IDEM_BINDIR.  No TCP, a Unix socket only (test/lib.sh).  Autovacuum is
# off and run.sh vacuums between rounds instead, outside the measured time;
# checkpoints are kept out of the runs as far as the WAL volume allows.
start_cluster() {
	log "creating a cluster in $2/data"
	C_DATA[$1]=$2/data
	C_BINDIR[$1]=$IDEM_BINDIR
	idem_scratch_start "$2" "$3" $(pin "$SERVER_CPUS") <<-EOF || exit 1
		idem.database = 'bench'
		max_connections = 50
		shared_buffers = 256MB
		max_wal_size = 8GB
		checkpoint_timeout = 1h
		autovacuum = off
	EOF
	C_SOCK[$1]=$IDEM_SOCK
	C_PORT[$1]=$IDEM_PORT
}
start_cluster main "$BENCH_DIR" "$PORT"
if [ -n "$BASELINE" ]; then
	CLUSTERS+=(baseline)
	IDEM_BINDIR=$BASE_BUILD/install$("$PG_CONFIG" --bindir) \
		start_cluster baseline "$BENCH_DIR/baseline" "$((C_PORT[main] + 1))"
fi
# use_cluster <cluster or variant>: point psql, pgbench and the CPU figures
# at that cluster, or at the variant's
use_cluster() {
	local c=$1
	case $c in main|baseline) ;; *@baseline) c=baseline ;; *) c=main ;; esac
	export PGHOST=${C_SOCK[$c]} PGPORT=${C_PORT[$c]}
	case $1 in *_sqled*) BENCH_DB=bench_sql ;; *) BENCH_DB=bench ;; esac
	PM_PID=$(head -1 "${C_DATA[$c]}/postmaster.pid")
}

export PGUSER=postgres
PSQL="$IDEM_BINDIR/psql -X -q -v ON_ERROR_STOP=1"
PGBENCH=$IDEM_BINDIR/pgbench

# --- data loaded before the runs -------------------------------------------

FP="'\\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'::bytea"
RESP="'{\"charge\": \"ch_1\", \"amount\": 100}'::jsonb"

# Why the idem variants cannot run, by group (empty: they can)
declare -A IDEM_MISSING=()

# Run SQL; on failure remember the error's message for the group and go on.
load_idem() {
	local group=$1 sql=$2 out
	if ! out=$($PSQL -d bench -c "$sql" 2>&1); then
		IDEM_MISSING[$group]=$(echo "$out" | grep -m1 'ERROR' | sed 's/.*ERROR: *//' || true)
		log "idem cannot load the $group data: ${IDEM_MISSING[$group]}"
	fi
}

# load_cluster: the schemas and the data loaded before the runs, into the
# cluster of use_cluster
load_cluster() {
	"$IDEM_BINDIR/createdb" bench
	$PSQL -d bench -f bench/setup.sql
	$PSQL -d bench -f bench/plpgsql_idem.sql

	log "loading $KEYS completed keys and $KEYS webhook ids into each implementation"
	$PSQL -d bench -c "
		DO \$\$ BEGIN
			FOR i IN 1..$KEYS LOOP
				PERFORM plpgsql_idem.plpgsql_claim(i::text, $FP);
				PERFORM plpgsql_idem.plpgsql_complete(i::text, $RESP);
			END LOOP;
		END \$\$;"
	for t in bare doselect; do
		$PSQL -d bench -c "
			INSERT INTO $t.keys (scope, key, state, token, attempt, fingerprint,
			                     response, created_at, completed_at, expires_at)
			SELECT '', i::text, 'completed', nextval('$t.token_seq'), 1, $FP,
			       $RESP, now(), now(), now() + interval '24 hours'
			FROM generate_series(1, $KEYS) i;"
	done
	$PSQL -d bench -c "SELECT count(plpgsql_idem.plpgsql_webhook('stripe', i::text)) FROM generate_series(1, $KEYS) i;" >/dev/null
	load_idem replay "
		DO \$\$ BEGIN
			FOR i IN 1..$KEYS LOOP
				PERFORM idem_claim(i::text, $FP);
				PERFORM idem_complete(i::text, $RESP);
			END LOOP;
		END \$\$;"
	load_idem webhook "SELECT count(idem_webhook('stripe', i::text)) FROM generate_series(1, $KEYS) i;"
	# Signed Stripe deliveries: the sources 'recv' and 'recv_list' for
	# idem_webhook_receive, the same secret passed by receive_app and receive_app2,
	# which record under 'recv_app' and 'recv_app2'.  Each has the ids
	# evt_1 .. evt_$KEYS seen before.
	# bench.stripe_delivery(e) is the delivery of event evt_<e> as it arrives
	# (bench/stripe_delivery.sql).
	load_idem receive "
		CREATE EXTENSION pgcrypto;
		SET search_path = bench, public;
		$(cat bench/stripe_delivery.sql)
		RESET search_path;
		SELECT idem_webhook_source_set(s, 'stripe', ARRAY['whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH'],
			allowed_ips => ARRAY['192.0.2.0/24', '198.51.100.0/24']::cidr[])
		FROM unnest(ARRAY['recv', 'recv_list']) s;
		SELECT count(idem_webhook(s, 'evt_' || i))
		FROM unnest(ARRAY['recv', 'recv_list', 'recv_app', 'recv_app2']) s, generate_series(1, $KEYS) i;"
	# the SQL edition: this tree's only, not a baseline's
	[ "$1" != main ] || load_sqled
	$PSQL -d bench -c "VACUUM ANALYZE" -c "CHECKPOINT"
}
# load_sqled: the database of the SQL edition's variants, bench_sql, with the
# same data as bench's idem: the ledger, the keys, the webhook ids and the
# signed deliveries' source
load_sqled() {
	local group=sqled
	"$IDEM_BINDIR/createdb" bench_sql
	if [ "$SQLED_INSTALLED" != 1 ]; then
		IDEM_MISSING[sqled]="idem_sql did not build or install"
		return 0
	fi
	# (the keys in transactions of 1000 claims: each claim of the SQL
	# edition holds a lock to the end of its transaction)
	if ! out=$($PSQL -d bench_sql -c "CREATE EXTENSION idem_sql CASCADE" -f bench/ledger.sql -c "
		SET search_path = bench, public;
		$(cat bench/stripe_delivery.sql)
		RESET search_path;
		SELECT count(idem_webhook('stripe', i::text)) FROM generate_series(1, $KEYS) i;
		SELECT idem_webhook_source_set('recv', 'stripe', ARRAY['whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH'],
			allowed_ips => ARRAY['192.0.2.0/24', '198.51.100.0/24']::cidr[]);
		SELECT count(idem_webhook('recv', 'evt_' || i)) FROM generate_series(1, $KEYS) i;" -c "
		DO \$\$ BEGIN
			FOR i IN 1..$KEYS LOOP
				PERFORM idem_claim(i::text, $FP);
				PERFORM idem_complete(i::text, $RESP);
				IF i % 1000 = 0 THEN COMMIT; END IF;
			END LOOP;
		END \$\$;" -c "VACUUM ANALYZE" 2>&1); then
		IDEM_MISSING[sqled]=$(echo "$out" | grep -m1 'ERROR' | sed 's/.*ERROR: *//' || true)
		log "the SQL edition cannot load its data: ${IDEM_MISSING[sqled]}"
	fi
}
for c in "${CLUSTERS[@]}"; do
	use_cluster "$c"
	log "loading the $c cluster"
	load_cluster "$c"
done

# --- runs --------------------------------------------------------------------

RUN_INDEX=0
# pgbench one variant: run_variant <script> <sync> <pgbench args...>; the
# output goes to $BENCH_DIR/last.out
run_variant() {
	local script=$1 sync=$2
	shift 2
	RUN_INDEX=$((RUN_INDEX + 1))
	PGOPTIONS="-c synchronous_commit=$sync" $(pin "$CLIENT_CPUS") $PGBENCH -n -M prepared \
		-D n=$((RUN_INDEX * 1000000)) -D keys="$KEYS" -D events="$KEYS" \
		-f "$SCRIPTS/$script" "$@" "$BENCH_DB" >"$BENCH_DIR/last.out" 2>&1
}

# Every variant, each followed by its twin on the baseline's cluster if any
ALL_VARIANTS=$(while read -r line; do
	[ -n "$line" ] || continue
	echo "$line"
	[ -z "$BASELINE" ] || [[ $line == *_sqled* ]] || echo "${line%% *}@baseline ${line#* }"
done <<<"$VARIANTS")

use_cluster main
SERVER_NUM=$($PSQL -d bench -At -c "SHOW server_version_num")
SERVER_VERSION=$($PSQL -d bench -At -c "SHOW server_version")

declare -A SKIP=()
ACTIVE=()
while read -r name script sync group; do
	[ -n "$name" ] || continue
	if [ -n "$ONLY" ] && ! [[ $name =~ $ONLY ]]; then
		continue
	fi
	use_cluster "$name"
	if [ "${NEEDS[$script]:-0}" -gt "$SERVER_NUM" ]; then
		SKIP[$name]="needs PostgreSQL $((NEEDS[$script] / 10000)) or later, the server is ${SERVER_VERSION%% *}"
	elif [[ $name == *_sqled* ]] && [ -n "${IDEM_MISSING[sqled]:-}" ]; then
		SKIP[$name]="loading its data failed: ${IDEM_MISSING[sqled]}"
	elif [[ $name == *idem* || $group == receive ]] && [ -n "${IDEM_MISSING[$group]:-}" ]; then
		SKIP[$name]="loading its data failed: ${IDEM_MISSING[$group]}"
	elif ! run_variant "$script" "$sync" -c 1 -j 1 -t 1; then
		SKIP[$name]=$(grep -m1 -E 'ERROR|error' "$BENCH_DIR/last.out" | sed 's/.*ERROR: *//' || true)
		SKIP[$name]=${SKIP[$name]:-pgbench failed, see $BENCH_DIR/last.out}
	fi
	if [ -n "${SKIP[$name]:-}" ]; then
		log "skipping $name: ${SKIP[$name]}"
	else
		ACTIVE+=("$name $script $sync $group")
	fi
done <<<"$ALL_VARIANTS"

if [ ${#ACTIVE[@]} = 0 ]; then
	log "no variant can run"
	exit 1
fi

# shellcheck source=bench/lib.sh
source bench/lib.sh

printf 'round\tvariant\ttps\tserver_cpu_us_per_tx\tpgbench_cpu_us_per_tx\n' >"$RAW"
# The order of a round: the sets of variants compared with each other (same
# path, same synchronous_commit) in turn, each set rotated by the round
# number, so that no variant always runs first after the vacuum or always
# after the same neighbour.
round_order() {
	local round=$1 v name script sync group set sets=() i j n
	declare -A members=()
	for v in "${ACTIVE[@]}"; do
		read -r name script sync group <<<"$v"
		set="$group-$sync"
		[ -n "${members[$set]:-}" ] || sets+=("$set")
		members[$set]+="$v;"
	done
	for set in "${sets[@]}"; do
		IFS=';' read -r -a v <<<"${members[$set]%;}"
		n=${#v[@]}
		for ((i = 0; i < n; i++)); do
			j=$(((i + round) % n))
			echo "${v[$j]}"
		done
	done
}

# run_round <round> <seconds>: every active variant once; round 0 is the
# warm-up and is not recorded
run_round() {
	local round=$1 secs=$2 v name script sync group tps xacts cpu ccpu base t0 c0
	local order=()
	mapfile -t order < <(round_order "$round")
	for v in "${order[@]}"; do
		read -r name script sync group <<<"$v"
		use_cluster "$name"
		base=$(pgrep -c -P "$PM_PID")
		t0=$(children_ticks)
		c0=$(children_ticks $$)
		if run_variant "$script" "$sync" -c "$CLIENTS" -j "$JOBS" -T "$secs"; then
			tps=$(awk '/^tps = / { print $3; exit }' "$BENCH_DIR/last.out")
			xacts=$(awk -F': *' '/^number of transactions actually processed/ { split($2, a, "/"); print a[1]; exit }' "$BENCH_DIR/last.out")
			wait_backends_gone "$base"
			cpu=$(awk -v t="$(($(children_ticks) - t0))" -v us="$TICK_US" -v n="$xacts" \
				'BEGIN { if (n > 0) printf "%.1f", t * us / n }')
			# this shell's reaped children: pgbench, and a few tiny awks
			ccpu=$(awk -v t="$(($(children_ticks $$) - c0))" -v us="$TICK_US" -v n="$xacts" \
				'BEGIN { if (n > 0) printf "%.1f", t * us / n }')
		else
			log "$name failed in round $round:"
			sed 's/^/    /' "$BENCH_DIR/last.out" >&2
			tps=
		fi
		if [ "$round" -gt 0 ]; then
			printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$name" "${tps:-failed}" "${cpu:-}" "${ccpu:-}" >>"$RAW"
			log "round $round/$ROUNDS $name: ${tps:-failed} tps; CPU per transaction: server ${cpu:-?} us, pgbench ${ccpu:-?} us"
		fi
	done
	# dead rows of this round go now, not in the middle of someone's run
	for c in "${CLUSTERS[@]}"; do
		use_cluster "$c"
		$PSQL -d bench -c "VACUUM"
		[ "$c" != main ] || $PSQL -d bench_sql -c "VACUUM"
	done
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
log "load average before the runs: $LOAD_BEFORE (on $(nproc) cores)"
log "warm-up: ${WARMUP}s per variant"
run_round 0 "$WARMUP"
for ((r = 1; r <= ROUNDS; r++)); do
	run_round "$r" "$DURATION"
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# --- checks ----------------------------------------------------------------

# Every committed transaction of the claim runs claimed, booked and completed
# together: each implementation has as many completed new keys as ledger rows,
# and no key left processing.
# check_rows <database> <label prefix> <suffix> <k>: per implementation of
# the union <k> of (variant, state) rows, the new keys completed, the ledger
# rows of that variant and the keys left unfinished, one line each
check_rows() {
	$PSQL -d "$1" -At -F ' | ' -c "
		WITH k AS ($4), kc AS (
			SELECT variant, count(*) FILTER (WHERE state = 'completed') - $KEYS AS done,
			       count(*) FILTER (WHERE state <> 'completed') AS open
			FROM k GROUP BY variant
		), lc AS (
			SELECT variant, count(*) AS booked FROM bench.ledger GROUP BY variant
		)
		SELECT '$2' || kc.variant || '$3', kc.done, coalesce(lc.booked, 0), kc.open
		FROM kc LEFT JOIN lc USING (variant) ORDER BY 1;"
}
CHECKS=
for c in "${CLUSTERS[@]}"; do
	use_cluster "$c"
	sfx=@$c
	[ "$c" != main ] || sfx=
	CHECKS+=$(check_rows bench "" "$sfx" "
			SELECT 'idem' AS variant, state FROM idem.keys
			UNION ALL SELECT 'plpgsql', state FROM plpgsql_idem.keys
			UNION ALL SELECT 'bare', state FROM bare.keys
			UNION ALL SELECT 'doselect', state FROM doselect.keys
			UNION ALL SELECT 'webhook_idem', 'completed' FROM idem.webhooks WHERE source = 'stripe'
			UNION ALL SELECT 'receive_idem', 'completed' FROM idem.webhooks WHERE source = 'recv'
			UNION ALL SELECT 'receive_idem_list', 'completed' FROM idem.webhooks WHERE source = 'recv_list'
			UNION ALL SELECT 'receive_app', 'completed' FROM idem.webhooks WHERE source = 'recv_app'
			UNION ALL SELECT 'receive_app2', 'completed' FROM idem.webhooks WHERE source = 'recv_app2'
			UNION ALL SELECT 'webhook_plpgsql', 'completed' FROM plpgsql_idem.webhooks")$'\n'
	# the SQL edition's, in its own database (main only; none if it did not load)
	if [ "$c" = main ] && [ -z "${IDEM_MISSING[sqled]:-}" ]; then
		CHECKS+=$(check_rows bench_sql "sqled " "" "
			SELECT 'idem' AS variant, state FROM idem.keys
			UNION ALL SELECT 'webhook_idem', 'completed' FROM idem.webhooks WHERE source = 'stripe'
			UNION ALL SELECT 'receive_idem', 'completed' FROM idem.webhooks WHERE source = 'recv'")$'\n'
	fi
done
CHECKS=${CHECKS%$'\n'}

if awk -F' [|] ' '$2 != $3 || $4 != 0 { bad = 1 } END { exit !bad }' <<<"$CHECKS"; then
	log "CHECK FAILED: keys and ledger rows disagree:"
	echo "$CHECKS" >&2
fi

# --- report ----------------------------------------------------------------

# stats <column>: per variant, the median, min, max and count of a column
# of the raw file (3: tps, 4: server CPU per transaction, 5: pgbench's)
stats() {
	awk -F'\t' -v c="$1" 'NR > 1 && $3 != "failed" && $c != "" { v[$2] = v[$2] " " $c }
		END {
			for (name in v) {
				n = split(substr(v[name], 2), a, " ")
				for (i = 2; i <= n; i++)	# insertion sort: a handful of values
					for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
				med = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
				printf "%s %.1f %.1f %.1f %d\n", name, med, a[1], a[n], n
			}
		}' "$RAW"
}
TPS=$(stats 3)
CPU=$(stats 4)
CCPU=$(stats 5)

median_of() { awk -v n="$2" '$1 == n { print $2 }' <<<"$1"; }

# The per-round ratios a/b of tps: "min to max (median m)"
round_ratios() {
	awk -F'\t' -v a="$1" -v b="$2" '
		$2 == a && $3 != "failed" { x[$1] = $3 }
		$2 == b && $3 != "failed" { y[$1] = $3 }
		END {
			n = 0
			for (r in x) if ((r in y) && y[r] > 0) q[++n] = x[r] / y[r]
			if (n == 0) exit
			for (i = 2; i <= n; i++)
				for (j = i; j > 1 && q[j - 1] > q[j]; j--) { t = q[j]; q[j] = q[j - 1]; q[j - 1] = t }
			med = (n % 2) ? q[(n + 1) / 2] : (q[n / 2] + q[n / 2 + 1]) / 2
			printf "%.2f to %.2f (median %.2f)", q[1], q[n], med
		}' "$RAW"
}

# A warning when a round of a or b ran below 0.8 of that variant's median:
# something else took the CPU then, and the ratio of the medians may be off
# by more than the difference measured.  The CPU per transaction is the
# better guide in such a run (time the backends did not run is not in it).
noise_note() {
	awk -v a="$1" -v b="$2" '
		($1 == a || $1 == b) && $2 > 0 && $3 / $2 < 0.8 { low = 1 }
		END { if (low) printf "noisy: a round ran below 0.8 of its median; compare the CPU figures, or run again" }' <<<"$TPS"
}

{
	echo "# idem benchmark results"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- server: $("$IDEM_BINDIR/postgres" --version)"
	echo "- machine: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
	echo "- load average before / after: $LOAD_BEFORE / $LOAD_AFTER"
	echo "- pgbench -M prepared -c $CLIENTS -j $JOBS, ${DURATION}s per run, $ROUNDS interleaved rounds after a ${WARMUP}s warm-up; $KEYS keys and webhook ids loaded"
	if [ -n "$SERVER_CPUS$CLIENT_CPUS" ]; then
		echo "- pinned: server on CPUs ${SERVER_CPUS:-all}, pgbench on CPUs ${CLIENT_CPUS:-all}"
	else
		echo "- not pinned: the server and pgbench share every core"
	fi
	if [ -n "$BASELINE" ]; then
		echo "- <name>@baseline: the same run on a second cluster, with idem built from $BASELINE"
	fi
	echo
	echo "CPU per transaction: user and system time of the server's backends, and"
	echo "of pgbench, divided by the transactions of the run (medians over the rounds)."
	echo
	echo "| variant | synchronous_commit | median tps | min | max | runs | server CPU µs/tx | pgbench CPU µs/tx |"
	echo "|---|---|---:|---:|---:|---:|---:|---:|"
	while read -r name script sync group; do
		[ -n "$name" ] || continue
		if [ -n "${SKIP[$name]:-}" ]; then
			echo "| $name | $sync | skipped: ${SKIP[$name]} | | | | | |"
			continue
		fi
		line=$(awk -v n="$name" '$1 == n' <<<"$TPS")
		[ -n "$line" ] || continue
		read -r _ med lo hi runs <<<"$line"
		printf '| %s | %s | %.0f | %.0f | %.0f | %d | %s | %s |\n' "$name" "$sync" \
			"$med" "$lo" "$hi" "$runs" "$(median_of "$CPU" "$name")" "$(median_of "$CCPU" "$name")"
	done <<<"$ALL_VARIANTS"
	echo
	echo "The CPU columns give b / a (above 1: a needs less).  When the cores are the"
	echo "limit, the tps ratio tends to the server + pgbench one."
	echo
	echo "| a / b | tps: ratio of medians | tps: per round | server CPU per tx | server + pgbench CPU per tx | noise |"
	echo "|---|---:|---|---:|---:|---|"
	while read -r a b; do
		[ -n "$a" ] || continue
		ma=$(median_of "$TPS" "$a")
		mb=$(median_of "$TPS" "$b")
		if [ -n "$ONLY" ] && ! [[ $a =~ $ONLY || $b =~ $ONLY ]]; then
			continue
		fi
		if [ -z "$ma" ] || [ -z "$mb" ]; then
			echo "| $a / $b | n/a (not measured) | | | | |"
			continue
		fi
		q=$(awk -v x="$ma" -v y="$mb" 'BEGIN { printf "%.2f", x / y }')
		cq=$(awk -v x="$(median_of "$CPU" "$a")" -v y="$(median_of "$CPU" "$b")" \
			'BEGIN { if (x > 0 && y > 0) printf "%.2f", y / x }')
		tq=$(awk -v x="$(median_of "$CPU" "$a")" -v y="$(median_of "$CPU" "$b")" \
			-v cx="$(median_of "$CCPU" "$a")" -v cy="$(median_of "$CCPU" "$b")" \
			'BEGIN { if (x + cx > 0 && y + cy > 0) printf "%.2f", (y + cy) / (x + cx) }')
		echo "| $a / $b | $q | $(round_ratios "$a" "$b") | ${cq:-} | ${tq:-} | $(noise_note "$a" "$b") |"
	done <<-EOF
		claim_idem_async claim_plpgsql_async
		claim_idem_async claim_bare_async
		claim_idem_async claim_doselect_async
		claim_idem_sync claim_plpgsql_sync
		claim_idem_sync claim_bare_sync
		claim_idem_sync claim_doselect_sync
		replay_idem replay_plpgsql
		replay_idem replay_select
		webhook_idem webhook_plpgsql
		receive_idem receive_app2
		receive_idem receive_app
		receive_idem_list receive_app2
		receive_idem_list receive_app
		claim_sqled_async claim_plpgsql_async
		claim_sqled_sync claim_plpgsql_sync
		claim_idem_async claim_sqled_async
		claim_idem_sync claim_sqled_sync
		replay_sqled replay_plpgsql
		replay_idem replay_sqled
		webhook_sqled webhook_plpgsql
		webhook_idem webhook_sqled
		receive_idem receive_sqled
		$(awk '$1 ~ /@baseline$/ { n = $1; sub(/@baseline$/, "", n); print n, $1 }' <<<"$ALL_VARIANTS")
	EOF
	echo
	echo "Checks: every committed transaction completed its key (or recorded its"
	echo "event) and booked its ledger row together, and no key was left unfinished."
	echo
	echo "| implementation | new keys completed / events recorded | ledger rows | keys unfinished |"
	echo "|---|---:|---:|---:|"
	sed 's/^/| /; s/$/ |/' <<<"$CHECKS"
} >"$RESULTS"

cat "$RESULTS"
log "results in $RESULTS, every run in $RAW"
