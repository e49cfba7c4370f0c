-- A claim of a new key writes its row once: when the claim is finished, or
-- just before its transaction commits.  Until then the claim holds its key
-- lock (see claim_wait.spec for the second claimer that waits on it).
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
RESET client_min_messages;
CREATE EXTENSION idem;

-- How many key locks this session holds (idem's show as objsubid 7649)
CREATE FUNCTION key_locks() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM pg_locks
    WHERE locktype = 'advisory' AND objsubid = 7649 AND pid = pg_backend_pid() AND granted
$$;

-- claim and complete in one transaction: no row until the completion, one
-- row version after it, the key lock held to the end
BEGIN;
SELECT status, attempt FROM idem_claim('pend-1', '\x01'::bytea);
SELECT count(*) AS rows_before_complete FROM idem.keys WHERE key = 'pend-1';
SELECT key_locks();
SELECT idem_complete('pend-1', '{"charge": "ch_1"}');
SELECT state, response FROM idem.keys WHERE key = 'pend-1';
COMMIT;
SELECT key_locks() AS locks_after_commit;
SELECT status, response FROM idem_claim('pend-1', '\x01'::bytea);

-- a claim committed without completion is written before the commit, as a
-- claim in progress with its lease
BEGIN;
SELECT token AS t2 FROM idem_claim('pend-2', '\x02'::bytea, lease => '1 hour') \gset
COMMIT;
SELECT state, attempt, token = :t2 AS same_token, lease_until > now() + '50 min' AS leased,
       fingerprint, expires_at >= lease_until AS expiry_covers_lease
FROM idem.keys WHERE key = 'pend-2';
SELECT status, retry_after > '50 min' AS waits_for_lease FROM idem_claim('pend-2', '\x02'::bytea);
SELECT idem_complete('pend-2', '"later"', token => :t2);
SELECT status, response FROM idem_claim('pend-2', '\x02'::bytea);

-- the claiming transaction sees its pending claim: idem_lookup shows it as
-- its row will be, a second claim answers in_progress (or mismatch)
BEGIN;
SELECT status FROM idem_claim('pend-3', '\x03'::bytea);
SELECT state, attempt, fingerprint, lease_until > now() AS leased, completed_at
FROM idem_lookup('pend-3');
-- also when the planner is told to run every query in a parallel worker:
-- idem_lookup is PARALLEL RESTRICTED, so it runs in the leader, where the
-- claim is (the setting is debug_parallel_query from 16 on)
SELECT current_setting('server_version_num')::int >= 160000 AS pg16 \gset
\if :pg16
SET LOCAL debug_parallel_query = on;
\else
SET LOCAL force_parallel_mode = on;
\endif
SELECT state, attempt FROM idem_lookup('pend-3');
\if :pg16
RESET debug_parallel_query;
\else
RESET force_parallel_mode;
\endif
SELECT status, attempt FROM idem_claim('pend-3', '\x03'::bytea);
SELECT status FROM idem_claim('pend-3', '\xff'::bytea);
-- the second claim needed the row: it is written now, and completes in place
SELECT state FROM idem.keys WHERE key = 'pend-3';
SELECT idem_complete('pend-3', '"done"');
SELECT state, attempt, response FROM idem.keys WHERE key = 'pend-3';
COMMIT;

-- a wrong token on a pending claim is stale, and writes nothing
BEGIN;
SELECT status FROM idem_claim('pend-4');
SAVEPOINT s;
SELECT idem_complete('pend-4', '"x"', token => -1);
ROLLBACK TO s;
SELECT count(*) AS rows_still FROM idem.keys WHERE key = 'pend-4';
-- a retryable failure writes the released row at once
SELECT idem_fail('pend-4', '{"error": "declined"}', retryable => true);
SELECT state, response FROM idem.keys WHERE key = 'pend-4';
COMMIT;
SELECT status, attempt FROM idem_claim('pend-4');

-- a checkpoint writes the pending row with its recovery point
BEGIN;
SELECT status FROM idem_claim('pend-5');
SELECT idem_checkpoint('pend-5', 'charged', '{"charge": "ch_5"}');
SELECT state, checkpoint, checkpoint_data FROM idem.keys WHERE key = 'pend-5';
COMMIT;
SELECT state, checkpoint FROM idem_lookup('pend-5');

-- savepoints: the completion rolled back, the claim is pending again and is
-- written at commit as in progress; a claim rolled back is gone, lock and all
BEGIN;
SELECT status FROM idem_claim('pend-6');
SAVEPOINT a;
SELECT idem_complete('pend-6', '"rolled back"');
SELECT state FROM idem.keys WHERE key = 'pend-6';
ROLLBACK TO a;
SELECT count(*) AS rows_after_rollback FROM idem.keys WHERE key = 'pend-6';
SAVEPOINT b;
SELECT status FROM idem_claim('pend-7');
SELECT key_locks() AS locks_with_pend_7;
ROLLBACK TO b;
SELECT key_locks() AS locks_without_pend_7;
COMMIT;
SELECT key, state FROM idem.keys WHERE key IN ('pend-6', 'pend-7') ORDER BY key;
SELECT status FROM idem_claim('pend-7');

-- the completion in a subtransaction that commits stays; nested savepoints
BEGIN;
SELECT status FROM idem_claim('pend-8');
SAVEPOINT a;
SAVEPOINT b;
SELECT idem_complete('pend-8', '"kept"');
RELEASE b;
RELEASE a;
COMMIT;
SELECT state, response FROM idem.keys WHERE key = 'pend-8';

-- written in a subtransaction that commits into one that rolls back: pending
-- again, and the completion after it writes the row once
BEGIN;
SELECT status FROM idem_claim('pend-9');
SAVEPOINT a;
SAVEPOINT b;
SELECT idem_checkpoint('pend-9', 'p1');
RELEASE b;
ROLLBACK TO a;
SELECT count(*) AS rows_after_rollback FROM idem.keys WHERE key = 'pend-9';
SELECT state, checkpoint FROM idem_lookup('pend-9');
SELECT idem_complete('pend-9', '"once"');
COMMIT;
SELECT state, checkpoint, response FROM idem.keys WHERE key = 'pend-9';

-- a transaction that rolls back leaves nothing
BEGIN;
SELECT status FROM idem_claim('pend-10');
ROLLBACK;
SELECT count(*) AS rows_after_rollback FROM idem.keys WHERE key = 'pend-10';

-- a transaction claiming many keys keeps at most 16 pending (16 key locks);
-- the rest are written at once and hold no lock
BEGIN;
SELECT count(*) FILTER (WHERE c.status = 'claimed') AS claimed
FROM generate_series(1, 40) g, idem_claim('many-' || g) c;
SELECT key_locks() AS locks_held;
SELECT count(*) AS written_at_once FROM idem.keys WHERE key LIKE 'many-%';
SELECT count(idem_complete('many-' || g, '"ok"')) FROM generate_series(1, 40) g;
COMMIT;
SELECT count(*) FILTER (WHERE state = 'completed') AS completed, count(*) AS keys
FROM idem.keys WHERE key LIKE 'many-%';

-- the 16 count the claims a transaction keeps: those of a savepoint that was
-- released do, those of one rolled back (which gave their locks back) do not
BEGIN;
SAVEPOINT a;
SELECT count(*) AS claimed FROM generate_series(1, 10) g, idem_claim('kept-' || g) c;
RELEASE a;
SAVEPOINT b;
SELECT count(*) AS claimed FROM generate_series(1, 16) g, idem_claim('undone-' || g) c;
ROLLBACK TO b;
SELECT key_locks() AS locks_after_rollback;
SELECT count(*) AS claimed FROM generate_series(1, 10) g, idem_claim('more-' || g) c;
SELECT key_locks() AS locks_held;
SELECT count(*) AS written_at_once FROM idem.keys WHERE key LIKE 'more-%';
ROLLBACK;

-- a prepared transaction's pending claims are written when it is prepared;
-- its key lock and row stay until COMMIT PREPARED
BEGIN;
SELECT status FROM idem_claim('pend-11');
PREPARE TRANSACTION 'pend_11';
SELECT status, attempt FROM idem_claim('pend-11', nowait => true);
COMMIT PREPARED 'pend_11';
SELECT state FROM idem.keys WHERE key = 'pend-11';
SELECT status FROM idem_claim('pend-11', nowait => true);

-- A claim's key lock belongs to the subtransaction that made the claim,
-- never to the cursor whose FETCH ran the call (claim_memory.c): a FETCH in a
-- savepoint that is rolled back loses claim and lock together; a claim made
-- before the savepoint keeps its lock when a later FETCH fails in it.
BEGIN;
DECLARE cur CURSOR FOR
    SELECT g, (SELECT status FROM idem_claim('pend-cur-' || g)) AS status, 1 / (g - 3) AS boom
    FROM generate_series(1, 3) g;
SAVEPOINT a;
FETCH 1 FROM cur;
SELECT key_locks() AS locks_in_savepoint;
ROLLBACK TO SAVEPOINT a;
SELECT key_locks() AS locks_after_rollback, count(*) AS lookups
FROM idem_lookup('pend-cur-1');
FETCH 1 FROM cur;
SAVEPOINT b;
FETCH 1 FROM cur;
ROLLBACK TO SAVEPOINT b;
SELECT key_locks() AS locks_after_failed_fetch;
CLOSE cur;
SELECT key_locks() AS locks_after_close;
SELECT idem_complete('pend-cur-2', '"done"');
COMMIT;
SELECT key, state FROM idem.keys WHERE key LIKE 'pend-cur-%' ORDER BY key;

-- A key claimed twice in one transaction is in progress the second time,
-- even once the first claim's lease and ttl have run out: the transaction's
-- own row does not expire under it.
BEGIN;
SELECT status FROM idem_claim('pend-13', ttl => '50 ms', lease => '50 ms');
SELECT pg_sleep(0.1);
SELECT status FROM idem_claim('pend-13', ttl => '50 ms', lease => '50 ms');
SELECT idem_complete('pend-13', '"once"');
SELECT state, response FROM idem.keys WHERE key = 'pend-13';
ROLLBACK;

-- TRUNCATE in a transaction that wrote claims: those rows are gone, and
-- completing one is "no claim", not a read of a block the new file lacks;
-- a claim still pending has its row written afterwards.
BEGIN;
SELECT count(*) AS claimed FROM generate_series(1, 20) g,
    idem_claim('pend-trunc-' || lpad(g::text, 2, '0')) c WHERE c.status = 'claimed';
TRUNCATE idem.keys;
SAVEPOINT a;
SELECT idem_complete('pend-trunc-20', '"x"');
ROLLBACK TO SAVEPOINT a;
SELECT idem_complete('pend-trunc-01', '"x"');
SELECT key, state FROM idem.keys ORDER BY key;
ROLLBACK;

DROP FUNCTION key_locks();

-- a transaction that drops idem after a claim has nowhere to write it: it
-- commits without it
BEGIN;
SELECT status FROM idem_claim('pend-12');
DROP EXTENSION idem;
COMMIT;
SELECT count(*) AS idem_schemas FROM pg_namespace WHERE nspname = 'idem';
CREATE EXTENSION idem;
SELECT count(*) AS rows_of_pend_12 FROM idem.keys WHERE key = 'pend-12';

-- A transaction that drops idem and creates it again does not write its
-- earlier claims into the new table (with tokens of the old sequence), and
-- cannot complete them there; tokens are never given twice.
BEGIN;
SELECT status, token > 0 AS has_token FROM idem_claim('pend-14');
DROP EXTENSION idem;
CREATE EXTENSION idem;
SAVEPOINT a;
SELECT idem_complete('pend-14', '"x"');
ROLLBACK TO SAVEPOINT a;
COMMIT;
SELECT count(*) AS rows_of_pend_14 FROM idem.keys WHERE key = 'pend-14';
SELECT status, token FROM idem_claim('pend-15');
