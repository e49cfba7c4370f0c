#!/usr/bin/env bash
# bench/soak.sh: a long run with short TTLs and the purge worker on, to show
# whether idem's tables and indexes settle at a steady size and whether
# throughput holds over time.
#
# pgbench drives a steady stream of new keys for SOAK_SECONDS: payments
# claimed and completed in one transaction (bench/scripts/soak_claim.sql),
# two-phase payments completed with the fencing token and sometimes retried
# (soak_two_phase.sql), and webhook deliveries, a quarter of them redelivered
# (soak_webhook.sql).  Every key and webhook id lives SOAK_TTL; the purge
# worker runs every SOAK_PURGE_INTERVAL and autovacuum with the server's
# defaults, as a production server would have them.
#
# Every SOAK_SAMPLE seconds one line goes to tmp_check/soak/samples.tsv:
# elapsed seconds, throughput since the last sample (completions and webhook
# deliveries per second, from idem_stats), rows purged per second, live and
# dead rows of idem.keys and idem.webhooks (pg_stat_user_tables), and the
# size of each of their heaps and indexes (pg_relation_size).
#
# The summary (tmp_check/soak/summary.md) compares the first half of the
# run (after SOAK_WARMUP, while the tables fill up) with the second half:
# throughput, and the largest size sampled of each table and index.  The
# targets: no size grows more than 5% in the second half, and throughput
# stays within 10% of the first half's.  At the end every live key must be
# completed with exactly one ledger row.  The exit status is 0 either way
# (a soak is a measurement); the summary says which targets hold.
#
# Settings (environment):
#   SOAK_SECONDS         length of the run                         (1800)
#   SOAK_SAMPLE          seconds between samples                   (30)
#   SOAK_WARMUP          seconds left out of the first half        (120)
#   SOAK_TTL             idem.ttl and idem.webhook_ttl             (10s)
#   SOAK_LEASE           idem.lease: a key lives at least its lease,
#                        so it must not be longer than the TTL     (5s)
#   SOAK_PURGE_INTERVAL  idem.purge_interval                       (1s)
#   SOAK_RATE            transactions a second pgbench offers;
#                        0: as many as the server takes            (2500)
#   SOAK_LATENCY_LIMIT   ms: with a rate, a transaction that falls this
#                        far behind its schedule is skipped rather
#                        than run late, so that a stall (another
#                        process taking the cores) is not followed
#                        by a burst                                (1000)
#   SOAK_CLIENTS         pgbench clients                           (4)
#   SOAK_JOBS            pgbench threads                           (2)
#   SOAK_PORT            port of the scratch server                (5496)
#   SOAK_CONF            extra lines for postgresql.conf, e.g.
#                        'autovacuum_naptime = 10s'
#   SOAK_REPORT=1        no run: summarise the last run's samples again
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=../test/lib.sh
source test/lib.sh

SECONDS_TOTAL=${SOAK_SECONDS:-1800}
SAMPLE=${SOAK_SAMPLE:-30}
WARMUP=${SOAK_WARMUP:-120}
TTL=${SOAK_TTL:-10s}
LEASE=${SOAK_LEASE:-5s}
PURGE_INTERVAL=${SOAK_PURGE_INTERVAL:-1s}
RATE=${SOAK_RATE:-2500}
LATENCY_LIMIT=${SOAK_LATENCY_LIMIT:-1000}
CLIENTS=${SOAK_CLIENTS:-4}
JOBS=${SOAK_JOBS:-2}
PORT=${SOAK_PORT:-5496}

if [ "$CLIENTS" -ge 100 ] || [ "$SECONDS_TOTAL" -lt $((4 * SAMPLE)) ] ||
	[ "$WARMUP" -ge $((SECONDS_TOTAL / 2)) ]; then
	echo "soak: SOAK_CLIENTS must be below 100, SOAK_SECONDS at least 4 samples" \
		"and SOAK_WARMUP less than half of SOAK_SECONDS" >&2
	exit 1
fi

DIR=$IDEM_BUILD/soak
SAMPLES=$DIR/samples.tsv
SUMMARY=$DIR/summary.md
SCRIPTS=$IDEM_ROOT/bench/scripts

log() { echo "soak: $*" >&2; }

# The summary of the samples in $SAMPLES (and of $DIR/run.md, what the run
# was) into $SUMMARY.  The first half runs from SOAK_WARMUP to half time.  A
# heap's size see-saws: each vacuum gives the empty pages at its end back
# and the inserts take them again, so a single sample may fall on either
# edge; the growth compares the largest size sampled in each half.
report() {
	local half=$((SECONDS_TOTAL / 2))
	{
		echo "# idem soak"
		echo
		cat "$DIR/run.md"
		echo
		awk -F'\t' -v w="$WARMUP" -v h="$half" '
			NR > 1 && $1 > w && $1 <= h { a += $2; na++ }
			NR > 1 && $1 > h { b += $2; nb++ }
			END {
				fa = na ? a / na : 0; fb = nb ? b / nb : 0
				r = fa ? fb / fa : 0
				printf "Throughput (completions and webhook deliveries a second): first half %.0f, second half %.0f, ratio %.3f: %s.\n",
					fa, fb, r, (r >= 0.9 && r <= 1.1) ? "holds (within 10%)" : "DOES NOT HOLD (more than 10% apart)"
			}' "$SAMPLES"
		# pgbench's progress lines: "progress: <s> s, <tps> tps, lat <ms> ms stddev ..."
		awk -v w="$WARMUP" -v h="$half" '
			/^progress:/ { t = $2; for (i = 1; i < NF; i++) if ($i == "lat") l = $(i + 1)
				if (t > w && t <= h) { a += l; na++ } else if (t > h) { b += l; nb++ } }
			END { if (na && nb) printf "Mean latency (pgbench): first half %.2f ms, second half %.2f ms.\n", a / na, b / nb }' "$DIR/pgbench.out"
		echo
		echo "| relation | after warm-up (${WARMUP} s) | at half | at end | largest, first half | largest, second half | growth | < 5% |"
		echo "|---|---:|---:|---:|---:|---:|---:|---|"
		awk -F'\t' -v w="$WARMUP" -v h="$half" '
			NR == 1 { n = NF; for (i = 8; i <= n; i++) name[i] = $i; next }
			{ last = $0 }
			$1 >= w && !ws { ws = 1; for (i = 8; i <= n; i++) start[i] = $i }
			$1 >= h && !hs { hs = 1; for (i = 8; i <= n; i++) mid[i] = $i }
			$1 > w && $1 <= h { for (i = 8; i <= n; i++) if ($i > p1[i]) p1[i] = $i }
			$1 > h { for (i = 8; i <= n; i++) if ($i > p2[i]) p2[i] = $i }
			END {
				split(last, end, "\t")
				for (i = 8; i <= n; i++) {
					g = p1[i] ? (p2[i] - p1[i]) / p1[i] : 0
					printf "| %s | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %+.1f%% | %s |\n", name[i],
						start[i] / 1048576, mid[i] / 1048576, end[i] / 1048576, p1[i] / 1048576,
						p2[i] / 1048576, 100 * g, g < 0.05 ? "yes" : "NO"
				}
			}' "$SAMPLES"
		echo
		awk -F'\t' -v w="$WARMUP" -v h="$half" '
			$1 > w && $1 <= h { a[4] += $4; a[5] += $5; a[6] += $6; a[7] += $7; na++ }
			$1 > h { b[4] += $4; b[5] += $5; b[6] += $6; b[7] += $7; nb++ }
			END {
				if (!na || !nb) exit
				printf "Rows (pg_stat_user_tables), mean of the samples, first half / second half: "
				printf "idem.keys %.0f / %.0f live, %.0f / %.0f dead; ", a[4] / na, b[4] / nb, a[5] / na, b[5] / nb
				printf "idem.webhooks %.0f / %.0f live, %.0f / %.0f dead.\n", a[6] / na, b[6] / nb, a[7] / na, b[7] / nb
			}' "$SAMPLES"
	} >"$SUMMARY"
	cat "$SUMMARY"
}

# SOAK_REPORT=1: no run, only the summary of the last run's samples again
if [ "${SOAK_REPORT:-0}" = 1 ]; then
	# shellcheck source=/dev/null
	source "$DIR/run.env"
	report
	exit 0
fi

log "building idem and installing it privately"
idem_private_install
# The server, and the sampler and pgbench if they are still running
cleanup() {
	[ -z "${BENCH_PID:-}" ] || kill "$BENCH_PID" 2>/dev/null || true
	idem_scratch_stop || true
}
trap cleanup EXIT
idem_scratch_start "$DIR" "$PORT" <<EOF
idem.database = 'soak'
idem.purge_interval = '$PURGE_INTERVAL'
max_connections = 50
shared_buffers = 256MB
max_wal_size = 4GB
log_autovacuum_min_duration = 0
${SOAK_CONF:-}
EOF

printf 'SECONDS_TOTAL=%s\nWARMUP=%s\n' "$SECONDS_TOTAL" "$WARMUP" >"$DIR/run.env"

export PGHOST=$IDEM_SOCK PGPORT=$IDEM_PORT PGUSER=postgres
PSQL=("$IDEM_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d soak)

"$IDEM_BINDIR/createdb" soak
"${PSQL[@]}" <<'EOF'
CREATE EXTENSION idem;
CREATE SCHEMA soak;
-- the business write of every payment and new webhook: appended, never read
CREATE TABLE soak.ledger (payment_key text NOT NULL, amount bigint NOT NULL,
                          booked_at timestamptz NOT NULL DEFAULT now());
EOF

# The relations sampled: each idem table and each of its indexes, in a
# fixed order (the TSV's columns).
mapfile -t RELS < <("${PSQL[@]}" -At -c "
	SELECT c.oid::regclass FROM pg_class c
	WHERE c.oid IN ('idem.keys'::regclass, 'idem.webhooks'::regclass)
	UNION ALL
	SELECT i.indexrelid::regclass FROM pg_index i
	WHERE i.indrelid IN ('idem.keys'::regclass, 'idem.webhooks'::regclass)
	ORDER BY 1")
REL_LIST=$(printf "'%s'::regclass," "${RELS[@]}")
REL_LIST=${REL_LIST%,}

# One sample, tab-separated: the epoch, the counters (completions plus
# webhook deliveries, purged rows), live and dead rows of the two tables,
# and the size of every relation of RELS.
sample() {
	"${PSQL[@]}" -At -F $'\t' -c "
		SELECT extract(epoch FROM clock_timestamp()),
		       s.completed + s.webhooks_new + s.webhooks_duplicate, s.purged,
		       k.n_live_tup, k.n_dead_tup, w.n_live_tup, w.n_dead_tup,
		       (SELECT string_agg(pg_relation_size(r)::text, E'\t' ORDER BY ord)
		        FROM unnest(ARRAY[$REL_LIST]) WITH ORDINALITY AS u(r, ord))
		FROM idem_stats s,
		     pg_stat_user_tables k, pg_stat_user_tables w
		WHERE s.datname = current_database()
		  AND k.relid = 'idem.keys'::regclass AND w.relid = 'idem.webhooks'::regclass"
}

{
	printf 'elapsed\tops_per_s\tpurged_per_s\tkeys_live\tkeys_dead\twebhooks_live\twebhooks_dead'
	printf '\t%s' "${RELS[@]}"
	printf '\n'
} >"$SAMPLES"

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
log "load average before: $LOAD_BEFORE (on $(nproc) cores)"
log "running for ${SECONDS_TOTAL}s: TTL $TTL, purge every $PURGE_INTERVAL, $CLIENTS clients; samples every ${SAMPLE}s in $SAMPLES"

# Weights: six in-transaction payments, two two-phase ones and two webhook
# deliveries out of ten transactions.
PACE=()
if [ "$RATE" != 0 ]; then
	PACE=(-R "$RATE" -L "$LATENCY_LIMIT")
fi
PGOPTIONS="-c synchronous_commit=off -c idem.ttl=$TTL -c idem.webhook_ttl=$TTL -c idem.lease=$LEASE" \
	"$IDEM_BINDIR/pgbench" -n -M prepared -c "$CLIENTS" -j "$JOBS" -T "$SECONDS_TOTAL" -P "$SAMPLE" \
	"${PACE[@]}" -D n=0 -D e=0 \
	-f "$SCRIPTS/soak_claim.sql@6" -f "$SCRIPTS/soak_two_phase.sql@2" \
	-f "$SCRIPTS/soak_webhook.sql@2" soak >"$DIR/pgbench.out" 2>&1 &
BENCH_PID=$!

# Wait for idem_stats to have a row (the first claim counts), then sample
# until pgbench ends.
for _ in $(seq 1 100); do
	[ -n "$(sample)" ] && break
	sleep 0.1
done
first=$(sample)
t0=$(cut -f1 <<<"$first")
prev_t=$t0
prev_ops=$(cut -f2 <<<"$first")
prev_purged=$(cut -f3 <<<"$first")
next=$SAMPLE
while kill -0 "$BENCH_PID" 2>/dev/null; do
	now=$(date +%s.%N)
	wait_s=$(awk -v a="$t0" -v n="$next" -v now="$now" 'BEGIN { w = a + n - now; printf "%.2f", (w > 0 ? w : 0) }')
	sleep "$wait_s"
	kill -0 "$BENCH_PID" 2>/dev/null || break
	line=$(sample)
	read -r t ops purged rest <<<"$(tr '\t' ' ' <<<"$line")"
	awk -v t="$t" -v t0="$t0" -v pt="$prev_t" -v ops="$ops" -v po="$prev_ops" \
		-v pu="$purged" -v pp="$prev_purged" -v rest="$rest" 'BEGIN {
			dt = t - pt
			gsub(/ /, "\t", rest)
			printf "%.0f\t%.0f\t%.0f\t%s\n", t - t0, (ops - po) / dt, (pu - pp) / dt, rest
		}' >>"$SAMPLES"
	prev_t=$t
	prev_ops=$ops
	prev_purged=$purged
	next=$((next + SAMPLE))
	log "$(tail -1 "$SAMPLES" | cut -f1-7 | tr '\t' ' ')"
done
rc=0
wait "$BENCH_PID" || rc=$?
BENCH_PID=
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
if [ "$rc" != 0 ]; then
	log "pgbench failed (exit $rc):"
	tail -n 20 "$DIR/pgbench.out" >&2
	exit 1
fi

# Every payment that committed booked exactly once: one ledger row per key
# that idem still holds as completed, and no key left processing.
CHECK=$("${PSQL[@]}" -At -F ' ' -c "
	SELECT count(*) FILTER (WHERE k.state <> 'completed'),
	       count(*) FILTER (WHERE k.state = 'completed' AND coalesce(l.n, 0) <> 1)
	FROM idem.keys k
	LEFT JOIN (SELECT payment_key, count(*) AS n FROM soak.ledger GROUP BY 1) l
	       ON l.payment_key = k.key
	WHERE k.expires_at > now()")
read -r open_keys bad_keys <<<"$CHECK"

# --- summary -----------------------------------------------------------------

{
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "- server: $("$IDEM_BINDIR/postgres" --version)"
	echo "- machine: $(nproc) cores; load average before / after: $LOAD_BEFORE / $LOAD_AFTER"
	echo "- ${SECONDS_TOTAL}s, pgbench -M prepared -c $CLIENTS -j $JOBS$([ "$RATE" = 0 ] || echo " -R $RATE -L $LATENCY_LIMIT")," \
		"asynchronous commit; TTL $TTL, lease $LEASE, purge every $PURGE_INTERVAL; samples every ${SAMPLE}s"
	echo "- pgbench: $(awk '/^tps = / { print $3 " transactions/s"; exit }' "$DIR/pgbench.out")," \
		"$(awk -F': *' '/^number of failed transactions/ { print $2; exit }' "$DIR/pgbench.out") failed," \
		"$(awk -F': *' '/^number of transactions skipped/ { print $2; exit }' "$DIR/pgbench.out") skipped (late by more than the limit)"
	echo "- check: $open_keys live keys not completed, $bad_keys completed keys without exactly one ledger row"
} >"$DIR/run.md"
report
