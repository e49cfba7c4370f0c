#!/usr/bin/env bash
# bench/profile.sh (make bench-profile): where a payment's CPU goes.  The
# payment of bench-seeds (a ledger insert and a balance update, many
# clients, a share of retries) in three designs: idem1 (idem in one
# statement), dedupe1 (the best hand-written record in one statement) and
# nodedup (the payment alone), through the same load generator
# (bench/seeds/loadgen.c) on the loopback, the designs one after the other
# in each round, while perf samples the PostgreSQL backends of the run.
#
# Each sample goes to a bucket by its call stack: the innermost frame of
# PostgreSQL or idem.so that matches one of BUCKETS below, name patterns
# tried in the list's order (a frame of idem.so matching none counts as
# idem.so itself; kernel frames count for the frame that called the kernel;
# a stack matching nothing is "other").  So the bucket of XLogInsert holds
# the WAL records of the heap and B-tree inserts below it, and idem.so holds
# idem's own code and the helpers (memory, text) it calls directly.  The
# table gives µs of backend CPU per request: a bucket's share of a design's
# samples times the backends' CPU per request, which is measured as
# bench-seeds does (the CPU of the postmaster's reaped children).
#
# perf samples the software clock (cpu-clock): virtual machines often have
# no hardware counters.  Call stacks are walked by frame pointer, which
# Debian's PostgreSQL keeps; where perf cannot record stacks, only the
# sampled function counts, and the script says so.
#
# Settings (environment):
#   BENCH_QUICK=1      a smoke run of under a minute
#   PROFILE_SECONDS    seconds per design and round             (10; quick: 3)
#   PROFILE_ROUNDS     rounds                                   (2; quick: 1)
#   PROFILE_CLIENTS    concurrent clients                       (16)
#   PROFILE_DESIGNS    designs, any of loadgen's                (idem1 dedupe1 nodedup)
#   PROFILE_FREQ       samples per second of a backend's CPU    (999)
#   PROFILE_PG_PORT                                             (5596)
# The retries are bench-seeds': 0.10 of the requests repeat a finished
# payment, 0.05 duplicate one in flight.  Output: the table, also in
# $IDEM_BUILD/profile/profile.md; the perf data stay there too.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=test/lib.sh
source test/lib.sh

QUICK=${BENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then
	SECS=${PROFILE_SECONDS:-3}
	ROUNDS=${PROFILE_ROUNDS:-1}
else
	SECS=${PROFILE_SECONDS:-10}
	ROUNDS=${PROFILE_ROUNDS:-2}
fi
CLIENTS=${PROFILE_CLIENTS:-16}
DESIGNS=${PROFILE_DESIGNS:-idem1 dedupe1 nodedup}
FREQ=${PROFILE_FREQ:-999}
PG_PORT=${PROFILE_PG_PORT:-5596}
DIR=$IDEM_BUILD/profile
BIN=$DIR/bin
RESULTS=$DIR/profile.md

# A progress line on standard error, with the seconds since the start
log() { echo "profile [$SECONDS s]: $*" >&2; }

# Bucket <tab> pattern (an awk regular expression over a frame's function)
BUCKETS="
XLogInsert (WAL records)	^(XLogInsert|XLogInsertRecord|XLogRecordAssemble|XLogRegister|XLogBeginInsert|XLogResetInsertion|XLogEnsureRecordSpace|CopyXLogRecordToWAL|ReserveXLogInsertLocation|WALInsertLock|XLogCheckBufferNeedsBackup|XLogSaveBufferForHint|log_heap_|pg_comp_crc32c)
WAL flush at commit	^(XLogFlush|XLogWrite|issue_xlog_fsync|WaitXLogInsertionsToFinish|pg_fsync|pg_fdatasync|XLogSetAsyncXactLSN)
lock manager	^(LockAcquire|LockRelease|LockRelationOid|LockRelationId|LockRelation|UnlockRelation|ConditionalLock|LockTuple|UnlockTuple|XactLockTable|SpeculativeInsertionLock|SpeculativeInsertionWait|GrantLock|UnGrantLock|SetupLockInTable|LockCheckConflicts|FastPath|LockHeldByMe|LockTagHashCode|VirtualXactLock|CleanUpLock|RemoveLocalLock|LockReassign|ReleaseLockIfHeld|ProcSleep|WaitOnLock|ProcLockWakeup)
relation open/close	^(relation_open|try_relation_open|relation_close|table_open|table_close|index_open|index_close|RelationIdGetRelation|RelationIncrementReferenceCount|RelationDecrementReferenceCount|RelationClose|RelationBuildDesc|RelationGetIndexList|RelationGetIndexAttrBitmap|RelationGetIndexExpressions|RelationGetIndexPredicate|RelationGetFKeyList|ExecOpenIndices|ExecCloseIndices|ExecGetRangeTableRelation|ExecInitResultRelation|InitResultRelInfo|CheckValidResultRel|BuildIndexInfo|AcceptInvalidationMessages)
syscache	^(SearchSysCache|SearchCatCache|ReleaseSysCache|ReleaseCatCache|SysCacheGetAttr|GetSysCacheOid|CatalogCacheComputeHashValue|get_(rel|func|typ|op|att|namespace|collation|element|array|base|range|commutator|negator|opfamily|opclass|opcode)|getTypeOutputInfo|getTypeInputInfo|getBaseType|lookup_type_cache|type_is_)
jsonb building	^(jsonb_|Jsonb|pushJsonbValue|convertJsonb|convertToJsonb|fillJsonbValue|findJsonbValueFromContainer|getKeyJsonValueFromContainer|uniqueifyJsonbObject|lengthCompareJsonbPair|compareJsonbContainers|datum_to_jsonb|add_jsonb|reserveFromBuffer|appendToBuffer|copyToBuffer|padBufferToInt|walkJsonb|escape_json)
heap insert/update	^(heap_insert|heap_multi_insert|heap_update|heap_delete|heap_lock_tuple|heap_prepare_insert|heapam_|heap_finish_speculative|heap_abort_speculative|RelationPutHeapTuple|RelationGetBufferForTuple|heap_page_prune|heap_fetch|heap_hot_search_buffer|heap_form_tuple|heap_fill_tuple|heap_compute_data_size|heap_toast_|toast_|HeapTupleSatisfies|simple_heap_)
B-tree insert/search	^(index_insert|btinsert|_bt_|ExecInsertIndexTuples|ExecCheckIndexConstraints|check_exclusion_or_unique_constraint|index_getnext|index_fetch_heap|index_beginscan|index_rescan|index_endscan|btgettuple|btbeginscan|btrescan|btendscan|index_form_tuple|FormIndexDatum|IndexNext|ExecIndexScan|ExecIndexOnlyScan)
pre-commit path	^(CallXactCallbacks|PreCommit_|claim_memory_xact_callback|expiry_xact_callback|AfterTriggerFireDeferred|AfterTriggerEndXact)
transaction, snapshots	^(CommitTransaction|StartTransaction|RecordTransactionCommit|ProcArrayEndTransaction|TransactionIdCommitTree|TransactionIdSetTreeStatus|TransactionLogFetch|AtEOXact_|AtCommit_|AtStart_|ResourceOwnerRelease|ResourceOwnerDelete|smgrDoPendingDeletes|GetNewTransactionId|AssignTransactionId|finish_xact_command|start_xact_command|CommandCounterIncrement|GetSnapshotData|GetTransactionSnapshot|GetLatestSnapshot|RegisterSnapshot|UnregisterSnapshot|PushActiveSnapshot|PopActiveSnapshot|CopySnapshot|SnapshotResetXmin)
client protocol	^(pq_|secure_read|secure_write|socket_|ReadCommand|SocketBackend|internal_flush|internal_putbytes|printtup|SendRowDescription|EndCommand|ReadyForQuery|WaitEventSetWait|WaitLatchOrSocket)
executor, parse, plan	^(exec_|Exec|standard_Executor|Portal|CreatePortal|MarkPortal|GetCachedPlan|BuildCachedPlan|CheckCachedPlan|RevalidateCachedQuery|ReleaseCachedPlan|pg_plan|planner|standard_planner|subquery_planner|grouping_planner|query_planner|pg_analyze|parse_analyze|raw_parser|base_yyparse|pg_parse_query|QueryRewrite|pg_rewrite|eval_const_expressions|expression_tree_|copyObject|fmgr_|FunctionCall|OidFunctionCall|DirectFunctionCall|InputFunctionCall|OutputFunctionCall|tts_|slot_|MakeTupleTableSlot|MakeSingleTupleTableSlot|CreateExecutorState|FreeExecutorState|CreateExprContext|FreeExprContext|ReScanExprContext|AfterTrigger|nextval|int4in|int8in|int8out|textout|byteain|timestamptz_|now$)
"

# --- packages, builds, the server ----------------------------------------------

bash test/deps.sh
bash bench/seeds/deps.sh
if ! command -v perf >/dev/null; then
	log "installing perf (linux-perf)"
	if [ "$(id -u)" != 0 ]; then
		log "as root, run: apt-get install -y linux-perf"
		exit 1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq linux-perf >/dev/null
fi
mkdir -p "$BIN"
rm -f "$DIR"/*.data "$DIR"/*.data.old
if ! perf record -q -e cpu-clock -o "$DIR/probe.data" -- true 2>"$DIR/perf.log"; then
	log "perf cannot sample here ($(tail -n 1 "$DIR/perf.log")); kernel.perf_event_paranoid is $(cat /proc/sys/kernel/perf_event_paranoid)"
	exit 1
fi
CALLGRAPH=(-g)
if ! perf record -q -e cpu-clock -g -o "$DIR/probe.data" -- true 2>>"$DIR/perf.log"; then
	log "perf records no call stacks here: each sample counts for the function it hit alone"
	CALLGRAPH=()
fi

log "building idem and installing it privately; building the load generator"
idem_private_install
gcc -O2 -Wall -Wextra -Wno-unused-parameter -pthread -I"$(pg_config --includedir)" \
	-o "$BIN/loadgen" bench/seeds/loadgen.c -lpq -lhiredis

while (echo >"/dev/tcp/127.0.0.1/$PG_PORT") 2>/dev/null; do PG_PORT=$((PG_PORT + 1)); done
trap 'idem_scratch_stop || true' EXIT
idem_scratch_start "$DIR/pg" "$PG_PORT" < <(
	echo "listen_addresses = '127.0.0.1'"
	cat bench/seeds/server.conf
)
PG_PORT=$IDEM_PORT
PSQL="$IDEM_BINDIR/psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p $PG_PORT -U postgres"
"$IDEM_BINDIR/createdb" -h 127.0.0.1 -p "$PG_PORT" -U postgres seeds
$PSQL -d seeds -f bench/seeds/schema.sql

# PM_PID, TICK_US, children_ticks, wait_backends_gone
# shellcheck source=bench/lib.sh
source bench/lib.sh

# --- the runs ----------------------------------------------------------------

# the value of key $1 in a loadgen line $2
field() { sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2"; }

declare -A TICKS REQUESTS
for d in $DESIGNS; do
	TICKS[$d]=0
	REQUESTS[$d]=0
done

# run_design <design> <round>: a run of the design with perf on its backends
run_design() {
	local design=$1 round=$2 before base pg0 lp pids n i out
	before=$(pgrep -P "$PM_PID" | sort)
	base=$(pgrep -c -P "$PM_PID" || true)
	pg0=$(children_ticks)
	"$BIN/loadgen" --pg "host=127.0.0.1 port=$PG_PORT dbname=seeds user=postgres" \
		--design "$design" --clients "$CLIENTS" --seconds "$((SECS + 1))" \
		--retry-seq 0.10 --retry-dup 0.05 --prefix "$design/r$round" \
		>"$DIR/$design-$round.out" 2>>"$DIR/loadgen.log" &
	lp=$!
	# the run's backends: the postmaster's children that were not there
	for ((i = 0; i < 250; i++)); do
		pids=$(comm -13 <(echo "$before") <(pgrep -P "$PM_PID" | sort) | paste -sd,)
		n=$(tr ',' '\n' <<<"$pids" | grep -c . || true)
		[ "$n" -ge "$CLIENTS" ] && break
		sleep 0.02
	done
	perf record -q -e cpu-clock -F "$FREQ" "${CALLGRAPH[@]}" -p "$pids" \
		-o "$DIR/$design-$round.data" -- sleep "$SECS" 2>>"$DIR/perf.log" || true
	wait "$lp" || true
	wait_backends_gone "$base"
	out=$(cat "$DIR/$design-$round.out")
	TICKS[$design]=$((TICKS[$design] + $(children_ticks) - pg0))
	REQUESTS[$design]=$((REQUESTS[$design] + $(field requests "$out")))
	log "round $round $design: $(field rps "$out") req/s, $(wc -l <<<"${pids//,/$'\n'}") backends sampled"
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= ROUNDS; r++)); do
	for d in $DESIGNS; do
		run_design "$d" "$r"
	done
	$PSQL -d seeds -c "VACUUM ANALYZE"
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# --- the buckets ---------------------------------------------------------------

# classify: perf script's "pid / frames / blank" records on standard input,
# the rules in file $1; prints "bucket <tab> samples" lines
classify() {
	awk -F'\t' -v rules="$1" '
		BEGIN {
			while ((getline line < rules) > 0) {
				if (line == "") continue
				split(line, f, "\t")
				nb++; bname[nb] = f[1]; bre[nb] = f[2]
			}
		}
		function frame_bucket(fn, dso,    i) {
			if (dso ~ /kernel/) return ""
			if (dso ~ /idem\.so/) {
				for (i = 1; i <= nb; i++)
					if (bname[i] == "pre-commit path" && fn ~ bre[i]) return bname[i]
				return "idem.so itself"
			}
			for (i = 1; i <= nb; i++) if (fn ~ bre[i]) return bname[i]
			return ""
		}
		function finish() {
			if (insample) count[found == "" ? "other" : found]++
			insample = 0; found = ""
		}
		/^[ \t]*$/ { finish(); next }
		/^[ \t]*[0-9]+[ \t]*$/ { finish(); insample = 1; next }
		# no call stacks: "<pid> <address> <function> (<dso>)", one line a sample
		/^ *[0-9]+ +[0-9a-f]+ / { finish(); insample = 1; sub(/^ *[0-9]+/, "") }
		{
			if (!insample || found != "") next
			# "<address> <function> (<dso>)"
			line = $0
			sub(/^[ \t]+[0-9a-f]+ /, "", line)
			dso = line; sub(/^.* \(/, "", dso); sub(/\)$/, "", dso)
			fn = line; sub(/ \([^(]*\)$/, "", fn); sub(/\+0x[0-9a-f]+$/, "", fn)
			found = frame_bucket(fn, dso)
		}
		END {
			finish()
			for (b in count) printf "%s\t%d\n", b, count[b]
		}'
}

RULES=$DIR/buckets.tsv
grep -v '^$' <<<"$BUCKETS" >"$RULES"
COUNTS=$DIR/counts.tsv
: >"$COUNTS"
for d in $DESIGNS; do
	for ((r = 1; r <= ROUNDS; r++)); do
		[ -s "$DIR/$d-$r.data" ] || continue
		perf script -f -i "$DIR/$d-$r.data" -F pid,ip,sym,dso 2>>"$DIR/perf.log" | classify "$RULES" |
			sed "s/^/$d\t/" >>"$COUNTS"
	done
done

# --- the table -----------------------------------------------------------------

{
	echo "# Where a payment's CPU goes: µs of backend CPU per request"
	echo
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- server: $("$IDEM_BINDIR/postgres" --version), synchronous_commit = on"
	echo "- machine: $(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo); load average before / after: $LOAD_BEFORE / $LOAD_AFTER"
	echo "- $CLIENTS clients on the loopback, ${SECS}s per design and round, $ROUNDS round(s); 0.10 of the requests retry a finished payment, 0.05 duplicate one in flight"
	echo "- perf $(perf --version | cut -d' ' -f3), event cpu-clock at $FREQ Hz per backend, $([ ${#CALLGRAPH[@]} -gt 0 ] && echo "call stacks by frame pointer" || echo "no call stacks (the sampled function alone)")"
	echo
	header="| bucket |"
	rule="|---|"
	for d in $DESIGNS; do
		header+=" $d |"
		rule+="---:|"
	done
	if [[ " $DESIGNS " == *" idem1 "* && " $DESIGNS " == *" dedupe1 "* ]]; then
		header+=" idem1 − dedupe1 |"
		rule+="---:|"
	fi
	echo "$header"
	echo "$rule"
	per_req=""
	for d in $DESIGNS; do
		per_req+="$d=$(awk -v t="${TICKS[$d]}" -v us="$TICK_US" -v n="${REQUESTS[$d]}" \
			'BEGIN { printf "%.1f", (n > 0 ? t * us / n : 0) }') "
	done
	awk -F'\t' -v designs="$DESIGNS" -v per_req="$per_req" -v rules="$RULES" '
		BEGIN {
			nd = split(designs, ds, " ")
			n = split(per_req, pr, " ")
			for (i = 1; i <= n; i++) { split(pr[i], kv, "="); cpu[kv[1]] = kv[2] }
			while ((getline line < rules) > 0) { split(line, f, "\t"); order[++nb] = f[1] }
			order[++nb] = "idem.so itself"; order[++nb] = "other"
		}
		{ c[$1, $2] += $3; tot[$1] += $3 }
		END {
			diff = (("idem1" in cpu) && ("dedupe1" in cpu))
			for (i = 1; i <= nb; i++) {
				b = order[i]; row = "| " b " |"
				for (j = 1; j <= nd; j++) {
					d = ds[j]; v[d] = tot[d] ? c[d, b] / tot[d] * cpu[d] : 0
					row = row sprintf(" %.1f |", v[d])
				}
				if (diff) row = row sprintf(" %+.1f |", v["idem1"] - v["dedupe1"])
				print row
			}
			row = "| **total** (perf samples) |"
			for (j = 1; j <= nd; j++) row = row sprintf(" **%.1f** (%d) |", cpu[ds[j]], tot[ds[j]])
			if (diff) row = row sprintf(" **%+.1f** |", cpu["idem1"] - cpu["dedupe1"])
			print row
		}' "$COUNTS"
	echo
	echo "Requests per design: $(for d in $DESIGNS; do printf '%s %s, ' "$d" "${REQUESTS[$d]}"; done | sed 's/, $//')."
} >"$RESULTS"

cat "$RESULTS"
log "the table in $RESULTS; the perf data in $DIR"
