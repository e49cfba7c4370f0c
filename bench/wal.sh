#!/usr/bin/env bash
# bench/wal.sh (make bench-wal): what one request writes.  For seven kinds of
# request, side by side on one scratch cluster: the WAL of a request split by
# relation (idem's heap, its primary key, its expires_at index, the payment's
# heap and indexes, commit records, the rest) with full-page images apart,
# the server CPU of a request, and the bytes a key takes on disk.
#
# The requests, each kind in a database of its own, all copied from one
# template (BENCH_KEYS completed keys, as many webhook ids and ledger rows,
# 1,000 accounts), so that each has its own pages:
#   idem1      the one-statement payment of bench/seeds (doc/usage.md):
#              claim, ledger row, balance, complete, one autocommit statement
#   two-phase  the claim with a lease commits; then the payment and
#              idem_complete with the token, in a second transaction
#   replay     the one-statement payment again, for a completed key
#   webhook    a signed Stripe delivery through idem_webhook_receive, then
#              the payment, in one transaction
#   nodedup    the payment alone: a ledger row and a balance update
#   dedup1     the payment behind the least a dedupe table can do in the
#              same statement: INSERT ... ON CONFLICT DO NOTHING of the key
#              alone (no fingerprint, state, response or expiry, so a
#              retry learns nothing): what any record of the key costs
#   idem1:inherit  idem1 with idem.wal_compression = inherit: its page
#              images left to wal_compression, the rest as idem1
#   idem1@BASE idem1 on a database left at idem's version BENCH_BASE (its
#              tables as that version made them), the others being updated
#              to the default version: before and after, side by side; its
#              page images are left to wal_compression
#              (idem.wal_compression = inherit), as before 1.6
# Keys are up to 19 digits with a random prefix, so they land all over the
# primary key as random ids do; the fingerprint is a SHA-256.
#
# Two runs.  The first: BENCH_PAYMENTS requests of each kind, in three
# rounds of the kinds in turn, each from a CHECKPOINT, with full_page_writes
# off, for the records themselves (a record that carries a page image leaves
# out its own data, so images would make records look smaller) and the CPU
# of the backends (the median of the rounds).  The second:
# BENCH_SPAN seconds with checkpoint_timeout = 30s and full_page_writes on,
# the kinds taking turns of 30 s / their number (3 s) at BENCH_RATE requests a second (a fixed
# rate, so that a faster server does not spread its images over more
# requests): the page images a request brings once checkpoints come and go,
# and the CPU of a request with them (the sum over the run: a turn alone
# takes a few ticks).
# pg_waldump decodes every record of each turn; a record counts for the
# relation of its first block (its relfilenode), as a commit (rmgr
# Transaction) or as other (sequences, standby snapshots).  Summed by rmgr
# and record type these are pg_waldump --stats=record's figures.  About three
# minutes.
#
# Settings (environment):
#   BENCH_PAYMENTS  requests of each kind in the first run     (6000)
#   BENCH_KEYS      keys, webhook ids, ledger rows loaded       (100000)
#   BENCH_SPAN      seconds of the run across checkpoints      (150)
#   BENCH_RATE      requests a second of each kind in it       (116: a turn
#                   adds 1/288 of BENCH_KEYS, see RATE below)
#   BENCH_CLIENTS   pgbench clients (-c)                       (4)
#   BENCH_JOBS      pgbench threads (-j)                       (2)
#   BENCH_PORT      port of the scratch server                 (5497)
#   BENCH_BASE      idem's version for idem1@BASE, or none     (1.5)
#   BENCH_WAL_COMPRESSION  wal_compression in the second run   (off; lz4,
#                   zstd or pglz: what page images weigh compressed)
#   BENCH_IDEM_WAL_COMPRESSION  idem.wal_compression but for idem1@BASE
#                   (the library's default; inherit, off, pglz, lz4, zstd)
#   PG=17 (or 18)   run on that server (test/servers.sh) instead of the host's
#                   (BENCH_PG works too)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=test/lib.sh
source test/lib.sh

PG=${PG:-${BENCH_PG:-}}
if [ -n "$PG" ] && [ -z "${IDEM_FLAVOUR:-}" ]; then
	idem_on_server "$PG" bench/wal.sh
	exit $?
fi

PAYMENTS=${BENCH_PAYMENTS:-6000}
KEYS=${BENCH_KEYS:-100000}
SPAN=${BENCH_SPAN:-150}
CLIENTS=${BENCH_CLIENTS:-4}
JOBS=${BENCH_JOBS:-2}
PORT=${BENCH_PORT:-5497}
BASELINE=${BENCH_BASE-1.5}
COMPRESSION=${BENCH_WAL_COMPRESSION:-off}
IDEM_COMPRESSION=${BENCH_IDEM_WAL_COMPRESSION:-}
ROUNDS=$(((SPAN + 29) / 30))

# The keys of a run end in client_id * 10^9 + n, n starting at a new million
# for each pgbench run; the loaded keys end in 1 .. BENCH_KEYS.
if [ "$KEYS" -ge 1000000 ] || [ "$CLIENTS" -ge 100 ] || [ "$PAYMENTS" -lt $((3 * CLIENTS)) ]; then
	echo "bench/wal: BENCH_KEYS must be below 1000000, BENCH_CLIENTS below 100 and BENCH_PAYMENTS at least 3 times BENCH_CLIENTS" >&2
	exit 1
fi

DIR=$IDEM_BUILD/bench_wal
RUNS=$DIR/runs.tsv
RECORDS=$DIR/records.tsv
RESULTS=$DIR/results.md

log() { echo "bench/wal [$SECONDS s]: $*" >&2; }

log "building idem and installing it privately"
idem_private_install
trap 'idem_scratch_stop || true' EXIT
idem_scratch_start "$DIR" "$PORT" <<EOF
idem.purge_interval = 0
autovacuum = off
shared_buffers = 256MB
max_wal_size = 8GB
# pg_waldump reads the WAL of every run at the end
wal_keep_size = 4GB
checkpoint_timeout = 1h
log_checkpoints = on
synchronous_commit = on
EOF

PSQL=("$IDEM_BINDIR/psql" -h "$IDEM_SOCK" -p "$IDEM_PORT" -U postgres -X -q -At -v ON_ERROR_STOP=1)
PGBENCH=("$IDEM_BINDIR/pgbench" -h "$IDEM_SOCK" -p "$IDEM_PORT" -U postgres -n -M prepared -c "$CLIENTS" -j "$JOBS")

# --- the template ------------------------------------------------------------

FP="'\\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'::bytea"
# the secret bench/stripe_delivery.sql signs with
SECRET=whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e9FH

log "loading $KEYS keys, webhook ids and ledger rows into the template"
"${PSQL[@]}" -d postgres -c "CREATE DATABASE wal_template"
"${PSQL[@]}" -d wal_template >/dev/null <<EOF
CREATE EXTENSION idem${BASELINE:+ VERSION '$BASELINE'};
CREATE EXTENSION pgcrypto;
-- as bench/seeds: no unique key on k, the ledger is the application's
CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL);
INSERT INTO accounts SELECT i, 0 FROM generate_series(1, 1000) i;
-- a table in use, vacuumed: room on its pages for HOT updates (freshly
-- loaded, each page full, every first update would move its row and add an
-- index entry)
UPDATE accounts SET balance = balance;
UPDATE accounts SET balance = balance;
VACUUM accounts;
CREATE TABLE ledger (id bigserial PRIMARY KEY, k text NOT NULL, account int NOT NULL, amount bigint NOT NULL);
-- loaded key i: a random-looking prefix and the suffix i, as a run's keys
CREATE FUNCTION key_of(i bigint) RETURNS text LANGUAGE sql IMMUTABLE
RETURN (((i * 2654435761) % 90000000 + 1) * 100000000000 + i)::text;
$(cat bench/stripe_delivery.sql)
SELECT idem_webhook_source_set('stripe', 'stripe', ARRAY['$SECRET'],
	allowed_ips => ARRAY['198.51.100.0/24']::cidr[]);
-- In random order, as keys arrive, so that the primary keys are B-trees
-- grown by random inserts (in the order of i, the prefixes would sweep the
-- key space).  As idem1 writes them, a row each at completion: in
-- transactions of ten claims (beyond sixteen, a transaction's claims write
-- their rows at once and then update them).
SET synchronous_commit = off;
DO \$\$
DECLARE
	i bigint;
	n int := 0;
BEGIN
	FOR i IN SELECT g FROM generate_series(1, $KEYS) g ORDER BY random() LOOP
		PERFORM idem_claim(key_of(i), $FP);
		PERFORM idem_complete(key_of(i), jsonb_build_object('charge', i));
		n := n + 1;
		IF n % 10 = 0 THEN
			COMMIT;
		END IF;
	END LOOP;
END \$\$;
SELECT count(idem_webhook('stripe', 'evt_' || key_of(i)))
FROM (SELECT g AS i FROM generate_series(1, $KEYS) g ORDER BY random()) s;
INSERT INTO ledger (k, account, amount)
SELECT key_of(i), 1 + i % 1000, 1 + i % 97 FROM generate_series(1, $KEYS) i;
-- dedup1's table, its keys in random order as idem's
CREATE TABLE dedup (k text COLLATE "C" PRIMARY KEY);
INSERT INTO dedup SELECT key_of(g) FROM generate_series(1, $KEYS) g ORDER BY random();
VACUUM ANALYZE;
EOF

# kind, its database, its pgbench script
KINDS="
idem1     w_idem1     idem1.sql
idem1:inherit w_idem1_inherit idem1.sql
two-phase w_two_phase two_phase.sql
replay    w_replay    replay.sql
webhook   w_webhook   webhook.sql
nodedup   w_nodedup   nodedup.sql
dedup1    w_dedup1    dedup1.sql
${BASELINE:+idem1@$BASELINE w_idem1_base idem1.sql}
"
NKINDS=$(grep -c . <<<"$KINDS")
# a turn: the checkpoint interval shared by the kinds, so that a round of
# turns takes about checkpoint_timeout
TURN=$((30 / NKINDS))
# Between two checkpoints a kind adds 1/288 of the keys loaded, as 5-minute
# checkpoints do to keys kept 24 hours: how many of those inserts land on a
# page already logged since the checkpoint depends on that share.
RATE=${BENCH_RATE:-$(((KEYS + 288 * TURN - 1) / (288 * TURN)))}

# The statements of bench/seeds/loadgen.c: the payment, and idem1
# (bench/idem1.sql)
PAY="WITH pay AS (INSERT INTO ledger (k, account, amount) VALUES (:k, :a, :m) RETURNING id),
     bal AS (UPDATE accounts SET balance = balance + :m WHERE id = :a)
SELECT id FROM pay"
IDEM1=$(cat bench/idem1.sql)
NEW_KEY='\set n :n + 1
\set k random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n
\set a random(1, 1000)
\set m random(1, 97)'

cat >"$DIR/idem1.sql" <<EOF
$NEW_KEY
$IDEM1
EOF
cat >"$DIR/two_phase.sql" <<EOF
$NEW_KEY
SELECT token FROM idem_claim(:k, $FP, lease => '60 s') \gset
BEGIN;
$PAY \gset
SELECT idem_complete(:k, jsonb_build_object('charge', :id::bigint), token => :token::bigint);
COMMIT;
EOF
cat >"$DIR/replay.sql" <<EOF
\set i random(1, :keys)
\set k ((:i * 2654435761) % 90000000 + 1) * 100000000000 + :i
\set a random(1, 1000)
\set m random(1, 97)
$IDEM1
EOF
cat >"$DIR/webhook.sql" <<EOF
$NEW_KEY
BEGIN;
SELECT r.status = 'new' AS fresh
FROM stripe_delivery(:k) d, idem_webhook_receive('stripe', d.payload, d.headers, '198.51.100.7') r
WHERE r.status <> 'rejected' \gset
\if :fresh
$PAY;
\endif
COMMIT;
EOF
cat >"$DIR/nodedup.sql" <<EOF
$NEW_KEY
$PAY;
EOF
cat >"$DIR/dedup1.sql" <<EOF
$NEW_KEY
WITH d AS (INSERT INTO dedup (k) VALUES (:k) ON CONFLICT DO NOTHING RETURNING k),
     pay AS (INSERT INTO ledger (k, account, amount) SELECT :k, :a, :m FROM d RETURNING id),
     bal AS (UPDATE accounts SET balance = balance + :m
             WHERE id = :a AND EXISTS (SELECT FROM pay))
SELECT id FROM pay;
EOF

log "copying the template into a database per kind"
: >"$DIR/relmap.tsv"
while read -r kind db script; do
	[ -n "$kind" ] || continue
	"${PSQL[@]}" -d postgres -c "CREATE DATABASE $db TEMPLATE wal_template"
	[ "$kind" = "idem1@$BASELINE" ] || "${PSQL[@]}" -d "$db" -c "ALTER EXTENSION idem UPDATE"
	case $kind in
	idem1@* | idem1:inherit) "${PSQL[@]}" -d "$db" -c "ALTER DATABASE $db SET idem.wal_compression = inherit" ;;
	*) [ -z "$IDEM_COMPRESSION" ] ||
		"${PSQL[@]}" -d "$db" -c "ALTER DATABASE $db SET idem.wal_compression = $IDEM_COMPRESSION" ;;
	esac
	# which relation each relfilenode of the database is, as pg_waldump names
	# it (tablespace/database/relfilenode)
	"${PSQL[@]}" -d "$db" -F $'\t' >>"$DIR/relmap.tsv" <<'EOF'
SELECT concat_ws('/', (SELECT oid FROM pg_tablespace WHERE spcname = 'pg_default'),
                 (SELECT oid FROM pg_database WHERE datname = current_database()),
                 pg_relation_filenode(r)), part
FROM (VALUES (to_regclass('idem.keys'), 'idem_heap'), (to_regclass('idem.webhooks'), 'idem_heap'),
             (to_regclass('idem.keys_pkey'), 'idem_pkey'), (to_regclass('idem.webhooks_pkey'), 'idem_pkey'),
             -- before 1.6
             (to_regclass('idem.keys_expires_at_idx'), 'idem_expires'),
             (to_regclass('idem.webhooks_expires_at_idx'), 'idem_expires'),
             -- dedup1's table in idem's columns
             (to_regclass('dedup'), 'idem_heap'), (to_regclass('dedup_pkey'), 'idem_pkey'),
             (to_regclass('ledger'), 'pay_heap'), (to_regclass('accounts'), 'pay_heap'),
             (to_regclass('ledger_pkey'), 'pay_index'), (to_regclass('accounts_pkey'), 'pay_index')) v(r, part)
WHERE r IS NOT NULL;
EOF
done <<<"$KINDS"

# --- measuring -----------------------------------------------------------------

# shellcheck source=bench/lib.sh
source bench/lib.sh
# the server's own processes, with no client connected
sleep 1
BASE=$(pgrep -c -P "$PM_PID")
lsn() { "${PSQL[@]}" -d postgres -c "SELECT pg_current_wal_insert_lsn()"; }
# the server's settings for the next run:
# run_settings <full_page_writes> <checkpoint_timeout> <wal_compression>
run_settings() {
	"${PSQL[@]}" -d postgres -c "ALTER SYSTEM SET full_page_writes = $1" \
		-c "ALTER SYSTEM SET checkpoint_timeout = '$2'" \
		-c "ALTER SYSTEM SET wal_compression = '$3'" -c "SELECT pg_reload_conf()" >/dev/null
	sleep 0.5
}

RUN_INDEX=0
printf 'run\tkind\trequests\tcpu_us\tlsn0\tlsn1\n' >"$RUNS"
# run_kind <run> <kind> <db> <script> <pgbench args...>: one pgbench run,
# its requests, its CPU and its WAL range added to $RUNS
run_kind() {
	local run=$1 kind=$2 db=$3 script=$4 t0 l0 n
	shift 4
	RUN_INDEX=$((RUN_INDEX + 1))
	l0=$(lsn)
	wait_backends_gone "$BASE"
	t0=$(children_ticks)
	if ! "${PGBENCH[@]}" -D n=$((RUN_INDEX * 1000000)) -D keys="$KEYS" -f "$DIR/$script" "$@" \
		"$db" >"$DIR/last.out" 2>&1; then
		log "$kind failed:"
		sed 's/^/    /' "$DIR/last.out" >&2
		exit 1
	fi
	wait_backends_gone "$BASE"
	n=$(awk -F': *' '/^number of transactions actually processed/ { split($2, a, "/"); print a[1]; exit }' "$DIR/last.out")
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$run" "$kind" "$n" \
		"$((($(children_ticks) - t0) * TICK_US))" "$l0" "$(lsn)" >>"$RUNS"
}

mapfile -t ORDER < <(grep -v '^$' <<<"$KINDS")
log "run 1: $PAYMENTS requests of each kind in 3 rounds, full_page_writes off, no checkpoint"
run_settings off 1h off
for ((r = 0; r < 3; r++)); do
	for ((i = 0; i < ${#ORDER[@]}; i++)); do
		read -r kind db script <<<"${ORDER[$(((i + r) % ${#ORDER[@]}))]}"
		"${PSQL[@]}" -d postgres -c "CHECKPOINT"
		run_kind records "$kind" "$db" "$script" -t $((PAYMENTS / 3 / CLIENTS))
	done
done

log "run 2: $ROUNDS rounds of $TURN s a kind at $RATE requests a second, checkpoint_timeout = 30s, wal_compression = $COMPRESSION"
run_settings on 30s "$COMPRESSION"
"${PSQL[@]}" -d postgres -c "CHECKPOINT"
CKPT0=$(grep -c 'checkpoint starting: time' "$DIR/server.log" || true)
for ((r = 0; r < ROUNDS; r++)); do
	for ((i = 0; i < ${#ORDER[@]}; i++)); do
		read -r kind db script <<<"${ORDER[$(((i + r) % ${#ORDER[@]}))]}"
		run_kind images "$kind" "$db" "$script" -R "$RATE" -T "$TURN"
	done
done
CKPTS=$(($(grep -c 'checkpoint starting: time' "$DIR/server.log" || true) - CKPT0))
log "  $CKPTS timed checkpoints during the run"
# a commit that flushes, so that every record of the runs is on disk for
# pg_waldump (a transaction that writes nothing but takes an xid, as
# txid_current(), commits without flushing)
"${PSQL[@]}" -d postgres -c "CREATE TABLE flush_mark (); DROP TABLE flush_mark" >/dev/null

log "decoding the WAL of every run"
printf 'run\tkind\trmgr\ttype\tpart\trecords\trecord_bytes\tfpi_bytes\n' >"$RECORDS"
while IFS=$'\t' read -r run kind _ _ l0 l1; do
	# (the header, and runs that wrote nothing)
	if [ "$run" = run ] || [ "$l0" = "$l1" ]; then
		continue
	fi
	as_server_user "$IDEM_BINDIR/pg_waldump" -p "$IDEM_DATA/pg_wal" -s "$l0" -e "$l1" 2>"$DIR/waldump.err" |
		awk -v run="$run" -v kind="$kind" -v map="$DIR/relmap.tsv" '
			BEGIN {
				while ((getline line < map) > 0) {
					split(line, f, "\t")
					part[f[1]] = f[2]
				}
			}
			/^rmgr: / {
				match($0, /len \(rec\/tot\): *[0-9]+\/ *[0-9]+/)
				s = substr($0, RSTART, RLENGTH)
				sub(/^[^:]*: */, "", s)
				split(s, len, "/")
				type = $0
				sub(/.*desc: /, "", type)
				sub(/[ ,].*/, "", type)
				rel = ""
				if (match($0, /blkref #0: rel [0-9]+\/[0-9]+\/[0-9]+/))
					rel = substr($0, RSTART + 15, RLENGTH - 15)
				p = ($2 == "Transaction") ? "commit" : ((rel in part) ? part[rel] : "other")
				k = run "\t" kind "\t" $2 "\t" type "\t" p
				cnt[k]++
				rec[k] += len[1]
				fpi[k] += len[2] - len[1]
			}
			END { for (k in cnt) printf "%s\t%d\t%d\t%d\n", k, cnt[k], rec[k], fpi[k] }' >>"$RECORDS"
	# pg_waldump stops at -e without a word; anything it says is an error
	if [ -s "$DIR/waldump.err" ]; then
		log "pg_waldump on $kind ($l0 to $l1):"
		sed 's/^/    /' "$DIR/waldump.err" >&2
		exit 1
	fi
done <"$RUNS"

# --- checks and sizes --------------------------------------------------------

# Each payment booked once, each new key completed, each delivery recorded
# once and nothing left processing; then the size of idem's table and
# indexes (the ledger's for nodedup) over its rows.
printf 'kind\theap\tpkey\texpires\n' >"$DIR/sizes.tsv"
while read -r kind db script; do
	[ -n "$kind" ] || continue
	requests=$(awk -F'\t' -v k="$kind" '$2 == k { s += $3 } END { print s + 0 }' "$RUNS")
	case $kind in
	idem1* | two-phase) expect="$requests $requests $requests 0" ;;
	replay) expect="0 0 0 0" ;;
	webhook) expect="$requests 0 $requests 0" ;;
	nodedup) expect="$requests 0 0 0" ;;
	dedup1) expect="$requests 0 $requests 0" ;;
	esac
	got=$("${PSQL[@]}" -d "$db" -F ' ' -c "
		SELECT (SELECT count(*) - $KEYS FROM ledger),
		       (SELECT count(*) FILTER (WHERE state = 'completed') - $KEYS FROM idem.keys),
		       (SELECT count(*) - $KEYS FROM idem.webhooks) + (SELECT count(*) - $KEYS FROM idem.keys)
		       + (SELECT count(*) - $KEYS FROM dedup),
		       (SELECT count(*) FILTER (WHERE state <> 'completed') FROM idem.keys)")
	if [ "$got" != "$expect" ]; then
		log "CHECK FAILED: $kind: new ledger rows, completed keys, new keys and webhook ids, keys unfinished: $got (expected $expect)"
		exit 1
	fi
	case $kind in
	webhook) t=idem.webhooks i=idem.webhooks_pkey e="to_regclass('idem.webhooks_expires_at_idx')" ;;
	nodedup) t=ledger i=ledger_pkey e=NULL ;;
	dedup1) t=dedup i=dedup_pkey e=NULL ;;
	*) t=idem.keys i=idem.keys_pkey e="to_regclass('idem.keys_expires_at_idx')" ;;
	esac
	"${PSQL[@]}" -d "$db" -F $'\t' -c "
		SELECT '$kind', round(pg_relation_size('$t') / n), round(pg_relation_size('$i') / n),
		       round(pg_relation_size($e) / n)
		FROM (SELECT count(*)::numeric AS n FROM $t) c" >>"$DIR/sizes.tsv"
done <<<"$KINDS"

# --- report ------------------------------------------------------------------

SERVER=$("$IDEM_BINDIR/postgres" --version | sed 's/^postgres (PostgreSQL) //')
{
	echo "PostgreSQL $SERVER, synchronous_commit = on, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)."
	echo "Records and CPU: $PAYMENTS requests a kind in 3 rounds, each after a CHECKPOINT, full_page_writes off; CPU: median of the rounds."
	echo "Page images: $ROUNDS rounds of $TURN s a kind at $RATE requests/s, from a CHECKPOINT, checkpoint_timeout = 30s ($CKPTS timed checkpoints), wal_compression = $COMPRESSION, idem.wal_compression = ${IDEM_COMPRESSION:-its default} (idem1:inherit, idem1@$BASELINE: inherit)."
	echo "$KEYS keys, webhook ids and ledger rows loaded. Bytes per request; on disk, per key (nodedup: per ledger row; dedup1: its table in idem's columns)."
	echo
	echo "| per request | idem heap | primary key | \`expires_at\` | payment heap | payment indexes | commit | other | records | page images (primary key) | CPU µs | CPU µs with images | on disk: heap / primary key / \`expires_at\` |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
	awk -F'\t' -v kinds="$(awk 'NF { printf "%s ", $1 }' <<<"$KINDS")" '
		# n with a comma every three digits
		function commas(n,   s) {
			s = sprintf("%.0f", n)
			while (s ~ /[0-9][0-9][0-9][0-9]/)
				sub(/[0-9][0-9][0-9]($|,)/, ",&", s)
			sub(/^,/, "", s)
			return s
		}
		# the median of the CPU per request of kind k over its runs
		function median(k,   n, i, j, t, v) {
			n = ncpu[k]
			for (i = 1; i <= n; i++)
				v[i] = cpu[k, i]
			for (i = 2; i <= n; i++)
				for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
					t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
				}
			return (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		}
		FILENAME ~ /runs.tsv$/ && FNR > 1 {
			req[$1, $2] += $3
			if ($1 == "records")
				cpu[$2, ++ncpu[$2]] = $4 / $3
			else
				icpu[$2] += $4
		}
		FILENAME ~ /records.tsv$/ && FNR > 1 {
			if ($1 == "records") rec[$2, $5] += $7
			else {
				fpi[$2] += $8
				if ($5 == "idem_pkey") fpik[$2] += $8
			}
		}
		FILENAME ~ /sizes.tsv$/ && FNR > 1 { disk[$1] = $2 " / " $3 " / " ($4 == "" ? "–" : $4) }
		END {
			split("idem_heap idem_pkey idem_expires pay_heap pay_index commit other", parts, " ")
			n = split(kinds, k, " ")
			for (i = 1; i <= n; i++) {
				a = req["records", k[i]]
				b = req["images", k[i]]
				line = "| " k[i]
				total = 0
				for (j = 1; j <= 7; j++) {
					line = line " | " commas(rec[k[i], parts[j]] / a)
					total += rec[k[i], parts[j]]
				}
				line = line " | " commas(total / a) " | "
				line = line (b > 0 ? commas(fpi[k[i]] / b) " (" commas(fpik[k[i]] / b) ")" : "–")
				line = line " | " commas(median(k[i])) " | " (b > 0 ? commas(icpu[k[i]] / b) : "–")
				line = line " | " disk[k[i]] " |"
				print line
			}
		}' "$RUNS" "$RECORDS" "$DIR/sizes.tsv"
} >"$RESULTS"

cat "$RESULTS"
log "results in $RESULTS; every run in $RUNS, its records by type in $RECORDS"
