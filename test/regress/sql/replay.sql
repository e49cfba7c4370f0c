-- A stored answer always replays: what idem_http_respond, idem_complete,
-- idem_fail and idem_checkpoint accept, idem_claim (as jsonb) and
-- idem_http_claim (byte for byte) give back.  What jsonb cannot read is
-- refused when written, with jsonb's SQLSTATE, and nothing is written; a
-- body that an earlier version stored and jsonb cannot read still replays.
-- idem.max_response_size counts a value's own bytes.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;

-- Run a statement; show its SQLSTATE and message instead of failing
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- bodies json accepts and jsonb does not: refused by idem_http_respond with
-- jsonb's SQLSTATE, and the key is left as it was, claimed and processing
SELECT token AS t FROM idem_http_claim('r-bad', lease => '1 min') \gset
SELECT b AS body, pg_temp.err(format('SELECT idem_http_respond(%L, 201, %L, token => %s)',
                                     'r-bad', b, :t)) AS refused
  FROM unnest(ARRAY['{"a":"\u0000"}', '{"n":1e200000}', '[1e-200000]',
                    '[1e131072]', 'not json', '{"a":1']) b;
SELECT state, attempt, http_status, body IS NULL AS no_body FROM idem.keys WHERE key = 'r-bad';
-- the message says why: idem replays the body as jsonb
\set VERBOSITY default
SELECT idem_http_respond('r-bad', 201, '{"a":"\u0000"}', token => :t);
-- the key still works: a good body finishes it and replays
SELECT idem_http_respond('r-bad', 201, '{"a":"\u0001"}', token => :t);
SELECT status, http_status, body FROM idem_http_claim('r-bad');
SELECT status, response FROM idem_claim('r-bad');

-- in one transaction, a refused body rolls back with the claim: no row
BEGIN;
SELECT status FROM idem_http_claim('r-bad-2');
SELECT idem_http_respond('r-bad-2', 201, '{"n":1e200000}');
ROLLBACK;
SELECT count(*) FROM idem.keys WHERE key = 'r-bad-2';
SELECT status FROM idem_http_claim('r-bad-2', lease => '1 min');

-- their good neighbours: stored as sent, replayed byte for byte by
-- idem_http_claim and as jsonb by idem_claim
CREATE TEMP TABLE good (n int, b text);
INSERT INTO good VALUES
  (1, '{"a":"\u0001\u00e9\ud83d\ude00"}'),
  (2, '{"n":1e131071}'),
  (3, '[1e-16383, -0.0, 1E+2]'),
  (4, '{"a": 1, "a": 2}'),
  (5, E' \t[ "tab\\t" ]\n'),
  (6, 'null');
SELECT count(*) FROM good,
  LATERAL (SELECT idem_http_claim('r-good-' || n), idem_http_respond('r-good-' || n, 200, b)) x;
SELECT n, h.status, h.body = b AS same_bytes, c.status, c.response = b::jsonb AS same_jsonb,
       left(c.response::text, 40) AS response
  FROM good, idem_http_claim('r-good-' || n) h, idem_claim('r-good-' || n) c ORDER BY n;

-- idem.max_response_size counts a value's own bytes: a body's octets, a
-- jsonb's binary size without PostgreSQL's 4-byte header
SET idem.max_response_size = '1kB';
SELECT token AS t FROM idem_http_claim('r-size', lease => '1 min') \gset
SELECT pg_temp.err(format('SELECT idem_http_respond(%L, 201, %L, token => %s)',
                          'r-size', '"' || repeat('x', 1023) || '"', :t));
SELECT state, body IS NULL AS no_body FROM idem.keys WHERE key = 'r-size';
SELECT idem_http_respond('r-size', 201, '"' || repeat('x', 1022) || '"', token => :t);
SELECT octet_length(body) FROM idem_http_claim('r-size');
SELECT pg_column_size(to_jsonb(repeat('x', 1016))) - 4 AS jsonb_bytes;
SELECT token AS t FROM idem_claim('r-size-2', lease => '1 min') \gset
SELECT pg_temp.err(format('SELECT idem_complete(%L, to_jsonb(repeat(%L, 1017)), token => %s)', 'r-size-2', 'x', :t));
SELECT pg_temp.err(format('SELECT idem_fail(%L, to_jsonb(repeat(%L, 1017)), true, token => %s)', 'r-size-2', 'x', :t));
SELECT pg_temp.err(format('SELECT idem_checkpoint(%L, %L, to_jsonb(repeat(%L, 1017)), token => %s)', 'r-size-2', 'p', 'x', :t));
SELECT state, checkpoint FROM idem_lookup('r-size-2');
SELECT pg_temp.err(format('SELECT idem_checkpoint(%L, %L, to_jsonb(repeat(%L, 1016)), token => %s)', 'r-size-2', 'p', 'x', :t));
SELECT pg_temp.err(format('SELECT idem_complete(%L, to_jsonb(repeat(%L, 1016)), token => %s)', 'r-size-2', 'x', :t));
SELECT octet_length(response #>> '{}') FROM idem_claim('r-size-2');
RESET idem.max_response_size;

-- a value whose text, as jsonb prints it, would not fit in memory cannot be
-- replayed (idem_http_claim prints it, a client reads idem_claim's): 1e131071
-- is 10 bytes of jsonb and 131072 of text.  Refused when written.
SELECT token AS t FROM idem_http_claim('r-print', lease => '1 min') \gset
SELECT pg_temp.err(format('SELECT idem_complete(%L, (SELECT jsonb_agg(%L::numeric) FROM generate_series(1, 9000)), token => %s)',
                          'r-print', '1e131071', :t));
SELECT pg_temp.err(format('SELECT idem_http_respond(%L, 200, %L, token => %s)',
                          'r-print', '[' || repeat('1e131071,', 9000) || '1]', :t));
SELECT state, response IS NULL AS no_response, body IS NULL AS no_body FROM idem.keys WHERE key = 'r-print';
-- large values that print in less are read through and accepted
SELECT idem_complete('r-print', (SELECT jsonb_agg(jsonb_build_array('1e131071'::numeric, repeat(E'\n', 1000), 'x'))
                                   FROM generate_series(1, 100)), token => :t);
SELECT status, http_status, octet_length(body) FROM idem_http_claim('r-print');
SELECT octet_length(response::text) FROM idem_claim('r-print');

-- a body stored before this check (1.4 to 1.6 checked it with json, and
-- idem_keys_import not at all) that jsonb cannot read still replays:
-- idem_http_claim gives its bytes, idem_claim the status and the body as a
-- JSON string
CREATE TEMP TABLE legacy (n int, b text);
INSERT INTO legacy VALUES (1, '{"a":"\u0000"}'), (2, '{"n":1e200000}'), (3, 'not json');
SELECT count(*) FROM legacy,
  LATERAL (SELECT idem_http_claim('r-legacy-' || n), idem_http_respond('r-legacy-' || n, 402, '{}')) x;
UPDATE idem.keys k SET body = l.b FROM legacy l WHERE k.key = 'r-legacy-' || l.n;
SELECT n, h.status, h.http_status, h.body = b AS same_bytes, c.status, c.response, c.attempt
  FROM legacy, idem_http_claim('r-legacy-' || n) h, idem_claim('r-legacy-' || n) c ORDER BY n;

-- a database whose encoding cannot hold a \u escape: LATIN1 has é, not €
SELECT current_database() AS regress_db \gset
CREATE DATABASE idem_replay_latin1 TEMPLATE template0 ENCODING 'LATIN1' LOCALE 'C';
\c idem_replay_latin1
SET client_min_messages = warning;
-- pgcrypto first, which the SQL edition (idem_sql) requires
CREATE EXTENSION pgcrypto;
CREATE EXTENSION idem;
RESET client_min_messages;
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    -- the SQLSTATE only: the message differs between majors
    RETURN SQLSTATE;
END $$;
SELECT token AS t FROM idem_http_claim('r-latin1', lease => '1 min') \gset
SELECT pg_temp.err(format('SELECT idem_http_respond(%L, 201, %L, token => %s)',
                          'r-latin1', '{"price":"\u20ac 5"}', :t));
SELECT state, body IS NULL AS no_body FROM idem.keys WHERE key = 'r-latin1';
SELECT idem_http_respond('r-latin1', 201, '{"price":"\u00e9 5"}', token => :t);
SELECT h.body, c.response->>'price' = U&'\00e9 5' AS same_jsonb
  FROM idem_http_claim('r-latin1') h, idem_claim('r-latin1') c;
\c :regress_db
DROP DATABASE idem_replay_latin1;

DELETE FROM idem.keys WHERE key LIKE 'r-%';
