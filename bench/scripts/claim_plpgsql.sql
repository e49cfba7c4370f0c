-- claim, one business write, complete: the PL/pgSQL implementation
-- The key has a random prefix, so keys spread over the index as random ids
-- do, and a unique suffix: client_id and the counter n, which run.sh starts
-- at a new million for every pgbench run.
\set n :n + 1
\set k random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n
BEGIN;
SELECT status FROM plpgsql_idem.plpgsql_claim(:k, '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'::bytea);
INSERT INTO bench.ledger (variant, payment_key, amount) VALUES ('plpgsql', :k, 100);
SELECT plpgsql_idem.plpgsql_complete(:k, '{"charge": "ch_1", "amount": 100}');
COMMIT;
