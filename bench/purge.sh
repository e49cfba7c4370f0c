#!/usr/bin/env bash
# bench/purge.sh: purge throughput on a table of expired keys while claims
# keep running, and what the purge costs those claims.
#
# Each round loads BENCH_PURGE_ROWS expired keys, then runs the claim load
# (claim + one business INSERT + complete, asynchronous commit) twice for the
# same time: once alone (the baseline), once while idem_purge deletes the
# expired rows batch after batch, each batch its own transaction, as the
# purge worker does.  pgbench reports its throughput every second; the claim
# throughput "during the purge" is the mean of the seconds inside the purge.
# The report gives, per round and as medians: purge rows per second, claim
# tps alone, claim tps during the purge, and their ratio.
#
# Settings (environment):
#   BENCH_PURGE_ROWS    expired keys loaded per round        (1000000)
#   BENCH_PURGE_BATCH   rows per purge transaction           (10000)
#   BENCH_PURGE_ROUNDS  rounds                               (3)
#   BENCH_CLIENTS       pgbench clients                      (4)
#   BENCH_JOBS          pgbench threads                      (2)
#   BENCH_PORT          port of the scratch server           (5495)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=../test/lib.sh
source test/lib.sh

ROWS=${BENCH_PURGE_ROWS:-1000000}
BATCH=${BENCH_PURGE_BATCH:-10000}
ROUNDS=${BENCH_PURGE_ROUNDS:-3}
CLIENTS=${BENCH_CLIENTS:-4}
JOBS=${BENCH_JOBS:-2}
PORT=${BENCH_PORT:-5495}

DIR=$IDEM_BUILD/bench_purge
RESULTS=$DIR/results.md

log() { echo "bench/purge: $*" >&2; }

log "building idem and installing it privately"
idem_private_install
trap 'idem_scratch_stop || true' EXIT
idem_scratch_start "$DIR" "$PORT" <<EOF
# the purge runs by hand here, to be timed; the worker stays paused
idem.purge_interval = 0
shared_buffers = 512MB
max_wal_size = 4GB
EOF

PSQL=("$IDEM_BINDIR/psql" -h "$IDEM_SOCK" -p "$IDEM_PORT" -U postgres -X -q -v ON_ERROR_STOP=1 -d postgres)
PGBENCH=("$IDEM_BINDIR/pgbench" -h "$IDEM_SOCK" -p "$IDEM_PORT" -U postgres -n -M prepared -c "$CLIENTS" -j "$JOBS")

"${PSQL[@]}" <<'EOF'
CREATE EXTENSION idem;
CREATE TABLE ledger (key text, amount int);
-- the purge worker's loop: one transaction per batch until nothing expired is left
CREATE PROCEDURE purge_all(batch int) LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  LOOP
    n := idem_purge(batch);
    COMMIT;
    EXIT WHEN n = 0;
  END LOOP;
END $$;
EOF

CLAIM_SCRIPT=$DIR/claim.sql
cat >"$CLAIM_SCRIPT" <<'EOF'
\set k random(1, 1000000000000)
BEGIN;
SELECT status FROM idem_claim('c' || :k, '\x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20'::bytea);
INSERT INTO ledger VALUES ('c' || :k, 100);
SELECT idem_complete('c' || :k, '{"charge": "ch_1", "amount": 100}');
COMMIT;
EOF

# Load $ROWS completed keys that expired a day ago.
load_expired() {
	"${PSQL[@]}" -c "INSERT INTO idem.keys
		SELECT 'bench', 'expired-$1-' || g, 'completed', nextval('idem.token_seq'), 1, NULL, NULL,
		       NULL, NULL, '{\"charge\": \"ch_0\"}', now() - interval '2 days',
		       now() - interval '2 days', now() - interval '1 day'
		FROM generate_series(1, $ROWS) g" -c "VACUUM ANALYZE idem.keys"
}

# Mean tps of the pgbench progress lines (epoch-stamped) between $2 and $3.
mean_tps() {
	awk -v from="$2" -v to="$3" '/^progress:/ { t = $2; if (t > from && t <= to) { s += $4; n++ } }
		END { if (n) printf "%.0f", s / n; else print "nan" }' "$1"
}

# Arithmetic on decimals (awk: no bc needed)
calc() { awk "BEGIN { printf \"%.6f\", $* }"; }

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

: >"$DIR/rounds.tsv"
for round in $(seq 1 "$ROUNDS"); do
	log "round $round: loading $ROWS expired keys"
	load_expired "$round"

	log "round $round: the purge alone, to size the claim runs"
	start=$(date +%s.%N)
	"${PSQL[@]}" -c "CALL purge_all($BATCH)"
	alone=$(calc "$(date +%s.%N) - $start")
	load_expired "$round-again"
	seconds=$(printf '%.0f' "$(calc "$alone * 3 + 5")")

	log "round $round: claims alone for ${seconds}s"
	PGOPTIONS='-c synchronous_commit=off' "${PGBENCH[@]}" -T "$seconds" -P 1 --progress-timestamp \
		-f "$CLAIM_SCRIPT" postgres >"$DIR/alone-$round.out" 2>&1
	t0=$(head -1 <(grep '^progress:' "$DIR/alone-$round.out") | awk '{ print $2 }')
	base=$(mean_tps "$DIR/alone-$round.out" "$(calc "$t0 + 1")" "$(calc "$t0 + $seconds")")

	log "round $round: claims for ${seconds}s with the purge in their middle"
	PGOPTIONS='-c synchronous_commit=off' "${PGBENCH[@]}" -T "$seconds" -P 1 --progress-timestamp \
		-f "$CLAIM_SCRIPT" postgres >"$DIR/purge-$round.out" 2>&1 &
	bench=$!
	sleep "$(printf '%.0f' "$(calc "$alone + 2")")"
	start=$(date +%s.%N)
	"${PSQL[@]}" -c "CALL purge_all($BATCH)"
	end=$(date +%s.%N)
	wait "$bench"
	left=$("${PSQL[@]}" -At -c "SELECT count(*) FROM idem.keys WHERE expires_at < now()")
	purge_secs=$(calc "$end - $start")
	rate=$(printf '%.0f' "$(calc "$ROWS / $purge_secs")")
	during=$(mean_tps "$DIR/purge-$round.out" "$start" "$end")
	ratio=$(printf '%.2f' "$(calc "$during / $base")")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$purge_secs" "$rate" "$base" "$during" "$ratio" "$left" >>"$DIR/rounds.tsv"
	log "round $round: purged $ROWS in ${purge_secs}s ($rate rows/s); claims $base tps alone, $during tps during the purge ($ratio); expired rows left: $left"
	"${PSQL[@]}" -c "TRUNCATE ledger" -c "DELETE FROM idem.keys" -c "VACUUM idem.keys"
done

{
	echo "Purge of $ROWS expired keys in batches of $BATCH, while $CLIENTS clients claim"
	echo "(claim + INSERT + complete, asynchronous commit); $ROUNDS rounds."
	echo
	echo "| round | purge seconds | rows/s | claims alone (tps) | claims during purge (tps) | during / alone |"
	echo "|---|---|---|---|---|---|"
	awk -F'\t' '{ printf "| %s | %.1f | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }' "$DIR/rounds.tsv"
	printf '| median | %.1f | %s | %s | %s | %s |\n' \
		"$(cut -f2 "$DIR/rounds.tsv" | median)" "$(cut -f3 "$DIR/rounds.tsv" | median)" \
		"$(cut -f4 "$DIR/rounds.tsv" | median)" "$(cut -f5 "$DIR/rounds.tsv" | median)" \
		"$(cut -f6 "$DIR/rounds.tsv" | median)"
} >"$RESULTS"
cat "$RESULTS"
