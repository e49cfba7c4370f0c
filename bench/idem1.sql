-- The one-statement payment of bench/seeds/loadgen.c (doc/usage.md): claim
-- key :k, book amount :m into account :a (a ledger row and the balance),
-- complete with the ledger row's id in the insert's RETURNING; a replay
-- answers the stored response.
-- A pgbench statement; bench/wal.sh and bench/upgrade.sh read this file.
WITH c AS (SELECT * FROM idem_claim(:k, '\x9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08'::bytea)),
     pay AS (INSERT INTO ledger (k, account, amount)
             SELECT :k, :a, :m FROM c WHERE c.status = 'claimed'
             RETURNING id, idem_complete(:k, jsonb_build_object('charge', id))),
     bal AS (UPDATE accounts SET balance = balance + :m
             WHERE id = :a AND EXISTS (SELECT FROM pay))
SELECT c.status, coalesce(c.response, (SELECT jsonb_build_object('charge', id) FROM pay))
FROM c;
