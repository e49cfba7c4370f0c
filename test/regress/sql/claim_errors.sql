-- Bad input and the extension's own errors.  Each call shows its SQLSTATE
-- and message; the end shows that none of them wrote anything: no row and
-- no fencing token (the token sequence is not transactional, so a call that
-- checked its input after taking a token would show here).
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;

-- Run a statement; show its SQLSTATE and message instead of failing
-- (token numbers masked: they depend on what ran before).
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, 'token \d+', 'token N');
END $$;

-- what exists before the bad calls
SELECT count(*) AS rows_before FROM idem.keys \gset
SELECT count(*) AS webhooks_before FROM idem.webhooks \gset
SELECT last_value AS seq_before, is_called AS seq_called_before FROM idem.token_seq \gset

-- keys: NULL, empty, over 255 bytes (in bytes, not characters)
SELECT pg_temp.err($$SELECT idem_claim(NULL)$$);
SELECT pg_temp.err($$SELECT idem_claim('')$$);
SELECT pg_temp.err($$SELECT idem_claim(repeat('k', 256))$$);
SELECT pg_temp.err($$SELECT idem_claim(repeat('é', 128))$$);
-- scopes: NULL, over 255 bytes
SELECT pg_temp.err($$SELECT idem_claim('e-1', scope => NULL)$$);
SELECT pg_temp.err($$SELECT idem_claim('e-1', scope => repeat('s', 256))$$);
-- leases and ttls: zero, negative, out of range
SELECT pg_temp.err($$SELECT idem_claim('e-1', lease => '0 s')$$);
SELECT pg_temp.err($$SELECT idem_claim('e-1', lease => '-5 s')$$);
SELECT pg_temp.err($$SELECT idem_claim('e-1', ttl => '0 s')$$);
SELECT pg_temp.err($$SELECT idem_claim('e-1', ttl => '-1 day')$$);
SELECT pg_temp.err($$SELECT idem_claim('e-1', ttl => '1 month -31 days')$$);
SELECT pg_temp.err($$SELECT idem_claim('e-1', ttl => '178000000 years')$$);
-- a fingerprint is a hash, not a payload
SELECT pg_temp.err($$SELECT idem_claim('e-1', fingerprint => convert_to(repeat('f', 256), 'UTF8'))$$);
-- the other entry points check the same way
SELECT pg_temp.err($$SELECT idem_complete(NULL)$$);
SELECT pg_temp.err($$SELECT idem_complete('e-1', scope => NULL)$$);
SELECT pg_temp.err($$SELECT idem_fail('', NULL)$$);
SELECT pg_temp.err($$SELECT idem_fail('e-1', NULL, retryable => NULL)$$);
SELECT pg_temp.err($$SELECT idem_checkpoint('e-1', NULL)$$);
SELECT pg_temp.err($$SELECT idem_checkpoint('e-1', '')$$);
SELECT pg_temp.err($$SELECT idem_checkpoint('e-1', 'p', lease => '0 s')$$);
SELECT pg_temp.err($$SELECT idem_lookup(NULL)$$);
SELECT pg_temp.err($$SELECT idem_lookup(repeat('k', 256))$$);
SELECT pg_temp.err($$SELECT idem_webhook(NULL, 'evt')$$);
SELECT pg_temp.err($$SELECT idem_webhook('stripe', NULL)$$);
SELECT pg_temp.err($$SELECT idem_webhook('stripe', '')$$);
SELECT pg_temp.err($$SELECT idem_webhook('stripe', repeat('e', 256))$$);
SELECT pg_temp.err($$SELECT idem_webhook(repeat('s', 256), 'evt')$$);
SELECT pg_temp.err($$SELECT idem_webhook('stripe', 'evt', ttl => '0 s')$$);
SELECT pg_temp.err($$SELECT idem_purge(0)$$);
SELECT pg_temp.err($$SELECT idem_purge(-1)$$);

-- nothing above wrote a row or took a token
SELECT count(*) - :rows_before AS new_rows FROM idem.keys;
SELECT count(*) - :webhooks_before AS new_webhooks FROM idem.webhooks;
SELECT last_value = :seq_before AND is_called = :'seq_called_before' AS no_token_taken
FROM idem.token_seq;

-- responses, errors and checkpoint data are capped by idem.max_response_size
SET idem.max_response_size = '1kB';
SELECT token AS t FROM idem_claim('e-big') \gset
SELECT pg_temp.err(format($$SELECT idem_complete('e-big', jsonb_build_object('x', repeat('r', 2000)), token => %s)$$, :t));
SELECT pg_temp.err(format($$SELECT idem_fail('e-big', jsonb_build_object('x', repeat('r', 2000)), token => %s)$$, :t));
SELECT pg_temp.err(format($$SELECT idem_checkpoint('e-big', 'p', jsonb_build_object('x', repeat('r', 2000)), token => %s)$$, :t));
-- the key is untouched by the refused calls: still processing, no checkpoint
SELECT state, attempt, checkpoint FROM idem_lookup('e-big');
SELECT pg_temp.err(format($$SELECT idem_complete('e-big', jsonb_build_object('x', repeat('r', 900)), token => %s)$$, :t));
RESET idem.max_response_size;

-- the extension's own errors, each with its own SQLSTATE:
-- ID002 no claim: nothing claimed, or the claim expired
SELECT pg_temp.err($$SELECT idem_complete('e-none', '"x"')$$);
SELECT pg_temp.err($$SELECT idem_checkpoint('e-none', 'p', token => 1)$$);
-- ID003 already finished
SELECT pg_temp.err($$SELECT idem_complete('e-big', '"again"')$$);
SELECT pg_temp.err(format($$SELECT idem_fail('e-big', '"again"', token => %s)$$, :t));
-- ID004 token required: the claim was made by another transaction
SELECT token AS t2 FROM idem_claim('e-two-phase') \gset
SELECT pg_temp.err($$SELECT idem_complete('e-two-phase', '"x"')$$);
-- ID001 stale token: a token that does not hold the key
SELECT pg_temp.err(format($$SELECT idem_complete('e-two-phase', '"x"', token => %s)$$, :t2 + 1000));
SELECT pg_temp.err(format($$SELECT idem_checkpoint('e-two-phase', 'p', token => %s)$$, :t));
SELECT state FROM idem_lookup('e-two-phase');

-- a claim rolled back to a savepoint is gone, also from what the backend
-- remembers: it cannot be completed without a token afterwards
BEGIN;
SAVEPOINT s;
SELECT status FROM idem_claim('e-savepoint');
ROLLBACK TO SAVEPOINT s;
SELECT pg_temp.err($$SELECT idem_complete('e-savepoint', '"x"')$$);
SELECT status FROM idem_claim('e-savepoint');
SELECT pg_temp.err($$SELECT idem_complete('e-savepoint', '"x"')$$);
COMMIT;
SELECT state FROM idem_lookup('e-savepoint');

-- a claim that replaced one of the same transaction inside a savepoint:
-- rolling back to the savepoint brings the first claim back, in the row and
-- in what the backend remembers, so it can still be completed
BEGIN;
SELECT status, attempt FROM idem_claim('e-nested');
SAVEPOINT s;
SELECT idem_fail('e-nested', '"retry"');
SELECT status, attempt FROM idem_claim('e-nested');
ROLLBACK TO SAVEPOINT s;
SELECT state, attempt FROM idem_lookup('e-nested');
SELECT pg_temp.err($$SELECT idem_complete('e-nested', '"first"')$$);
COMMIT;
SELECT state, attempt FROM idem_lookup('e-nested');

-- a claim whose transaction committed is forgotten by the backend too
BEGIN;
SELECT status FROM idem_claim('e-committed');
COMMIT;
SELECT pg_temp.err($$SELECT idem_complete('e-committed', '"x"')$$);

-- read-only transactions refuse to write
BEGIN READ ONLY;
SELECT pg_temp.err($$SELECT idem_claim('e-ro')$$);
SELECT pg_temp.err($$SELECT idem_webhook('q', 'e-ro')$$);
SELECT count(*) AS lookup_works FROM idem_lookup('e-big');
COMMIT;
