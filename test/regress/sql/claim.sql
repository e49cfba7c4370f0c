-- idem_claim and its statuses, completion, replay, failure, expiry, scopes,
-- checkpoints and fencing tokens.  Times and tokens vary from run to run, so
-- the queries print what is true of them rather than the values.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;
-- errors print their SQLSTATE only: their messages name token numbers
\set VERBOSITY sqlstate

-- claimed: a new key; the first attempt has a token and nothing to resume
SELECT status, attempt, token AS t1, response IS NULL AS no_response,
       checkpoint IS NULL AND checkpoint_data IS NULL AS no_checkpoint,
       retry_after IS NULL AS no_retry_after
FROM idem_claim('pay-1', '\x01'::bytea) \gset
SELECT :'status' AS status, :attempt AS attempt, :t1 > 0 AS has_token,
       :'no_response' AS no_response, :'no_checkpoint' AS no_checkpoint,
       :'no_retry_after' AS no_retry_after;

-- in_progress: the claim committed as processing and holds its lease (60s);
-- the answer says when to retry and never shows the holder's token
SELECT status, attempt, token, response,
       retry_after > '0' AND retry_after <= '60 s' AS retry_within_lease
FROM idem_claim('pay-1', '\x01'::bytea);

-- mismatch: the same key with another request
SELECT status, token, attempt, response FROM idem_claim('pay-1', '\x02'::bytea);

-- completed: finish with the token, then every retry replays the response
SELECT idem_complete('pay-1', '{"charge": "ch_1", "amount": 100}', token => :t1);
SELECT status, attempt, token, response FROM idem_claim('pay-1', '\x01'::bytea);
-- a retry without a fingerprint replays too (nothing to compare)
SELECT status, response FROM idem_claim('pay-1');
-- a different request is still a mismatch after completion
SELECT status, response FROM idem_claim('pay-1', '\x02'::bytea);

-- the in-transaction way: claim, business write and completion commit together
CREATE TABLE ledger (key text, amount int);
BEGIN;
SELECT status, attempt FROM idem_claim('pay-2', '\x01'::bytea);
INSERT INTO ledger VALUES ('pay-2', 100);
SELECT idem_complete('pay-2', '{"charge": "ch_2"}');
COMMIT;
SELECT status, response FROM idem_claim('pay-2', '\x01'::bytea);

-- a rolled-back transaction leaves nothing: the key is claimable again
BEGIN;
SELECT status FROM idem_claim('pay-3');
INSERT INTO ledger VALUES ('pay-3', 100);
SELECT idem_complete('pay-3', '{"charge": "ch_3"}');
ROLLBACK;
SELECT count(*) AS ledger_rows FROM ledger WHERE key = 'pay-3';
SELECT status, attempt FROM idem_claim('pay-3');

-- claiming twice in one transaction: the second call must not run the work again
BEGIN;
SELECT status, attempt FROM idem_claim('pay-4');
SELECT status, attempt, token FROM idem_claim('pay-4');
SELECT idem_complete('pay-4', '"done"');
COMMIT;

-- failed: a final failure is kept and replayed, like a declined card's answer
SELECT token AS t5 FROM idem_claim('pay-5', '\x05'::bytea) \gset
SELECT idem_fail('pay-5', '{"code": "card_declined"}', retryable => false, token => :t5);
SELECT status, attempt, response FROM idem_claim('pay-5', '\x05'::bytea);
SELECT state, attempt, completed_at IS NOT NULL AS finished FROM idem_lookup('pay-5');

-- a retryable failure releases the key: the next claim gets it at once,
-- as attempt 2, and the released attempt's token is dead
SELECT token AS t6 FROM idem_claim('pay-6') \gset
SELECT idem_fail('pay-6', '{"code": "gateway_timeout"}', token => :t6);
SELECT state, attempt FROM idem_lookup('pay-6');
SELECT status, attempt, token <> :t6 AS new_token FROM idem_claim('pay-6');
SELECT idem_complete('pay-6', '"late"', token => :t6);

-- TTL expiry: a key past its expires_at counts as absent, purged or not,
-- so it can be claimed again (even for another request) from attempt 1
SELECT token AS t7 FROM idem_claim('pay-7', '\x07'::bytea, lease => '50 ms', ttl => '100 ms') \gset
SELECT idem_complete('pay-7', '"first"', token => :t7);
SELECT pg_sleep(0.3);
SELECT * FROM idem_lookup('pay-7');
SELECT status, attempt, response FROM idem_claim('pay-7', '\x70'::bytea);
SELECT state, attempt, fingerprint FROM idem_lookup('pay-7');

-- the expiry covers the lease: a ttl shorter than the lease never drops a live claim
SELECT status FROM idem_claim('pay-8', ttl => '1 ms', lease => '1 hour');
SELECT expires_at >= lease_until AS expiry_covers_lease FROM idem_lookup('pay-8');

-- scopes are isolated: one key name in two scopes is two keys
SELECT status FROM idem_claim('order-9', scope => 'merchant-a');
SELECT status FROM idem_claim('order-9', scope => 'merchant-b');
SELECT idem_complete('order-9', '"a"', scope => 'merchant-a',
                     token => (SELECT token FROM idem.keys WHERE scope = 'merchant-a' AND key = 'order-9'));
SELECT status, response FROM idem_claim('order-9', scope => 'merchant-a');
SELECT status, response FROM idem_claim('order-9', scope => 'merchant-b');
SELECT status FROM idem_claim('order-9');
SELECT scope, state FROM idem.keys WHERE key = 'order-9' ORDER BY scope;

-- two-phase with a checkpoint: the first worker records that it called the
-- gateway, then dies; after its lease the next attempt resumes from there
SELECT token AS t10 FROM idem_claim('pay-10', '\x10'::bytea, lease => '200 ms') \gset
SELECT idem_checkpoint('pay-10', 'gateway_called', '{"charge": "ch_10"}', token => :t10, lease => '200 ms');
SELECT state, checkpoint FROM idem_lookup('pay-10');
SELECT status FROM idem_claim('pay-10', '\x10'::bytea);
SELECT pg_sleep(0.3);
SELECT status, attempt, checkpoint, checkpoint_data, token AS t10b
FROM idem_claim('pay-10', '\x10'::bytea) \gset
SELECT :'status' AS status, :attempt AS attempt, :'checkpoint' AS checkpoint, :'checkpoint_data' AS checkpoint_data;
-- fencing: the dead worker's token can neither complete, fail nor checkpoint
SELECT idem_complete('pay-10', '"stale"', token => :t10);
SELECT idem_fail('pay-10', '"stale"', token => :t10);
SELECT idem_checkpoint('pay-10', 'stale', token => :t10);
-- the current token can
SELECT idem_checkpoint('pay-10', 'confirmed', '{"charge": "ch_10"}', token => :t10b);
SELECT idem_complete('pay-10', '{"charge": "ch_10"}', token => :t10b);
SELECT status, attempt, response FROM idem_claim('pay-10', '\x10'::bytea);
SELECT state, attempt, checkpoint FROM idem_lookup('pay-10');

-- a checkpoint extends the lease
SELECT token AS t11 FROM idem_claim('pay-11', lease => '1 s') \gset
SELECT idem_checkpoint('pay-11', 'step-1', token => :t11, lease => '1 hour');
SELECT status, retry_after > '50 min' AS lease_extended FROM idem_claim('pay-11');
-- and never shortens it: a later checkpoint with a shorter lease keeps the hour
SELECT idem_checkpoint('pay-11', 'step-2', token => :t11, lease => '1 s');
SELECT status, retry_after > '50 min' AS lease_kept FROM idem_claim('pay-11');

-- a lease that ran out with no takeover yet: the token still owns the key
SELECT token AS t12 FROM idem_claim('pay-12', lease => '50 ms') \gset
SELECT pg_sleep(0.1);
SELECT idem_complete('pay-12', '"in time"', token => :t12);
SELECT status, response FROM idem_claim('pay-12');

-- tokens are unique across keys, not per key
SELECT count(DISTINCT token) = count(*) AS tokens_unique FROM idem.keys;

-- idem_lookup: one row for a live key, none for an unknown one
SELECT state, attempt, fingerprint, lease_until IS NULL AS no_lease, checkpoint,
       created_at <= completed_at AS ordered, expires_at > now() AS live
FROM idem_lookup('pay-1');
SELECT count(*) FROM idem_lookup('no-such-key');

DROP TABLE ledger;

-- SELECT (idem_claim(...)).* calls the function once per column: the first
-- call claims the key, the six others answer in_progress (the transaction's
-- own claim), and the row mixes the seven answers: status claimed, but no
-- token.  SELECT ... FROM idem_claim(...) calls it once.
SELECT claimed, in_progress FROM idem_stats WHERE datname = current_database() \gset before_
SELECT (idem_claim('pay-star')).* \gset star_
SELECT :'star_status' AS status, NOT :{?star_token} AS token_lost;
SELECT claimed - :before_claimed AS claims, in_progress - :before_in_progress AS in_progress_answers
FROM idem_stats WHERE datname = current_database();
SELECT claimed, in_progress FROM idem_stats WHERE datname = current_database() \gset before_
SELECT status, token IS NOT NULL AS has_token FROM idem_claim('pay-from');
SELECT claimed - :before_claimed AS claims, in_progress - :before_in_progress AS in_progress_answers
FROM idem_stats WHERE datname = current_database();
