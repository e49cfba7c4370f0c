#!/usr/bin/env bash
# bench/sizing.sh: what one idempotency key and one webhook delivery cost a
# shard in table and index bytes and in WAL, for sizing (doc/scaling.md).
#
# On a scratch cluster it writes BENCH_SIZING_ROWS keys through idem's own
# functions, in the shape of real payments: a payment key (PAY_IDEM_ and 64
# hex digits), the merchant as scope, a SHA-256 fingerprint and a response
# of about 100 bytes; once in the in-transaction mode (claim and complete in
# one transaction), once in the two-phase mode (claim, checkpoint and
# complete, three transactions); then as many webhook deliveries (Stripe-like
# event ids).  After a VACUUM it reports bytes per row of each table and
# index, and WAL bytes per payment and per delivery (counted from a
# checkpoint, so full-page images are in).  About two minutes.
#
# Settings (environment):
#   BENCH_SIZING_ROWS   keys per mode, and deliveries         (100000)
#   BENCH_PORT          port of the scratch server            (5496)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=../test/lib.sh
source test/lib.sh

ROWS=${BENCH_SIZING_ROWS:-100000}
PORT=${BENCH_PORT:-5496}
DIR=$IDEM_BUILD/bench_sizing

# Say what is being done, on standard error.
log() { echo "bench/sizing: $*" >&2; }

log "building idem and installing it privately"
idem_private_install
trap 'idem_scratch_stop || true' EXIT
idem_scratch_start "$DIR" "$PORT" <<EOF
idem.purge_interval = 0
autovacuum = off
max_wal_size = 4GB
# sizes do not depend on it; it only spares a WAL flush per transaction
synchronous_commit = off
EOF

PSQL=("$IDEM_BINDIR/psql" -h "$IDEM_SOCK" -p "$IDEM_PORT" -U postgres -X -q -At -v ON_ERROR_STOP=1 -d postgres)

"${PSQL[@]}" <<'EOF'
CREATE EXTENSION idem;
-- payment i of a run: its merchant, key, fingerprint and answer
CREATE FUNCTION merchant_of(i int) RETURNS text LANGUAGE sql
RETURN 'merchant-' || lpad((i % 1000)::text, 5, '0');
CREATE FUNCTION key_of(tag text, i int) RETURNS text LANGUAGE sql
RETURN idem_payment_key(merchant_of(i), tag || '-' || i, 100 + i % 900, 'USD', '2026-01-02');
CREATE FUNCTION fingerprint_of(tag text, i int) RETURNS bytea LANGUAGE sql
RETURN idem_fingerprint(jsonb_build_object('order', tag || '-' || i, 'amount', 100 + i % 900,
                                           'currency', 'USD'));
CREATE FUNCTION answer_of(tag text, i int) RETURNS jsonb LANGUAGE sql
RETURN jsonb_build_object('status', 201, 'body',
                          jsonb_build_object('charge', 'ch_' || md5(key_of(tag, i))::char(24),
                                             'amount', 100 + i % 900, 'currency', 'USD'));
-- n payments in the in-transaction mode, a transaction each
CREATE PROCEDURE pay_in_transaction(tag text, n int) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. n LOOP
        PERFORM idem_claim(key_of(tag, i), fingerprint_of(tag, i), scope => merchant_of(i));
        PERFORM idem_complete(key_of(tag, i), answer_of(tag, i), scope => merchant_of(i));
        COMMIT;
    END LOOP;
END $$;
-- n payments in the two-phase mode: claim, checkpoint and complete, each
-- a transaction of its own
CREATE PROCEDURE pay_two_phase(tag text, n int) LANGUAGE plpgsql AS $$
DECLARE
    t bigint;
BEGIN
    FOR i IN 1 .. n LOOP
        SELECT token INTO t
        FROM idem_claim(key_of(tag, i), fingerprint_of(tag, i), scope => merchant_of(i),
                        lease => '1 min');
        COMMIT;
        PERFORM idem_checkpoint(key_of(tag, i), 'charged',
                                jsonb_build_object('charge', answer_of(tag, i) -> 'body' -> 'charge'),
                                scope => merchant_of(i), token => t);
        COMMIT;
        PERFORM idem_complete(key_of(tag, i), answer_of(tag, i), scope => merchant_of(i),
                              token => t);
        COMMIT;
    END LOOP;
END $$;
-- n webhook deliveries, a transaction each
CREATE PROCEDURE deliver(n int) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. n LOOP
        PERFORM idem_webhook('stripe', 'evt_' || md5(i::text)::char(24));
        COMMIT;
    END LOOP;
END $$;
CREATE TABLE sizing (what text, n bigint, wal numeric, heap bigint, pkey bigint, expires bigint);
EOF

# Run "CALL $2" for $1 rows and record the sizes of table $3 and its WAL.
measure() {
	local what=$1 call=$2 table=$3
	log "$what: $ROWS rows"
	"${PSQL[@]}" <<EOF
TRUNCATE idem.keys, idem.webhooks;
CHECKPOINT;
SELECT pg_current_wal_insert_lsn() AS lsn0 \gset
CALL $call;
SELECT pg_current_wal_insert_lsn() AS lsn1 \gset
VACUUM $table;
INSERT INTO sizing
SELECT '$what', (SELECT count(*) FROM $table),
       pg_wal_lsn_diff(:'lsn1', :'lsn0'),
       pg_relation_size('$table'),
       pg_relation_size('${table}_pkey'),
       -- before 1.6 only
       coalesce(pg_relation_size(to_regclass('${table}_expires_at_idx')), 0);
EOF
}

measure "payment, in-transaction" "pay_in_transaction('a', $ROWS)" idem.keys
measure "payment, two-phase" "pay_two_phase('b', $ROWS)" idem.keys
measure "webhook delivery" "deliver($ROWS)" idem.webhooks

echo ""
echo "| per row | rows | heap bytes | primary key bytes | expires_at index bytes | total bytes | WAL bytes |"
echo "|---|---:|---:|---:|---:|---:|---:|"
"${PSQL[@]}" -F ' | ' <<'EOF'
SELECT '| ' || what, n, round(heap::numeric / n), round(pkey::numeric / n),
       round(expires::numeric / n), round((heap + pkey + expires)::numeric / n),
       round(wal / n) || ' |'
FROM sizing ORDER BY what;
EOF
