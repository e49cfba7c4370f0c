-- The shape of idem's tables.  idem reads and writes idem.keys and
-- idem.webhooks with heap and index calls, not through the executor, so it
-- refuses (55000, naming what is wrong) tables that are no longer as its
-- install script created them, and tables with anything it would bypass: a
-- trigger, a CHECK constraint, a foreign key from or to them, a rule, row-
-- level security.  Each case changes a table, shows that every function
-- that reads or writes it refuses and writes nothing (no row, no token),
-- undoes the change, and shows that the same calls work again.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
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

-- A trigger function that fails when it fires (idem never fired it)
CREATE FUNCTION public.shape_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'shape_trigger fired';
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

-- a trigger that calls the purge's trigger function, but before each row:
-- only idem's own statement trigger may call it
SELECT * FROM pg_temp.refused('keys', $$
    CREATE TRIGGER keys_outside_row BEFORE INSERT ON idem.keys
        FOR EACH ROW EXECUTE FUNCTION idem.expiry_outside_write()
$$);

-- a row trigger, which idem would never fire
SELECT * FROM pg_temp.refused('keys', $$
    CREATE TRIGGER keys_audit BEFORE INSERT OR UPDATE OR DELETE ON idem.keys
        FOR EACH ROW EXECUTE FUNCTION public.shape_trigger()
$$);

-- a statement trigger
SELECT * FROM pg_temp.refused('webhooks', $$
    CREATE TRIGGER webhooks_notify AFTER INSERT ON idem.webhooks
        FOR EACH STATEMENT EXECUTE FUNCTION public.shape_trigger()
$$);

-- a trigger created after a claim in the same transaction: the claim's row,
-- written at commit, is refused by COMMIT, which rolls everything back
BEGIN;
SELECT status FROM idem_claim('shape-pending', scope => 'shape');
CREATE TRIGGER keys_audit BEFORE INSERT ON idem.keys
    FOR EACH ROW EXECUTE FUNCTION public.shape_trigger();
COMMIT;
SELECT count(*) AS pending_written FROM idem.keys WHERE key = 'shape-pending';
-- idem's own: keys_outside_write (idem--1.5--1.6.sql)
SELECT tgname FROM pg_trigger WHERE tgrelid = 'idem.keys'::regclass;

-- a CHECK constraint, which idem would never check: a key it wrote could
-- break it while the constraint stayed marked valid
SELECT * FROM pg_temp.refused('keys', $$
    ALTER TABLE idem.keys ADD CONSTRAINT keys_short_key CHECK (length(key) <= 64)
$$);

-- a foreign key from idem.keys to a table of the application
SELECT * FROM pg_temp.refused('keys', $$
    CREATE TABLE public.shape_merchants (id text COLLATE "C" PRIMARY KEY);
    ALTER TABLE idem.keys ADD CONSTRAINT keys_scope_fkey FOREIGN KEY (scope)
        REFERENCES public.shape_merchants NOT VALID
$$);

-- a foreign key from a table of the application to idem.keys: the purge
-- refuses, rather than leave the order referring to a deleted key, and
-- deletes the key once the foreign key is gone
INSERT INTO idem.keys (scope, key, state, token, attempt, created_at, expires_at)
VALUES ('shape', 'shape-expired', 'completed', 0, 1, now() - interval '2 days',
        now() - interval '1 day');
SELECT * FROM pg_temp.refused('keys', $$
    CREATE TABLE public.shape_orders (
        key text COLLATE "C",
        scope text COLLATE "C",
        FOREIGN KEY (key, scope) REFERENCES idem.keys
    );
    INSERT INTO public.shape_orders VALUES ('shape-expired', 'shape')
$$);
SELECT count(*) AS expired_left FROM idem.keys WHERE key = 'shape-expired';

-- a rule, which idem would never apply
SELECT * FROM pg_temp.refused('webhooks', $$
    CREATE RULE webhooks_keep AS ON DELETE TO idem.webhooks DO INSTEAD NOTHING
$$);

-- row-level security, whose policies idem would never apply
SELECT * FROM pg_temp.refused('keys', $$
    ALTER TABLE idem.keys ENABLE ROW LEVEL SECURITY;
    CREATE POLICY keys_own_scope ON idem.keys USING (scope = current_user)
$$);

-- an index a DBA adds on a column is kept up to date, a summarizing (BRIN)
-- one included: completing a claim after its range was summarized must
-- widen the summary, or a scan through the index would miss the key (from
-- 16 on that completion is a HOT update that maintains the BRIN index alone)
CREATE INDEX keys_completed_brin ON idem.keys USING brin (completed_at);
SELECT token AS brin_token FROM idem_claim('shape-brin', scope => 'shape', lease => '1 hour') \gset
SELECT brin_summarize_new_values('idem.keys_completed_brin') >= 0 AS summarized;
SELECT clock_timestamp() AS before_complete \gset
SELECT idem_complete('shape-brin', '{}', scope => 'shape', token => :brin_token);
SET enable_seqscan = off;
SET enable_indexscan = off;
SELECT key FROM idem.keys WHERE completed_at >= :'before_complete';
RESET enable_seqscan;
RESET enable_indexscan;
DROP INDEX idem.keys_completed_brin;

-- leave the tables as they were
DROP FUNCTION public.shape_trigger();
DELETE FROM idem.keys WHERE scope = 'shape';
DELETE FROM idem.webhooks WHERE source = 'shape';
