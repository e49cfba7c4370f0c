-- The answers idem stores and replays: what idem.max_response_size counts.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem;
RESET client_min_messages;

-- Run a statement; show its SQLSTATE and message instead of failing
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

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

DELETE FROM idem.keys WHERE key LIKE 'r-%';
