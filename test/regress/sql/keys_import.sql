-- idem_keys_import and idem_webhooks_import (1.7): every value checked as
-- the function that writes it would check it, refused with that SQLSTATE
-- and nothing written; "the same attempt" is the same key, scope, attempt,
-- token, creation time and fingerprint; the token sequence moved past the
-- imported tokens, with room left after them and its settings kept; a
-- response that is the JSON value null imported as null.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;
\set SHOW_CONTEXT never
DELETE FROM idem.keys;
DELETE FROM idem.webhooks;
SELECT setval('idem.token_seq', 100);

-- What is written: keys, deliveries and the token sequence
CREATE FUNCTION pg_temp.written() RETURNS text LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM idem.keys) || ' keys, '
           || (SELECT count(*) FROM idem.webhooks) || ' deliveries, token_seq '
           || (SELECT last_value FROM idem.token_seq)
$$;

-- Import the elements with f (idem_keys_import or idem_webhooks_import):
-- "ok" with what it returned and what was then written, after which the
-- import is rolled back; or the SQLSTATE and message, and whether anything
-- was written all the same
CREATE FUNCTION pg_temp.try(f text, elements jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    before text := pg_temp.written();
    result text;
    st text;
    msg text;
BEGIN
    BEGIN
        EXECUTE format('SELECT %s($1)', f) INTO result USING elements;
        result := 'ok ' || result || ': ' || pg_temp.written();
        RAISE EXCEPTION 'undo' USING ERRCODE = 'IDT01';
    EXCEPTION
        WHEN SQLSTATE 'IDT01' THEN
            RETURN result;
        WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
            RETURN st || ' ' || msg
                   || CASE WHEN pg_temp.written() <> before THEN ' (AND IT WROTE)' ELSE '' END;
    END;
END $$;

-- A completed key as 1.7 exports it, and each case a change of it (null:
-- the field left out)
\set good '{"scope": "m1", "key": "k1", "state": "completed", "token": 500, "attempt": 1, "fingerprint": "0a0b", "created_at": "2026-01-01 00:00:00+00", "completed_at": "2026-01-01 00:00:01+00", "expires_at": "2099-01-01 00:00:00+00", "response": {"charge": "ch_1"}}'
SET idem.max_response_size = '1kB';
CREATE TEMP TABLE cases (n serial, what text, change jsonb);
INSERT INTO cases (what, change) VALUES
    ('the good element', '{}'),
    ('key empty', '{"key": ""}'),
    ('key of 255 bytes', jsonb_build_object('key', repeat('k', 255))),
    ('key of 256 bytes', jsonb_build_object('key', repeat('k', 256))),
    ('key a number', '{"key": 7}'),
    ('key an object', '{"key": {"k": 1}}'),
    ('scope empty', '{"scope": ""}'),
    ('scope of 256 bytes', jsonb_build_object('scope', repeat('s', 256))),
    ('scope a number', '{"scope": 1}'),
    ('state unknown', '{"state": "paid"}'),
    ('state a number', '{"state": 1}'),
    ('token 0', '{"token": 0}'),
    ('token -1', '{"token": -1}'),
    ('token 1.5', '{"token": 1.5}'),
    ('token a string', '{"token": "500"}'),
    ('token at the bound', '{"token": 9223372032559808511}'),
    ('token past the bound', '{"token": 9223372032559808512}'),
    ('token the largest bigint', '{"token": 9223372036854775807}'),
    ('token past bigint', '{"token": 1e30}'),
    ('attempt 0', '{"attempt": 0}'),
    ('attempt 2147483646', '{"attempt": 2147483646}'),
    ('attempt 2147483647', '{"attempt": 2147483647}'),
    ('fingerprint empty', '{"fingerprint": ""}'),
    ('fingerprint not hex', '{"fingerprint": "zz"}'),
    ('fingerprint a number', '{"fingerprint": 12}'),
    ('fingerprint of 255 bytes', jsonb_build_object('fingerprint', repeat('ab', 255))),
    ('fingerprint of 256 bytes', jsonb_build_object('fingerprint', repeat('ab', 256))),
    ('checkpoint of 255 bytes', jsonb_build_object('checkpoint', repeat('c', 255))),
    ('checkpoint of 256 bytes', jsonb_build_object('checkpoint', repeat('c', 256))),
    ('checkpoint empty', '{"checkpoint": ""}'),
    ('response at the limit', jsonb_build_object('response', repeat('r', 1024 - 8))),
    ('response over the limit', jsonb_build_object('response', repeat('r', 1024 - 7))),
    ('checkpoint_data at the limit', jsonb_build_object('checkpoint_data', repeat('d', 1024 - 8))),
    ('checkpoint_data over the limit', jsonb_build_object('checkpoint_data', repeat('d', 1024 - 7))),
    ('http_status 200 with a body', '{"http_status": 200, "body": "{\"ok\":true}", "response": null}'),
    ('http_status 999', '{"http_status": 999}'),
    ('http_status 0', '{"http_status": 0}'),
    ('http_status 199', '{"http_status": 199}'),
    ('http_status 200.5', '{"http_status": 200.5}'),
    ('http_status 402 completed', '{"http_status": 402, "response": null}'),
    ('http_status 402 failed', '{"http_status": 402, "state": "failed", "response": null}'),
    ('http_status 201 failed', '{"http_status": 201, "state": "failed", "response": null}'),
    ('http_status with a response', '{"http_status": 200}'),
    ('body without http_status', '{"body": "{}", "response": null}'),
    ('body not JSON', '{"http_status": 200, "body": "not json", "response": null}'),
    ('body with \u0000', '{"http_status": 200, "body": "\"\\u0000\"", "response": null}'),
    ('body a number too large', '{"http_status": 200, "body": "1e1000000", "response": null}'),
    ('body a number', '{"http_status": 200, "body": 12, "response": null}'),
    ('body at the limit', jsonb_build_object('http_status', 200, 'response', NULL,
                                             'body', '"' || repeat('b', 1022) || '"')),
    ('body over the limit', jsonb_build_object('http_status', 200, 'response', NULL,
                                               'body', '"' || repeat('b', 1023) || '"')),
    ('processing with a lease', '{"state": "processing", "completed_at": null, "response": null, "lease_until": "2098-01-01 00:00:00+00"}'),
    ('processing without a lease', '{"state": "processing", "completed_at": null, "response": null}'),
    ('processing completed', '{"state": "processing", "response": null, "lease_until": "2098-01-01 00:00:00+00"}'),
    ('completed with a lease', '{"lease_until": "2098-01-01 00:00:00+00"}'),
    ('completed without completed_at', '{"completed_at": null}'),
    ('failed without completed_at', '{"state": "failed", "completed_at": null}'),
    ('released', '{"state": "released", "completed_at": null}'),
    ('released completed', '{"state": "released"}'),
    ('expires_at before created_at', '{"expires_at": "2025-12-31 00:00:00+00"}'),
    ('lease_until after expires_at', '{"state": "processing", "completed_at": null, "response": null, "lease_until": "2099-01-02 00:00:00+00"}'),
    ('expires_at infinity', '{"expires_at": "infinity"}'),
    ('created_at -infinity', '{"created_at": "-infinity"}'),
    ('expires_at not a time', '{"expires_at": "soon"}'),
    ('expires_at a number', '{"expires_at": 20990101}'),
    ('http_status 503 released', '{"http_status": 503, "state": "released", "completed_at": null,
                                   "response": null, "body": "{\"error\":\"gateway\"}"}'),
    ('http_status 201 released', '{"http_status": 201, "state": "released", "completed_at": null,
                                   "response": null}');
SELECT n, what, pg_temp.try('idem_keys_import',
                            jsonb_build_array(jsonb_strip_nulls(:'good'::jsonb || change))) AS result
FROM cases ORDER BY n;

-- a 1.6 export: every field, null for SQL NULL
SELECT pg_temp.try('idem_keys_import', jsonb_build_array(
    :'good'::jsonb || '{"lease_until": null, "checkpoint": null, "checkpoint_data": null,
                        "http_status": null, "body": null}'));

-- a key twice in one import; the same key in another scope is another key
SELECT pg_temp.try('idem_keys_import', jsonb_build_array(:'good'::jsonb, :'good'::jsonb || '{"token": 501}'));
SELECT pg_temp.try('idem_keys_import', jsonb_build_array(:'good'::jsonb, :'good'::jsonb || '{"scope": "m2"}'));
-- a bad element after good ones: nothing written, the element named
SELECT pg_temp.try('idem_keys_import', jsonb_build_array(:'good'::jsonb, :'good'::jsonb || '{"scope": "m2"}',
                                                         :'good'::jsonb || '{"key": "k3", "attempt": 0}'));
RESET idem.max_response_size;

-- a value far under idem.max_response_size whose text is more than a
-- replay holds (9000 numbers of 131072 digits print as 1.2 GB), as a
-- response and as a body, refused as idem_complete and idem_http_respond
-- refuse it; a smaller one of the same kind is accepted
SELECT pg_temp.try('idem_keys_import', jsonb_build_array(:'good'::jsonb || jsonb_build_object(
    'response', (SELECT jsonb_agg('1e131071'::numeric) FROM generate_series(1, 9000)))));
SELECT pg_temp.try('idem_keys_import', jsonb_build_array(jsonb_strip_nulls(:'good'::jsonb || jsonb_build_object(
    'response', NULL, 'http_status', 200, 'body', '[' || repeat('1e131071,', 9000) || '1]'))));
SELECT pg_temp.try('idem_keys_import', jsonb_build_array(jsonb_strip_nulls(:'good'::jsonb || jsonb_build_object(
    'response', NULL, 'http_status', 200, 'body', '[' || repeat('1e131071,', 3) || '1]'))));

-- the largest token, at top level: refused, the sequence where it was,
-- and claims go on
SELECT idem_keys_import(jsonb_build_array(:'good'::jsonb || '{"token": 9223372036854775807}'));
SELECT pg_temp.written();
SELECT token AS claimed_after FROM idem_claim('after-max');
DELETE FROM idem.keys;

-- --- the same attempt ---

-- The destination claimed key k1 of m1 as token 700001; the source's
-- export has the same key with the same token, another attempt.  Refused:
-- otherwise the source's worker would complete the destination's attempt
-- with token 700001.
SELECT setval('idem.token_seq', 700000);
SELECT token AS destination_token FROM idem_claim('k1', '\x0a0b', scope => 'm1', lease => '1 hour');
SELECT pg_temp.try('idem_keys_import', jsonb_build_array(
    :'good'::jsonb || '{"token": 700001, "state": "processing", "completed_at": null, "response": null,
                        "lease_until": "2098-01-01 00:00:00+00"}'));
SELECT state, token, attempt, created_at > '2026-01-01' AS destination_created_at FROM idem.keys;
DELETE FROM idem.keys;

-- The same export imported twice writes it once; an attempt of it that went
-- on here (completed) stays as it is; one that differs in a field that
-- makes an attempt, or was taken over here, is another attempt
SELECT token AS t2 FROM idem_claim('two-phase', '\x02', scope => 'm1', lease => '1 hour') \gset
SELECT token AS t3 FROM idem_claim('retry', scope => 'm1', lease => '1 hour') \gset
BEGIN;
SELECT status FROM idem_claim('done', scope => 'm1');
SELECT idem_complete('done', '{"charge": "ch_1"}', scope => 'm1');
COMMIT;
CREATE TEMP TABLE export AS SELECT jsonb_agg(e) AS keys FROM idem_keys_export(ARRAY['m1']) e;
DELETE FROM idem.keys;
SELECT setval('idem.token_seq', 1);
SELECT idem_keys_import(keys) AS imported FROM export;
SELECT idem_keys_import(keys) AS imported_again FROM export;
SELECT count(*) AS keys FROM idem.keys;
SELECT idem_complete('two-phase', '{"charge": "ch_2"}', scope => 'm1', token => :t2);
SELECT idem_keys_import(keys) AS imported_after_completion FROM export;
SELECT key, state, attempt, response FROM idem.keys ORDER BY key;
SELECT pg_temp.try('idem_keys_import', jsonb_set(keys, '{2,created_at}', '"2026-01-01 00:00:00+00"')) FROM export;
SELECT pg_temp.try('idem_keys_import', jsonb_set(keys, '{2,fingerprint}', '"03"')) FROM export;
SELECT pg_temp.try('idem_keys_import', jsonb_set(keys, '{2,attempt}', '2')) FROM export;
-- an expired row of the key gives way
UPDATE idem.keys SET expires_at = now() - interval '1 s', token = 3 WHERE key = 'two-phase';
SELECT idem_keys_import(keys) AS imported_over_expired FROM export;
SELECT key, state, token = :t2 AS imported_token FROM idem.keys WHERE key = 'two-phase';
-- retry released here and taken over by attempt 2
SELECT idem_fail('retry', '{"error": "timeout"}', scope => 'm1', token => :t3);
SELECT status, attempt FROM idem_claim('retry', scope => 'm1');
SELECT pg_temp.try('idem_keys_import', keys) FROM export;
DELETE FROM idem.keys;

-- --- the token sequence ---

-- its settings are kept: INCREMENT 10, CACHE 5; claims after the import
-- draw tokens past the imported one, by the increment
ALTER SEQUENCE idem.token_seq INCREMENT BY 10 CACHE 5;
SELECT setval('idem.token_seq', 100);
SELECT idem_keys_import(jsonb_build_array(:'good'::jsonb || '{"token": 1000}')) AS imported;
SELECT seqincrement, seqcache, seqmax FROM pg_sequence WHERE seqrelid = 'idem.token_seq'::regclass;
SELECT token AS next_claim FROM idem_claim('after-increment');
ALTER SEQUENCE idem.token_seq INCREMENT BY 1 CACHE 1;
DELETE FROM idem.keys;

-- --- null survives a move ---

SELECT idem_complete('json-null', 'null', token => (SELECT token FROM idem_claim('json-null', scope => 'n')),
                     scope => 'n');
SELECT idem_complete('sql-null', token => (SELECT token FROM idem_claim('sql-null', scope => 'n')),
                     scope => 'n');
SELECT idem_checkpoint('cp-null', 'charged', 'null', scope => 'n',
                       token => (SELECT token FROM idem_claim('cp-null', scope => 'n', lease => '1 hour')));
SELECT e ->> 'key' AS key, e ? 'response' AS has_response, e -> 'response' AS response,
       e ? 'checkpoint_data' AS has_data, e -> 'checkpoint_data' AS data
FROM idem_keys_export(ARRAY['n']) e;
CREATE TEMP TABLE nulls AS SELECT jsonb_agg(e) AS keys FROM idem_keys_export(ARRAY['n']) e;
DELETE FROM idem.keys;
SELECT idem_keys_import(keys) AS imported FROM nulls;
SELECT key, response IS NULL AS sql_null, response, checkpoint_data IS NULL AS data_sql_null, checkpoint_data
FROM idem.keys ORDER BY key;
SELECT status, response IS NULL AS sql_null, response FROM idem_claim('json-null', scope => 'n');
SELECT status, response IS NULL AS sql_null, response FROM idem_claim('sql-null', scope => 'n');
-- a 1.6 export said null for SQL NULL, in every field: imported as SQL NULL
DELETE FROM idem.keys;
SELECT idem_keys_import(jsonb_build_array(
    :'good'::jsonb || '{"key": "k16", "response": null, "lease_until": null, "checkpoint": null,
                        "checkpoint_data": null, "http_status": null, "body": null}'));
SELECT key, response IS NULL AS sql_null FROM idem.keys;
DELETE FROM idem.keys;

-- --- deliveries ---

\set delivery '{"source": "psp", "event_id": "evt_1", "received_at": "2026-01-01 00:00:00+00", "expires_at": "2099-01-01 00:00:00+00"}'
SELECT what, pg_temp.try('idem_webhooks_import', jsonb_build_array(:'delivery'::jsonb || change)) AS result
FROM (VALUES ('the good delivery', '{}'::jsonb),
             ('source empty', '{"source": ""}'),
             ('source of 256 bytes', jsonb_build_object('source', repeat('s', 256))),
             ('source a number', '{"source": 5}'),
             ('event_id empty', '{"event_id": ""}'),
             ('event_id of 255 bytes', jsonb_build_object('event_id', repeat('e', 255))),
             ('event_id of 256 bytes', jsonb_build_object('event_id', repeat('e', 256))),
             ('event_id an object', '{"event_id": {"id": 1}}'),
             ('expires_at before received_at', '{"expires_at": "2025-01-01 00:00:00+00"}'),
             ('expires_at infinity', '{"expires_at": "infinity"}'),
             ('received_at not a time', '{"received_at": "yesterday-ish"}')) c(what, change);
SELECT pg_temp.try('idem_webhooks_import', jsonb_build_array(:'delivery'::jsonb, :'delivery'::jsonb));
SELECT pg_temp.try('idem_webhooks_import',
                   jsonb_build_array(:'delivery'::jsonb, :'delivery'::jsonb || '{"source": "other"}'));

-- --- idem.max_response_size, read as the library reads it ---

SELECT idem.max_response_bytes() AS default_bytes;
SET idem.max_response_size = '1536kB';
SELECT current_setting('idem.max_response_size') AS setting, idem.max_response_bytes() AS bytes;
SET idem.max_response_size = '2GB';
SELECT current_setting('idem.max_response_size') AS setting, idem.max_response_bytes() AS bytes;
RESET idem.max_response_size;

-- PUBLIC can execute none of the helpers
SELECT count(*) AS public_can
FROM pg_proc p
WHERE p.pronamespace = 'idem'::regnamespace AND p.proname IN
      ('max_response_bytes', 'import_raise', 'import_text', 'import_time', 'import_integer',
       'import_json', 'import_key')
  AND has_function_privilege('public', p.oid, 'EXECUTE');

DELETE FROM idem.keys;
DELETE FROM idem.webhooks;
