-- webhook delivery, half of them duplicates: PL/pgSQL
-- The key has a random prefix, so keys spread over the index as random ids
-- do, and a unique suffix: client_id and the counter n, which run.sh starts
-- at a new million for every pgbench run.
-- Half the events are one of the pre-loaded ids (a duplicate delivery).
\set n :n + 1
\set e CASE WHEN random(0, 1) = 1 THEN random(1, :events) ELSE random(1, 90000000) * 100000000000 + :client_id * 1000000000 + :n END
BEGIN;
SELECT plpgsql_idem.plpgsql_webhook('stripe', :e) AS fresh \gset
\if :fresh
INSERT INTO bench.ledger (variant, payment_key, amount) VALUES ('webhook_plpgsql', :e, 100);
\endif
COMMIT;
