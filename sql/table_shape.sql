-- The shape of idem's tables.  idem reads and writes idem.keys and
-- idem.webhooks with heap and index calls, not through the executor, so it
-- refuses (55000, naming what is wrong) tables that are no longer as its
-- install script created them.  Each case changes a table, shows that
-- every function that reads or writes it refuses and writes nothing (no
-- row, no token), undoes the change, and shows that the same calls work
-- again.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS idem;
RESET client_min_messages;

-- Run a statement; show its SQLSTATE, message and detail instead of failing
CREATE FUNCTION pg_temp.err(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || SQLERRM || E'\n' || detail;
END $$;

-- Every function that opens table t (keys or webhooks), each with a key of
-- its own, and what it answered
CREATE SEQUENCE pg_temp.n;
CREATE FUNCTION pg_temp.calls(t text) RETURNS TABLE (call text, result text)
LANGUAGE plpgsql AS $$
DECLARE
    k text := 'shape-' || nextval('pg_temp.n');
BEGIN
    IF t = 'keys' THEN
        RETURN QUERY SELECT 'idem_claim', pg_temp.err(format($q$SELECT idem_claim(%L, scope => 'shape')$q$, k));
        RETURN QUERY SELECT 'idem_complete', pg_temp.err(format($q$SELECT idem_claim(%L, scope => 'shape'), idem_complete(%L, scope => 'shape')$q$, k || 'c', k || 'c'));
        RETURN QUERY SELECT 'idem_lookup', pg_temp.err(format($q$SELECT idem_lookup(%L, scope => 'shape')$q$, k));
    ELSE
        RETURN QUERY SELECT 'idem_webhook', pg_temp.err(format($q$SELECT idem_webhook('shape', %L)$q$, k));
    END IF;
    RETURN QUERY SELECT 'idem_purge', pg_temp.err('SELECT idem_purge()');
END $$;

-- What idem's tables hold and the token sequence's position: equal before
-- and after the refused calls when they wrote nothing
CREATE FUNCTION pg_temp.written() RETURNS text LANGUAGE sql AS $$
    SELECT format('keys %s, webhooks %s, token %s',
                  (SELECT count(*) FROM idem.keys),
                  (SELECT count(*) FROM idem.webhooks),
                  (SELECT last_value FROM idem.token_seq))
$$;

-- Change table t (keys or webhooks), make the calls on it, check that
-- they wrote nothing, undo the change (the block's subtransaction rolls
-- back), and make the calls again
CREATE FUNCTION pg_temp.refused(t text, change text) RETURNS TABLE (call text, result text)
LANGUAGE plpgsql AS $$
DECLARE
    before text;
    calls text[] := '{}';
    results text[] := '{}';
    c record;
BEGIN
    BEGIN
        EXECUTE change;
        before := pg_temp.written();
        FOR c IN SELECT * FROM pg_temp.calls(t) LOOP
            calls := calls || c.call;
            results := results || c.result;
        END LOOP;
        calls := calls || 'nothing written'::text;
        results := results || (pg_temp.written() = before)::text;
        RAISE EXCEPTION USING ERRCODE = 'IDZZZ', MESSAGE = 'undo the change';
    EXCEPTION WHEN SQLSTATE 'IDZZZ' THEN
        NULL;
    END;
    FOR c IN SELECT * FROM pg_temp.calls(t) LOOP
        calls := calls || ('undone: ' || c.call);
        results := results || c.result;
    END LOOP;
    RETURN QUERY SELECT calls[i], results[i] FROM generate_subscripts(calls, 1) i;
END $$;

-- the calls work on the tables as created
SELECT * FROM pg_temp.calls('keys');
SELECT * FROM pg_temp.calls('webhooks');

-- a column of another type (this crashed the server before idem compared
-- the types)
SELECT * FROM pg_temp.refused('keys', 'ALTER TABLE idem.keys ALTER COLUMN token TYPE text');
SELECT * FROM pg_temp.refused('webhooks', 'ALTER TABLE idem.webhooks ALTER COLUMN received_at TYPE text');

-- a key column that no longer compares as bytes
SELECT * FROM pg_temp.refused('webhooks', $$
    ALTER TABLE idem.webhooks ALTER COLUMN event_id TYPE text COLLATE "default"
$$);

-- a column that allows NULL
SELECT * FROM pg_temp.refused('keys', 'ALTER TABLE idem.keys ALTER COLUMN created_at DROP NOT NULL');

-- a column dropped and added again (at the end, with the same name)
SELECT * FROM pg_temp.refused('keys', $$
    ALTER TABLE idem.keys DROP COLUMN fingerprint;
    ALTER TABLE idem.keys ADD COLUMN fingerprint bytea
$$);

-- a column added, a column renamed
SELECT * FROM pg_temp.refused('webhooks', 'ALTER TABLE idem.webhooks ADD COLUMN note text');
SELECT * FROM pg_temp.refused('keys', 'ALTER TABLE idem.keys RENAME COLUMN state TO status');

-- the primary key on its columns in the other order
SELECT * FROM pg_temp.refused('webhooks', $$
    ALTER TABLE idem.webhooks DROP CONSTRAINT webhooks_pkey;
    ALTER TABLE idem.webhooks ADD CONSTRAINT webhooks_pkey PRIMARY KEY (source, event_id)
$$);

-- the purge's index on another column
SELECT * FROM pg_temp.refused('keys', $$
    DROP INDEX idem.keys_expires_at_idx;
    CREATE INDEX keys_expires_at_idx ON idem.keys (created_at)
$$);

-- leave the tables as they were
DELETE FROM idem.keys WHERE scope = 'shape';
DELETE FROM idem.webhooks WHERE source = 'shape';
