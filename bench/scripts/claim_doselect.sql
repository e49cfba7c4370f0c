-- claim, one business write, complete: the dedupe table a team writes by
-- hand on PostgreSQL 19, whose INSERT ... ON CONFLICT DO SELECT FOR UPDATE
-- either inserts the key or returns its row, locked, in one statement.  The
-- application charges only when its INSERT made the row (old is null), and
-- would answer a retry from the state, fingerprint and response returned.
-- The key has a random prefix, so keys spread over the index as random ids
-- do, and a unique suffix: client_id and the counter n, which run.sh starts
-- at a new million for every pgbench run.
\set n :n + 1
\set k random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n
BEGIN;
INSERT INTO doselect.keys (scope, key, state, token, attempt, fingerprint, lease_until, created_at, expires_at) VALUES ('', :k, 'processing', nextval('doselect.token_seq'), 1, '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'::bytea, now() + interval '60 seconds', now(), now() + interval '24 hours') ON CONFLICT (scope, key) DO SELECT FOR UPDATE RETURNING old.key IS NULL AS claimed, state, token, fingerprint, response
\gset
\if :claimed
INSERT INTO bench.ledger (variant, payment_key, amount) VALUES ('doselect', :k, 100);
UPDATE doselect.keys SET state = 'completed', response = '{"charge": "ch_1", "amount": 100}', completed_at = now(), lease_until = NULL WHERE scope = '' AND key = :k;
\endif
COMMIT;
