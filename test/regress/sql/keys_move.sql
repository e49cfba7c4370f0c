-- idem_keys_export / idem_keys_import, idem_webhooks_export /
-- idem_webhooks_import: moving live keys and deliveries to another
-- database (a shard move).  Here the other database is this one, emptied
-- between export and import.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;
-- the errors without the PL/pgSQL lines that raised them
\set SHOW_CONTEXT never
DELETE FROM idem.keys;
DELETE FROM idem.webhooks;

-- merchant m1: a completed key, a declined one, a two-phase attempt in
-- flight with a checkpoint, an expired key; m2: a key that stays
BEGIN;
SELECT status FROM idem_claim('mv-done', '\x01', scope => 'm1');
SELECT idem_complete('mv-done', '{"charge": "ch_1"}', scope => 'm1');
COMMIT;
SELECT idem_fail('mv-declined', '{"status": 402}', false, scope => 'm1',
                 token => (SELECT token FROM idem_claim('mv-declined', scope => 'm1')));
SELECT token AS inflight FROM idem_claim('mv-2p', '\x02', scope => 'm1', lease => '1 hour') \gset
SELECT idem_checkpoint('mv-2p', 'charged', '{"charge": "ch_2"}', scope => 'm1', token => :inflight);
SELECT idem_complete('mv-old', '"x"', scope => 'm1',
                     token => (SELECT token FROM idem_claim('mv-old', scope => 'm1', lease => '10 ms', ttl => '10 ms')));
SELECT status FROM idem_claim('mv-other', scope => 'm2');
SELECT idem_webhook('psp', 'evt_1'), idem_webhook('psp', 'evt_2'), idem_webhook('psp', 'evt_9');
SELECT pg_sleep(0.05);

-- the export: m1's live keys (not the expired one), every field that is
-- not SQL NULL
SELECT count(*) AS exported, string_agg(e ->> 'key', ',') AS keys,
       min(jsonb_object_keys_count) AS fields
FROM (SELECT e, (SELECT count(*) FROM jsonb_object_keys(e)) AS jsonb_object_keys_count
      FROM idem_keys_export(ARRAY['m1']) e) x;
CREATE TEMP TABLE before AS SELECT * FROM idem.keys WHERE scope = 'm1' AND expires_at > now();
CREATE TEMP TABLE moving AS SELECT jsonb_agg(e) AS keys FROM idem_keys_export(ARRAY['m1']) e;
CREATE TEMP TABLE moving_hooks AS
    SELECT jsonb_agg(e) AS deliveries FROM idem_webhooks_export('psp', ARRAY['evt_1', 'evt_2', 'evt_x']) e;
SELECT jsonb_array_length(deliveries) AS deliveries_exported FROM moving_hooks;

-- "another database": the keys and deliveries are not there, its token
-- sequence is behind
DELETE FROM idem.keys WHERE scope = 'm1';
DELETE FROM idem.webhooks WHERE event_id IN ('evt_1', 'evt_2');
SELECT setval('idem.token_seq', 1);

-- bad input: an error, and nothing written
SELECT idem_keys_import('{"key": "x"}');
SELECT idem_keys_import('[1]');
SELECT idem_keys_import('[{"scope": "m1", "key": "k", "state": "completed", "token": 1, "attempt": 1, "created_at": "2026-01-01", "expires_at": "2099-01-01", "colour": "red"}]');
SELECT idem_keys_import('[{"scope": "m1", "key": "k", "state": "completed", "token": 1, "attempt": 1, "created_at": "2026-01-01"}]');
SELECT idem_keys_import('[{"scope": "m1", "key": "", "state": "completed", "token": 1, "attempt": 1, "created_at": "2026-01-01", "expires_at": "2099-01-01"}]');
SELECT idem_keys_import('[{"scope": "m1", "key": "k", "state": "paid", "token": 1, "attempt": 1, "created_at": "2026-01-01", "expires_at": "2099-01-01"}]');
-- a good element before a bad one is not written either
SELECT idem_keys_import((SELECT keys FROM moving) || '[{"scope": "m1", "key": "k", "state": "completed", "token": "one", "attempt": 1, "created_at": "2026-01-01", "expires_at": "2099-01-01"}]');
SELECT idem_webhooks_import('[{"source": "psp", "event_id": "evt_z"}]');
SELECT count(*) AS m1_keys FROM idem.keys WHERE scope = 'm1';
SELECT count(*) AS deliveries FROM idem.webhooks WHERE event_id IN ('evt_1', 'evt_2', 'evt_z');
SELECT last_value AS token_seq FROM idem.token_seq;

-- the import: every field as it was; the token sequence past the tokens
SELECT idem_keys_import(keys) AS imported FROM moving;
SELECT count(*) AS differing FROM
    ((SELECT * FROM before EXCEPT SELECT * FROM idem.keys)
     UNION ALL (SELECT * FROM idem.keys WHERE scope = 'm1' EXCEPT SELECT * FROM before)) d;
SELECT (SELECT last_value FROM idem.token_seq) >= (SELECT max(token) FROM before) AS past_the_tokens;
SELECT idem_webhooks_import(deliveries) AS imported FROM moving_hooks;
SELECT idem_webhook('psp', 'evt_1') AS evt_1_new, idem_webhook('psp', 'evt_2') AS evt_2_new;

-- here they behave as they did there
SELECT status, response FROM idem_claim('mv-done', '\x01', scope => 'm1');
SELECT status FROM idem_claim('mv-done', '\x09', scope => 'm1');
SELECT status, response FROM idem_claim('mv-declined', scope => 'm1');
SELECT status, checkpoint, checkpoint_data FROM idem_claim('mv-2p', '\x02', scope => 'm1');
SELECT idem_complete('mv-2p', '{"charge": "ch_2"}', scope => 'm1', token => :inflight);
SELECT status, response FROM idem_claim('mv-2p', '\x02', scope => 'm1');
SELECT status, attempt FROM idem_claim('mv-old', scope => 'm1');
SELECT token > :inflight AS newer_token FROM idem_claim('mv-new', scope => 'm1', lease => '1 s');

-- importing again changes nothing; a live key of another attempt here is
-- refused, and nothing of that import is written
SELECT idem_keys_import(keys) AS imported_again FROM
    (SELECT jsonb_agg(e) AS keys FROM idem_keys_export(ARRAY['m2']) e) x;
DO $$
BEGIN
    PERFORM idem_keys_import(jsonb_build_array(
        jsonb_build_object('scope', 'm9', 'key', 'fresh', 'state', 'completed', 'token', 1,
                           'attempt', 1, 'created_at', now(), 'completed_at', now(),
                           'expires_at', now() + interval '1 day'),
        (SELECT e || '{"token": 1}' FROM idem_keys_export(ARRAY['m2']) e)));
EXCEPTION WHEN unique_violation THEN
    RAISE NOTICE 'refused: %', regexp_replace(SQLERRM, 'token \d+', 'token N');
END
$$;
SELECT count(*) AS m9_keys FROM idem.keys WHERE scope = 'm9';

-- PUBLIC cannot run them
SELECT has_function_privilege('public', f, 'EXECUTE') AS public_can
FROM unnest(ARRAY['idem_keys_export(text[])', 'idem_keys_import(jsonb)',
                  'idem_webhooks_export(text, text[])', 'idem_webhooks_import(jsonb)']::regprocedure[]) f;

DELETE FROM idem.keys;
DELETE FROM idem.webhooks;
