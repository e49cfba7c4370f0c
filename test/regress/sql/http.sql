-- idem_http_claim, idem_http_respond and idem_http_respond_retryable: a
-- claim answered in HTTP terms, byte-identical replays, the problem
-- answers, transient failures that run again, bad input that writes
-- nothing, and the 1.3 calls on keys finished with an HTTP response.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;

-- the first request: claimed, no answer to send yet
BEGIN;
SELECT status, http_status, body, content_type, retry_after, attempt
  FROM idem_http_claim('pay-1', idem_fingerprint('{"amount": 100.50}'));
-- the response as the application serialised it: spaces, key order, 100.50
SELECT idem_http_respond('pay-1', 201,
  '{"id": 9007199254740993,  "amount": 100.50, "currency":"CNY"}');
COMMIT;

-- a replay: the same status and the same bytes
SELECT status, http_status, body, content_type, retry_after, attempt
  FROM idem_http_claim('pay-1', idem_fingerprint('{"amount": 100.5}'));
SELECT body = '{"id": 9007199254740993,  "amount": 100.50, "currency":"CNY"}' AS same_bytes
  FROM idem_http_claim('pay-1');
-- 1.3's idem_claim replays the same response as jsonb
SELECT status, response FROM idem_claim('pay-1');
-- the row keeps the response once, as sent
SELECT state, http_status, body, response FROM idem.keys WHERE key = 'pay-1';

-- another request under the key: 422
SELECT status, http_status, body, content_type
  FROM idem_http_claim('pay-1', idem_fingerprint('{"amount": 200}'));

-- no key, an empty key, a key too long: 400, nothing written
SELECT status, http_status, body, content_type FROM idem_http_claim(NULL);
SELECT status, http_status FROM idem_http_claim('');
SELECT status, http_status FROM idem_http_claim(repeat('k', 256));
SELECT count(*) FROM idem.keys WHERE key = '' OR length(key) > 255;

-- a request in flight, committed as processing (two-phase): 409 with
-- Retry-After in whole seconds, rounded up
SELECT status FROM idem_claim('pay-2', lease => '90.2 s');
SELECT status, http_status, content_type, retry_after BETWEEN 90 AND 91 AS retry_after_ok
  FROM idem_http_claim('pay-2');

-- a final failure keeps its status and body
BEGIN;
SELECT status FROM idem_http_claim('pay-3');
SELECT idem_http_respond('pay-3', 402, '{"error": {"code": "card_declined"}}');
COMMIT;
SELECT status, http_status, body FROM idem_http_claim('pay-3');
SELECT state FROM idem.keys WHERE key = 'pay-3';

-- a transient failure (1.7): answered now, then released, so that the
-- retry runs again as attempt 2; the status and body are kept for operators
-- until then and never replayed
BEGIN;
SELECT status, attempt FROM idem_http_claim('pay-13');
SELECT idem_http_respond_retryable('pay-13', 503, '{"error": "gateway_unavailable"}');
COMMIT;
SELECT state, http_status, body, response FROM idem.keys WHERE key = 'pay-13';
BEGIN;
SELECT status, http_status, body, attempt FROM idem_http_claim('pay-13');
SELECT state, http_status, body FROM idem.keys WHERE key = 'pay-13';
SELECT idem_http_respond('pay-13', 201, '{"id": "13"}');
COMMIT;
SELECT status, http_status, body, attempt FROM idem_http_claim('pay-13');
-- two-phase, with the claim's token from another transaction
SELECT token AS t14 FROM idem_http_claim('pay-14', lease => '1 min') \gset
SELECT idem_http_respond_retryable('pay-14', 429, NULL, token => :t14);
SELECT state, http_status, body IS NULL AS no_body FROM idem.keys WHERE key = 'pay-14';
SELECT status, attempt FROM idem_http_claim('pay-14', lease => '1 min');

-- keys finished by 1.3's calls replay as 200 and 400 with the jsonb's text
BEGIN;
SELECT status FROM idem_claim('pay-4');
SELECT idem_complete('pay-4', '{"b": 1, "a": 2.50}');
SELECT status FROM idem_claim('pay-5');
SELECT idem_fail('pay-5', '{"error": "declined"}', retryable => false);
COMMIT;
SELECT status, http_status, body FROM idem_http_claim('pay-4');
SELECT status, http_status, body FROM idem_http_claim('pay-5');

-- a claim and its response in one transaction write one row, once
BEGIN;
SELECT status FROM idem_http_claim('pay-6', wait => NULL);
SELECT idem_http_respond('pay-6', 200, NULL);
SELECT state, http_status, body IS NULL AS no_body FROM idem.keys WHERE key = 'pay-6';
COMMIT;
SELECT status, http_status, body IS NULL AS no_body FROM idem_http_claim('pay-6');

-- two-phase: respond with the claim's token from another transaction
SELECT token AS t7 FROM idem_http_claim('pay-7', lease => '1 min') \gset
SELECT idem_http_respond('pay-7', 201, '{"ok":true}', token => :t7);
SELECT status, http_status, body FROM idem_http_claim('pay-7');

-- outside a transaction block, a claim without a lease must be finished by
-- the same statement: left in progress, it is refused at commit, and
-- nothing is written (a pool that replaced the client's BEGIN does this)
SELECT status FROM idem_http_claim('pay-10');
SELECT count(*) FROM idem.keys WHERE key = 'pay-10';
SELECT c.status, idem_http_respond('pay-10', 201, '{"one": "statement"}')
  FROM idem_http_claim('pay-10') c WHERE c.status = 'claimed';
SELECT status, http_status, body FROM idem_http_claim('pay-10');
-- the same for a claim that takes over an attempt whose lease ran out (its
-- row is written at once)
SELECT status FROM idem_claim('pay-12', lease => '1 ms');
SELECT pg_sleep(0.01);
SELECT status FROM idem_http_claim('pay-12');
SELECT state, attempt FROM idem_lookup('pay-12');
-- with a lease it is a two-phase claim, finished later with its token
SELECT status FROM idem_http_claim('pay-11', lease => '1 min');
SELECT state FROM idem_lookup('pay-11');

-- bad input to idem_http_respond: an error, nothing written
BEGIN;
SELECT status FROM idem_http_claim('pay-8');
SAVEPOINT s;
SELECT idem_http_respond('pay-8', 100, '{}');
ROLLBACK TO s;
SELECT idem_http_respond('pay-8', 600, '{}');
ROLLBACK TO s;
SELECT idem_http_respond('pay-8', NULL, '{}');
ROLLBACK TO s;
SELECT idem_http_respond('pay-8', 201, 'not json');
ROLLBACK TO s;
SET LOCAL idem.max_response_size = '1kB';
SELECT idem_http_respond('pay-8', 201, '"' || repeat('x', 2000) || '"');
ROLLBACK TO s;
SELECT idem_http_respond_retryable('pay-8', 201, '{}');
ROLLBACK TO s;
SELECT idem_http_respond_retryable('pay-8', 399, '{}');
ROLLBACK TO s;
SELECT idem_http_respond_retryable('pay-8', 600, '{}');
ROLLBACK TO s;
SELECT idem_http_respond_retryable('pay-8', NULL, '{}');
ROLLBACK TO s;
SELECT idem_http_respond_retryable('pay-8', 503, 'not json');
ROLLBACK TO s;
SELECT idem_http_respond_retryable(NULL, 503, '{}');
ROLLBACK TO s;
SELECT state FROM idem_lookup('pay-8');
ROLLBACK;
SELECT count(*) FROM idem.keys WHERE key = 'pay-8';
-- finishing twice, or without a claim
SELECT idem_http_respond('pay-1', 201, '{}');
SELECT idem_http_respond('nobody', 201, '{}');
SELECT idem_http_respond_retryable('pay-1', 503, '{}');
SELECT idem_http_respond_retryable('nobody', 503, '{}');
SELECT count(*) FROM idem.keys WHERE key = 'nobody';
-- a negative wait
SELECT status FROM idem_http_claim('pay-9', wait => '-1 s');
SELECT count(*) FROM idem.keys WHERE key = 'pay-9';

DELETE FROM idem.keys;
