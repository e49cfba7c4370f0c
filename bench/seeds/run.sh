#!/usr/bin/env bash
# bench/seeds/run.sh (make bench-seeds): idem head to head with the Redis-lock
# design and a dedupe table, on one payment (a ledger insert and a balance
# update), through one load generator (bench/seeds/loadgen.c, libpq and
# hiredis) with many clients and a share of retries.
#
# Designs: redis (Redis 7 with appendfsync everysec, and always), dedupe,
# dedupe1 (the best hand-written record: idem's row, inserted ON CONFLICT DO
# NOTHING beside the payment in one statement), idem5 (idem
# in-transaction), idem1 (idem in one statement), nodedup (the payment
# alone).  Every design runs once per round, the designs
# interleaved, first on the loopback and then from a second network
# namespace whose packets to and from the servers are held 0.5 ms each way
# (bench/seeds/nfqdelay.c; the kernel here has no netem).  Then the faults,
# each for the Redis-lock design and idem: a gateway call longer than the
# lock's TTL, Redis restarted, the client killed between the payment's
# commit and SET SUCCESS, PostgreSQL stopped with -m immediate.  The last
# line compares the double charges and the throughput with the round trip.
# doc/performance.md explains the method and gives the figures.
#
# Settings (environment):
#   BENCH_QUICK=1      a smoke run of under two minutes
#   SEEDS_SECONDS      seconds per run                        (10; quick: 2)
#   SEEDS_ROUNDS       rounds; 0: the faults only             (3; quick: 1)
#   SEEDS_CLIENTS      concurrent clients                     (16)
#   SEEDS_RETRY_SEQ    share of requests retrying a finished payment (0.10)
#   SEEDS_RETRY_DUP    share duplicating a payment in flight  (0.05)
#   SEEDS_DELAY_US     delay each way with the round trip     (500)
#   SEEDS_FAULT_TTL    the lock's TTL (and idem's lease) in the faults, s
#                                                             (3; quick: 1)
#   SEEDS_NETNS=0      no network namespaces: loopback only
#   SEEDS_FAULTS=0     no fault runs
#   SEEDS_PG_PORT, SEEDS_REDIS_PORT                           (5496, 6396)
# As root it makes two network namespaces (servers, client) and removes them
# at the end, also on failure; elsewhere it measures the loopback only.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=test/lib.sh
source test/lib.sh

SEEDS_DIR=$IDEM_BUILD/seeds
NS_SRV=idem-seeds-srv-$$
NS_CLI=idem-seeds-cli-$$
SRV_ADDR=10.203.17.1
CLI_ADDR=10.203.17.2

# A progress line on standard error, with the seconds since the start
log() { echo "seeds [$SECONDS s]: $*" >&2; }

# --- outside: packages, namespaces, then this script again inside ---------

# Remove the namespaces and whatever still runs in them
remove_namespaces() {
	local ns pid
	for ns in "$NS_CLI" "$NS_SRV"; do
		ip netns list 2>/dev/null | grep -qw "$ns" || continue
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -9 "$pid" 2>/dev/null || true
		done
		ip netns del "$ns" 2>/dev/null || true
	done
}

# Make the server and client namespaces and the link between them; false
# (and nothing left behind) when this machine does not allow it
make_namespaces() {
	{
		ip netns add "$NS_SRV" &&
		ip netns add "$NS_CLI" &&
		ip link add seeds-s$$ netns "$NS_SRV" type veth peer name seeds-c$$ netns "$NS_CLI" &&
		ip -n "$NS_SRV" addr add "$SRV_ADDR/24" dev seeds-s$$ &&
		ip -n "$NS_CLI" addr add "$CLI_ADDR/24" dev seeds-c$$ &&
		ip -n "$NS_SRV" link set lo up &&
		ip -n "$NS_CLI" link set lo up &&
		ip -n "$NS_SRV" link set seeds-s$$ up &&
		ip -n "$NS_CLI" link set seeds-c$$ up &&
		# every packet between the client and the servers, both ways, goes
		# through queue 0 of the client's namespace (nfqdelay holds it)
		ip netns exec "$NS_CLI" iptables -A OUTPUT -d "$SRV_ADDR" -j NFQUEUE --queue-num 0 --queue-bypass &&
		ip netns exec "$NS_CLI" iptables -A INPUT -s "$SRV_ADDR" -j NFQUEUE --queue-num 0 --queue-bypass
	} >"$SEEDS_DIR/netns.log" 2>&1 && return 0
	remove_namespaces
	return 1
}

if [ -z "${SEEDS_INSIDE:-}" ]; then
	bash test/deps.sh
	bash bench/seeds/deps.sh
	mkdir -p "$SEEDS_DIR"
	trap remove_namespaces EXIT
	if [ "${SEEDS_NETNS:-1}" = 0 ]; then
		log "SEEDS_NETNS=0: the loopback only, no injected round trip"
		export SEEDS_NS=
	elif [ "$(id -u)" != 0 ]; then
		log "not root: no network namespaces, so no injected round trip; the loopback only"
		export SEEDS_NS=
	elif ! make_namespaces; then
		log "network namespaces or iptables' NFQUEUE are not allowed here ($(tail -n 1 "$SEEDS_DIR/netns.log")):"
		log "the loopback only, no injected round trip"
		export SEEDS_NS=
	else
		export SEEDS_NS=1
	fi
	export SEEDS_INSIDE=1 SEEDS_NS_SRV=$NS_SRV SEEDS_NS_CLI=$NS_CLI
	rc=0
	if [ -n "$SEEDS_NS" ]; then
		ip netns exec "$NS_SRV" bash "${BASH_SOURCE[0]}" || rc=$?
	else
		bash "${BASH_SOURCE[0]}" || rc=$?
	fi
	exit "$rc"
fi

# --- inside the servers' namespace (or on the host) ------------------------

NS_SRV=$SEEDS_NS_SRV
NS_CLI=$SEEDS_NS_CLI
QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then
	SECONDS_RUN=${SEEDS_SECONDS:-2}
	ROUNDS=${SEEDS_ROUNDS:-1}
	WARMUP=0
	FAULT_SECONDS=2
	FAULT_TTL=${SEEDS_FAULT_TTL:-1}
	KILL_CYCLES=1
	# the faults' designs: the Redis lock, and idem as each fault needs it
	F1_DESIGNS="redis idem5 idem2p"
	F3_DESIGNS="redis idem1"
	F4_DESIGNS="redis idem1"
else
	SECONDS_RUN=${SEEDS_SECONDS:-10}
	ROUNDS=${SEEDS_ROUNDS:-3}
	WARMUP=1
	FAULT_SECONDS=8
	FAULT_TTL=${SEEDS_FAULT_TTL:-3}
	KILL_CYCLES=3
	F1_DESIGNS="redis idem5 idem2p"
	F3_DESIGNS="redis idem1 idem5"
	F4_DESIGNS="redis idem1 idem5"
fi
CLIENTS=${SEEDS_CLIENTS:-16}
RETRY_SEQ=${SEEDS_RETRY_SEQ:-0.10}
RETRY_DUP=${SEEDS_RETRY_DUP:-0.05}
DELAY_US=${SEEDS_DELAY_US:-500}
PG_PORT=${SEEDS_PG_PORT:-5496}
REDIS_PORT=${SEEDS_REDIS_PORT:-6396}
BIN=$SEEDS_DIR/bin
RAW=$SEEDS_DIR/raw.tsv
FAULTS=$SEEDS_DIR/faults.tsv
RESULTS=$SEEDS_DIR/results.md
CHART=$SEEDS_DIR/seeds.png
mkdir -p "$SEEDS_DIR"

if [ -z "$SEEDS_NS" ]; then
	# on the host, ports others may use: take free ones
	while (echo >"/dev/tcp/127.0.0.1/$PG_PORT") 2>/dev/null; do PG_PORT=$((PG_PORT + 1)); done
	while (echo >"/dev/tcp/127.0.0.1/$REDIS_PORT") 2>/dev/null; do REDIS_PORT=$((REDIS_PORT + 1)); done
fi

log "building idem and installing it privately; building the load generator"
idem_private_install
mkdir -p "$BIN"
gcc -O2 -Wall -Wextra -Wno-unused-parameter -pthread -I"$(pg_config --includedir)" \
	-o "$BIN/loadgen" bench/seeds/loadgen.c -lpq -lhiredis
gcc -O2 -Wall -Wextra -Wno-unused-parameter \
	-o "$BIN/nfqdelay" bench/seeds/nfqdelay.c -lnetfilter_queue -lnfnetlink

REDIS_DIR=$SEEDS_DIR/redis
REDIS_PID=
NFQ_PID=
PSQL="$IDEM_BINDIR/psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p $PG_PORT -U postgres"

# Stop everything this run started
cleanup() {
	if [ -n "$NFQ_PID" ]; then
		kill "$NFQ_PID" 2>/dev/null || true
	fi
	redis_stop
	idem_scratch_stop || true
}
trap cleanup EXIT

# Start Redis with appendfsync $1 (everysec, always, or "none": no persistence)
redis_start() {
	local fsync=$1 i
	mkdir -p "$REDIS_DIR"
	if [ "$(id -u)" = 0 ]; then
		chown postgres: "$REDIS_DIR"
	fi
	{
		echo "port $REDIS_PORT"
		echo "bind 127.0.0.1${SEEDS_NS:+ $SRV_ADDR}"
		echo "protected-mode no"
		echo "dir $REDIS_DIR"
		echo "save \"\""
		echo "daemonize yes"
		echo "pidfile $REDIS_DIR/redis.pid"
		echo "logfile $REDIS_DIR/redis.log"
		if [ "$fsync" = none ]; then
			echo "appendonly no"
		else
			echo "appendonly yes"
			echo "appendfsync $fsync"
		fi
	} >"$REDIS_DIR/redis.conf"
	as_server_user redis-server "$REDIS_DIR/redis.conf"
	# up once it answers PONG: while it reads its append-only file it
	# answers LOADING
	for ((i = 0; i < 1200; i++)); do
		[ "$(redis-cli -p "$REDIS_PORT" PING 2>/dev/null)" = PONG ] && break
		sleep 0.05
	done
	REDIS_PID=$(cat "$REDIS_DIR/redis.pid")
}

# Stop Redis (SHUTDOWN NOSAVE, as the fault does) if it runs
redis_stop() {
	local i
	[ -n "$REDIS_PID" ] || return 0
	redis-cli -p "$REDIS_PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
	for ((i = 0; i < 100; i++)); do
		kill -0 "$REDIS_PID" 2>/dev/null || break
		sleep 0.05
	done
	REDIS_PID=
}

# --- servers and schema ------------------------------------------------------

log "starting PostgreSQL (synchronous_commit = on) and Redis (appendonly, appendfsync everysec)"
# (a redirection, not a pipe: the function must run in this shell)
idem_scratch_start "$SEEDS_DIR/pg" "$PG_PORT" < <(
	echo "listen_addresses = '127.0.0.1${SEEDS_NS:+,$SRV_ADDR}'"
	cat bench/seeds/server.conf
)
PG_PORT=$IDEM_PORT
if [ -n "$SEEDS_NS" ]; then
	echo "host all all $CLI_ADDR/32 trust" | as_server_user tee -a "$IDEM_DATA/pg_hba.conf" >/dev/null
	as_server_user "$IDEM_BINDIR/pg_ctl" -D "$IDEM_DATA" reload >/dev/null
fi
# a fresh Redis: nothing from an earlier run (its AOF would replay old keys)
rm -rf "$REDIS_DIR"
redis_start everysec

"$IDEM_BINDIR/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres seeds
$PSQL -d seeds -f bench/seeds/schema.sql

# PM_PID, TICK_US, children_ticks, self_ticks, wait_backends_gone
# shellcheck source=bench/lib.sh
source bench/lib.sh

# loadgen on the loopback (here) or from the client namespace ($1: lo, rtt)
loadgen() {
	local where=$1
	shift
	if [ "$where" = rtt ]; then
		ip netns exec "$NS_CLI" "$BIN/loadgen" \
			--pg "host=$SRV_ADDR port=$PG_PORT dbname=seeds user=postgres" \
			--redis "$SRV_ADDR:$REDIS_PORT" "$@"
	else
		"$BIN/loadgen" --pg "host=127.0.0.1 port=$PG_PORT dbname=seeds user=postgres" \
			--redis "127.0.0.1:$REDIS_PORT" "$@"
	fi
}

PLACES=lo
if [ -n "$SEEDS_NS" ]; then
	ip netns exec "$NS_CLI" "$BIN/nfqdelay" 0 "$DELAY_US" >"$SEEDS_DIR/nfqdelay.log" 2>&1 &
	NFQ_PID=$!
	sleep 0.3
	if ! kill -0 "$NFQ_PID" 2>/dev/null; then
		log "the delay could not start ($(tail -n 1 "$SEEDS_DIR/nfqdelay.log")): the loopback only"
		NFQ_PID=
	else
		PLACES="lo rtt"
	fi
fi
RTT_LO=$(loadgen lo --ping 200)
log "round trips on the loopback: $RTT_LO"
RTT_NET=
if [[ $PLACES == *rtt* ]]; then
	RTT_NET=$(loadgen rtt --ping 200)
	log "round trips with ${DELAY_US} us each way: $RTT_NET"
fi

# --- the runs ------------------------------------------------------------------

# variant, design, Redis appendfsync (for redis), in the order of a round
VARIANTS="
nodedup        nodedup -
redis_everysec redis   everysec
redis_always   redis   always
dedupe         dedupe  -
dedupe1        dedupe1 -
idem5          idem5   -
idem1          idem1   -
"

# the value of key $1 in a loadgen line $2
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }

printf 'round\tplace\tvariant\trps\tp50_us\tp99_us\tp99_new_us\trequests\twaits\tretries\tgaveup\twrong\tpg_cpu_us\tredis_cpu_us\tclient_cpu_us\tdelay_cpu_us\n' >"$RAW"

# run_one <round> <place> <variant> <design> <fsync> <seconds>
run_one() {
	local round=$1 place=$2 variant=$3 design=$4 fsync=$5 secs=$6 out base pg0 rd0 nq0 n pg rd nq
	if [ "$design" = redis ]; then
		redis-cli -p "$REDIS_PORT" CONFIG SET appendfsync "$fsync" >/dev/null
	fi
	base=$(pgrep -c -P "$PM_PID")
	pg0=$(children_ticks)
	rd0=$(self_ticks "$REDIS_PID")
	nq0=$( [ -n "$NFQ_PID" ] && self_ticks "$NFQ_PID" || echo 0)
	if ! out=$(loadgen "$place" --design "$design" --clients "$CLIENTS" --seconds "$secs" \
		--retry-seq "$RETRY_SEQ" --retry-dup "$RETRY_DUP" --prefix "$variant/$place/r$round" 2>>"$SEEDS_DIR/loadgen.log"); then
		log "$variant on $place failed: see $SEEDS_DIR/loadgen.log"
		return 0
	fi
	wait_backends_gone "$base"
	n=$(field requests "$out")
	[ "${n:-0}" -gt 0 ] || n=1
	pg=$(awk -v t="$(($(children_ticks) - pg0))" -v us="$TICK_US" -v n="$n" 'BEGIN { printf "%.1f", t * us / n }')
	rd=$(awk -v t="$(($(self_ticks "$REDIS_PID") - rd0))" -v us="$TICK_US" -v n="$n" 'BEGIN { printf "%.1f", t * us / n }')
	nq=0
	if [ "$place" = rtt ] && [ -n "$NFQ_PID" ]; then
		nq=$(awk -v t="$(($(self_ticks "$NFQ_PID") - nq0))" -v us="$TICK_US" -v n="$n" 'BEGIN { printf "%.1f", t * us / n }')
	fi
	[ "$round" = 0 ] && return 0
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$place" "$variant" \
		"$(field rps "$out")" "$(field p50_us "$out")" "$(field p99_us "$out")" "$(field p99_new_us "$out")" \
		"$n" "$(field waits "$out")" "$(field retries "$out")" "$(field gaveup "$out")" \
		"$(field wrong_replays "$out")" "$pg" "$rd" "$(field client_cpu_us_per_req "$out")" "$nq" >>"$RAW"
	log "round $round $place $variant: $(field rps "$out") req/s, p50 $(field p50_us "$out") us, p99 $(field p99_us "$out") us; CPU per request: postgres $pg us, redis $rd us, client $(field client_cpu_us_per_req "$out") us${NFQ_PID:+, delay $nq us}"
}

# Every variant once, in an order rotated by the round number
run_round() {
	local round=$1 secs=$2 place i j n name design fsync
	local -a v
	mapfile -t v < <(grep -v '^$' <<<"$VARIANTS")
	n=${#v[@]}
	for place in $PLACES; do
		for ((i = 0; i < n; i++)); do
			j=$(((i + round) % n))
			read -r name design fsync <<<"${v[$j]}"
			run_one "$round" "$place" "$name" "$design" "$fsync" "$secs"
		done
	done
	$PSQL -d seeds -c "VACUUM ANALYZE"
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
log "load average before the runs: $LOAD_BEFORE (on $(nproc) cores)"
if [ "$ROUNDS" -gt 0 ] && [ "$WARMUP" -gt 0 ]; then
	log "warm-up"
	run_round 0 "$WARMUP"
fi
for ((r = 1; r <= ROUNDS; r++)); do
	run_round "$r" "$SECONDS_RUN"
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
# the faults run on the loopback: stop the delay, which prints how late it was
if [ -n "$NFQ_PID" ]; then
	kill "$NFQ_PID" 2>/dev/null || true
	wait "$NFQ_PID" 2>/dev/null || true
	NFQ_PID=
fi

# check <design> <prefix>: the check line of loadgen for keys <prefix>-*
check() {
	loadgen lo --design "$1" --check --prefix "$2"
}

# --- the faults ---------------------------------------------------------------

printf 'fault\tdesign\tdouble_charged_keys\tlost_results\tnote\n' >"$FAULTS"
# fault_row <fault> <design> <check line> <note>
fault_row() {
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$(field double_charged_keys "$3")" "$(field lost_results "$3")" "$4" >>"$FAULTS"
	log "fault $1, $2: double-charged keys $(field double_charged_keys "$3"), lost results $(field lost_results "$3") ($4)"
}

# fault_load <design> <prefix> <seconds> [loadgen options]: a run with short
# TTL and lease, patient callers (they retry until answered); its line
fault_load() {
	local design=$1 prefix=$2 secs=$3
	shift 3
	loadgen lo --design "$design" --clients 16 --seconds "$secs" --retry-seq "$RETRY_SEQ" \
		--retry-dup "$RETRY_DUP" --ttl "$FAULT_TTL" --patience 60 --prefix "$prefix" "$@" 2>>"$SEEDS_DIR/faults.log"
}

if [ "${SEEDS_FAULTS:-1}" != 0 ]; then
	# 1. a gateway call longer than the lock's TTL: 2% of the calls take
	# TTL + 1 s, and a fifth of the requests duplicate one in flight.  idem
	# in one statement has no place for a gateway call; idem
	# in-transaction makes it inside the claim's transaction, idem two-phase
	# between its claim (leased for the TTL) and its completion.
	for design in $F1_DESIGNS; do
		out=$(fault_load "$design" "f1/$design" "$FAULT_SECONDS" --retry-dup 0.2 \
			--slow-share 0.02 --slow-ms $(((FAULT_TTL + 1) * 1000)))
		sleep "$FAULT_TTL"
		fault_row slow_gateway "$design" "$(check "$design" "f1/$design")" \
			"$(field requests "$out") answered, $(field stale "$out") late completions refused"
	done

	# 2. Redis restarted with SHUTDOWN NOSAVE in the middle of the run:
	# with appendfsync everysec, and with no persistence (the cache set-up)
	for persist in everysec none; do
		for design in redis idem1; do
			[ "$design" = idem1 ] && [ "$persist" = none ] && continue
			redis_stop
			redis_start "$persist"
			fault_load "$design" "f2$persist/$design" "$FAULT_SECONDS" >"$SEEDS_DIR/f2.out" &
			lp=$!
			sleep "$(awk -v s="$FAULT_SECONDS" 'BEGIN { print s / 3 }')"
			redis_stop
			sleep 1
			redis_start "$persist"
			wait "$lp" || true
			sleep "$FAULT_TTL"
			fault_row "redis_restart_$persist" "$design" "$(check "$design" "f2$persist/$design")" \
				"$(field requests "$(cat "$SEEDS_DIR/f2.out")") answered"
		done
	done
	redis_stop
	redis_start everysec

	# 3. the client killed between the payment's commit and SET SUCCESS
	# (idem: right after its commit, where the Redis design would store
	# the result).  Lost results are counted once the lock's TTL has passed,
	# before the callers retry; double charges after their retries.
	for design in $F3_DESIGNS; do
		lost=0 doubles=0 retried=0
		for ((cycle = 1; cycle <= KILL_CYCLES; cycle++)); do
			jd=$SEEDS_DIR/journal-$design-$cycle
			rm -rf "$jd"
			mkdir -p "$jd"
			fault_load "$design" "f3/$design/$cycle" 60 --kill-after 1000 --journal "$jd" >/dev/null || true
			sleep $((FAULT_TTL + 1))
			c1=$(check "$design" "f3/$design/$cycle")
			lost=$((lost + $(field lost_results "$c1")))
			rec=$(loadgen lo --design "$design" --ttl "$FAULT_TTL" --patience 60 \
				--prefix "f3/$design/$cycle" --recover "$jd" 2>>"$SEEDS_DIR/faults.log")
			retried=$((retried + $(field retried "$rec")))
			c2=$(check "$design" "f3/$design/$cycle")
			doubles=$((doubles + $(field double_charged_keys "$c2")))
		done
		printf '%s\t%s\t%s\t%s\t%s\n' client_killed "$design" "$doubles" "$lost" \
			"$KILL_CYCLES kill(s), $retried unanswered requests retried" >>"$FAULTS"
		log "fault client_killed, $design: double-charged keys $doubles, lost results $lost ($retried retried)"
	done

	# 4. PostgreSQL stopped with -m immediate in the middle of the run and
	# started again; clients reconnect and retry.  Every acknowledged
	# payment must be booked.
	for design in $F4_DESIGNS; do
		fault_load "$design" "f4/$design" "$FAULT_SECONDS" --verify-acked >"$SEEDS_DIR/f4.out" &
		lp=$!
		sleep "$(awk -v s="$FAULT_SECONDS" 'BEGIN { print s / 3 }')"
		as_server_user "$IDEM_BINDIR/pg_ctl" -D "$IDEM_DATA" -m immediate stop >/dev/null
		sleep 1
		as_server_user "$IDEM_BINDIR/pg_ctl" -D "$IDEM_DATA" -l "$SEEDS_DIR/pg/server.log" -w start >/dev/null
		PM_PID=$(head -1 "$IDEM_DATA/postmaster.pid")
		wait "$lp" || true
		sleep "$FAULT_TTL"
		f4=$(cat "$SEEDS_DIR/f4.out")
		fault_row pg_immediate_shutdown "$design" "$(check "$design" "f4/$design")" \
			"$(field requests "$f4") answered, acknowledged but not booked: $(field acked_missing "$f4")"
	done
fi

# --- double charges and lost results of the measured runs ---------------------

CHECKS=$SEEDS_DIR/checks.tsv
printf 'variant\tkeys_booked\tdouble_charged_keys\tlost_results\n' >"$CHECKS"
while read -r name design fsync; do
	[ -n "$name" ] || continue
	c=$(check "$design" "$name/%")
	printf '%s\t%s\t%s\t%s\n' "$name" "$(field keys_booked "$c")" "$(field double_charged_keys "$c")" \
		"$(field lost_results "$c")" >>"$CHECKS"
done <<<"$VARIANTS"

# --- report -----------------------------------------------------------------

# median <place> <variant> <column>: the median over the rounds
median() {
	awk -F'\t' -v p="$1" -v v="$2" -v c="$3" 'NR > 1 && $2 == p && $3 == v && $c != "" { a[++n] = $c + 0 }
		END {
			if (n == 0) { print ""; exit }
			for (i = 2; i <= n; i++)
				for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
			print (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}' "$RAW"
}
# per-round ratios of rps a/b on place p: "min to max"
round_ratios() {
	awk -F'\t' -v p="$1" -v a="$2" -v b="$3" '
		NR > 1 && $2 == p && $3 == a { x[$1] = $4 }
		NR > 1 && $2 == p && $3 == b { y[$1] = $4 }
		END {
			n = 0
			for (r in x) if ((r in y) && y[r] > 0) q[++n] = x[r] / y[r]
			if (n == 0) exit
			lo = hi = q[1]
			for (i = 2; i <= n; i++) { if (q[i] < lo) lo = q[i]; if (q[i] > hi) hi = q[i] }
			printf "%.2f to %.2f", lo, hi
		}' "$RAW"
}
# x / y with two decimals, or n/a
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { if (x > 0 && y > 0) printf "%.2f", x / y; else print "n/a" }'; }

{
	echo "# idem against the Redis-lock design: results"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- server: $("$IDEM_BINDIR/postgres" --version), $(redis-server --version | cut -d' ' -f1-3)"
	echo "- machine: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo); load average before / after: $LOAD_BEFORE / $LOAD_AFTER"
	echo "- $CLIENTS clients, ${SECONDS_RUN}s per run, $ROUNDS interleaved round(s); retries: $RETRY_SEQ of the requests repeat a finished payment, $RETRY_DUP duplicate one in flight"
	echo "- synchronous_commit = on; Redis appendonly yes with appendfsync as named"
	echo "- round trips (median of 200): loopback $RTT_LO${RTT_NET:+; with the injected delay $RTT_NET}"
	if [ -z "$RTT_NET" ]; then
		echo "- **no injected round trip**: network namespaces or the delay were not available here"
	else
		echo "- the delay program at its end: $(tail -n 1 "$SEEDS_DIR/nfqdelay.log" 2>/dev/null)"
	fi
	echo
	for place in $PLACES; do
		if [ "$place" = lo ]; then
			echo "## Loopback"
		else
			echo "## With a round trip of $((2 * DELAY_US)) us injected between the client and both servers"
		fi
		echo
		echo "Medians over the rounds. CPU per request: PostgreSQL's backends, redis-server,"
		echo "the load generator$([ "$place" = rtt ] && echo ", and the delay program"), in microseconds."
		echo
		echo "| design | req/s | p50 ms | p99 ms | p99 ms, new payments | PostgreSQL CPU µs | Redis CPU µs | client CPU µs |$([ "$place" = rtt ] && echo ' delay CPU µs |')"
		echo "|---|---:|---:|---:|---:|---:|---:|---:|$([ "$place" = rtt ] && echo '---:|')"
		while read -r name design fsync; do
			[ -n "$name" ] || continue
			rps=$(median "$place" "$name" 4)
			[ -n "$rps" ] || continue
			printf '| %s | %.0f | %.2f | %.2f | %.2f | %s | %s | %s |%s\n' "$name" "$rps" \
				"$(awk -v x="$(median "$place" "$name" 5)" 'BEGIN { print x / 1000 }')" \
				"$(awk -v x="$(median "$place" "$name" 6)" 'BEGIN { print x / 1000 }')" \
				"$(awk -v x="$(median "$place" "$name" 7)" 'BEGIN { print x / 1000 }')" \
				"$(median "$place" "$name" 13)" "$(median "$place" "$name" 14)" "$(median "$place" "$name" 15)" \
				"$([ "$place" = rtt ] && echo " $(median "$place" "$name" 16) |")"
		done <<<"$VARIANTS"
		echo
		echo "| a / b | req/s, ratio of medians | per round | p99, b / a |"
		echo "|---|---:|---|---:|"
		for pair in "idem1 redis_everysec" "idem1 redis_always" "idem1 nodedup" "idem1 dedupe" \
			"idem1 dedupe1" "dedupe1 nodedup" "idem5 redis_everysec" "idem1 idem5"; do
			read -r a b <<<"$pair"
			echo "| $a / $b | $(ratio "$(median "$place" "$a" 4)" "$(median "$place" "$b" 4)") | $(round_ratios "$place" "$a" "$b") | $(ratio "$(median "$place" "$b" 6)" "$(median "$place" "$a" 6)") |"
		done
		echo
	done
	echo "## Double charges and lost results of these runs"
	echo
	echo "| design | keys booked | double-charged keys | lost results |"
	echo "|---|---:|---:|---:|"
	awk -F'\t' 'NR > 1 { printf "| %s | %s | %s | %s |\n", $1, $2, $3, ($1 == "nodedup") ? "n/a" : $4 }' "$CHECKS"
	echo
	if [ "${SEEDS_FAULTS:-1}" != 0 ]; then
		echo "## Faults (TTL and lease ${FAULT_TTL}s, 16 patient clients, loopback)"
		echo
		echo "| fault | design | double-charged keys | lost results | run |"
		echo "|---|---|---:|---:|---|"
		awk -F'\t' 'NR > 1 { printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$FAULTS"
		echo
	fi
} >"$RESULTS"

# --- chart --------------------------------------------------------------------

{
	while read -r name design fsync; do
		[ -n "$name" ] || continue
		printf '%s' "$name"
		for place in lo rtt; do
			printf ' %s %s' "$(median "$place" "$name" 4 | sed 's/^$/0/')" \
				"$(awk -v x="$(median "$place" "$name" 6)" 'BEGIN { print x / 1000 }')"
		done
		echo
	done <<<"$VARIANTS"
} >"$SEEDS_DIR/chart.dat"
if command -v gnuplot >/dev/null; then
	gnuplot <<EOF 2>>"$SEEDS_DIR/gnuplot.log" || log "gnuplot failed: see $SEEDS_DIR/gnuplot.log"
set terminal pngcairo size 1100,460 font ",10" noenhanced
set output "$CHART"
set multiplot layout 1,2 title "One payment, $CLIENTS clients, synchronous_commit on ($(date -u +%Y-%m-%d))"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -30 nomirror
set grid ytics
set yrange [0:*]
set key below horizontal
set title "throughput (requests/s, higher is better)"
plot "$SEEDS_DIR/chart.dat" using 2:xtic(1) title "loopback", '' using 4 title "+1 ms round trip"
set title "p99 latency (ms, lower is better)"
plot "$SEEDS_DIR/chart.dat" using 3:xtic(1) title "loopback", '' using 5 title "+1 ms round trip"
unset multiplot
EOF
fi

cat "$RESULTS"
log "results in $RESULTS, every run in $RAW, the chart in $CHART"

# --- the closing line -----------------------------------------------------------

idem_doubles=$(awk -F'\t' 'NR > 1 && $1 ~ /^idem/ { s += $3 } END { print s + 0 }' "$CHECKS")
redis_doubles=$(awk -F'\t' 'NR > 1 && $1 ~ /^redis/ { s += $3 } END { print s + 0 }' "$CHECKS")
if [ -f "$FAULTS" ]; then
	idem_doubles=$((idem_doubles + $(awk -F'\t' 'NR > 1 && $2 ~ /^idem/ { s += $3 } END { print s + 0 }' "$FAULTS")))
	redis_doubles=$((redis_doubles + $(awk -F'\t' 'NR > 1 && $2 == "redis" { s += $3 } END { print s + 0 }' "$FAULTS")))
fi
if [[ $PLACES == *rtt* ]]; then
	R=$(ratio "$(median rtt idem1 4)" "$(median rtt redis_everysec 4)")
else
	log "no injected round trip here: the ratio below is the loopback's"
	R=$(ratio "$(median lo idem1 4)" "$(median lo redis_everysec 4)")
fi
echo "vs seeds: idem double charges $idem_doubles, redis-lock double charges $redis_doubles, one-statement idem / redis-lock throughput $R"
