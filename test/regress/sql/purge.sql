-- idem_purge: deletes expired keys and webhook records, at most batch_size,
-- never a live row, and returns how many it deleted.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;

-- start from empty tables: other tests leave rows behind
DELETE FROM idem.keys;
DELETE FROM idem.webhooks;

-- three expired keys (completed, failed, released), one expired webhook record
SELECT idem_complete('p-done', '"x"', token => (SELECT token FROM idem_claim('p-done', lease => '100 ms', ttl => '100 ms')));
SELECT idem_fail('p-failed', '"x"', false, token => (SELECT token FROM idem_claim('p-failed', lease => '100 ms', ttl => '100 ms')));
SELECT idem_fail('p-released', '"x"', true, token => (SELECT token FROM idem_claim('p-released', lease => '100 ms', ttl => '100 ms')));
SELECT idem_webhook('stripe', 'evt-old', ttl => '100 ms');
-- and what must stay: a completed key and a webhook within their ttl, a
-- processing claim whose lease is live
SELECT idem_complete('p-live', '"x"', token => (SELECT token FROM idem_claim('p-live')));
SELECT idem_webhook('stripe', 'evt-new');
SELECT status FROM idem_claim('p-working', lease => '1 hour', ttl => '1 ms');
SELECT pg_sleep(0.2);

-- batches: at most batch_size rows each, keys first, then webhooks
SELECT idem_purge(2) AS purged;
SELECT idem_purge(2) AS purged;
SELECT idem_purge() AS purged;
SELECT key, state FROM idem.keys ORDER BY key;
SELECT event_id FROM idem.webhooks ORDER BY event_id;

-- several purges in one statement: the second must not trip over the rows
-- the first deleted
SELECT idem_complete(k, '"x"', token => (SELECT token FROM idem_claim(k, lease => '100 ms', ttl => '100 ms')))
FROM unnest(ARRAY['p-a', 'p-b', 'p-c']) k;
SELECT pg_sleep(0.2);
SELECT idem_purge(1) AS purged FROM generate_series(1, 4);

-- a claim and a purge in one statement: the purge skips the row the claim
-- just replaced
SELECT idem_complete('p-again', '"x"', token => (SELECT token FROM idem_claim('p-again', lease => '100 ms', ttl => '100 ms')));
SELECT pg_sleep(0.2);
SELECT (idem_claim('p-again')).status, idem_purge() AS purged;
SELECT key, state FROM idem.keys WHERE key = 'p-again';

DELETE FROM idem.keys;
DELETE FROM idem.webhooks;
