-- soak: claim, one business write, complete, in one transaction (bench/soak.sh)
-- Keys as in claim_idem.sql: a random prefix, so that they spread over the
-- index as random ids do, and a unique suffix (client_id and the counter n).
-- The TTL is idem.ttl and the lease idem.lease, which soak.sh sets for the
-- session (a key lives at least as long as its lease).
\set n :n + 1
\set k random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n
BEGIN;
SELECT status FROM idem_claim('c' || :k, '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'::bytea);
INSERT INTO soak.ledger (payment_key, amount) VALUES ('c' || :k, 100);
SELECT idem_complete('c' || :k, '{"charge": "ch_1", "amount": 100}');
COMMIT;
