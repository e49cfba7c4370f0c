-- Expiry and counters: idem_purge, idem.purge_backlog, and idem_stats with
-- idem_stats_reset.  The purge reads the expired rows through the tables'
-- indexes on expires_at and locks each with SKIP LOCKED, so that it never
-- waits for a claim and never deletes a row that a live transaction holds
-- (the C edition skips such a row through its key lock).  Schedule it with
-- pg_cron: SELECT cron.schedule('idem-purge', '* * * * *', 'SELECT idem_purge()').
-- The counters of idem_stats live in the C edition's shared memory: here
-- the view and idem_stats_reset exist, and raise what the C edition raises
-- without shared_preload_libraries, naming the C edition.

-- The batch size of idem.purge_batch_size (a placeholder setting here),
-- 10000 when unset; 22023 for what the C edition's setting would refuse.
CREATE OR REPLACE FUNCTION idem.purge_batch_size() RETURNS bigint
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    s text := pg_catalog.btrim(pg_catalog.current_setting('idem.purge_batch_size', true));
BEGIN
    IF s IS NULL OR s = '' THEN
        RETURN 10000;
    END IF;
    IF s !~ '^[+-]?[0-9]{1,10}$' OR s::bigint NOT BETWEEN 1 AND 2147483647 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = pg_catalog.format('invalid value for parameter "idem.purge_batch_size": "%s"', s),
            HINT = 'Valid values are between "1" and "2147483647".';
    END IF;
    RETURN s::bigint;
END
$$;
REVOKE ALL ON FUNCTION idem.purge_batch_size() FROM PUBLIC;

-- idem_purge(batch_size): delete expired keys, then webhook records, then
-- the objects' newest events (55_webhook_order.sql), at
-- most batch_size in all, skipping rows that a live transaction holds and
-- processing keys whose lease is live; returns how many.
CREATE OR REPLACE FUNCTION idem_purge(batch_size integer DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    lim bigint;
    at timestamptz := pg_catalog.clock_timestamp();
    n bigint;
    total bigint;
BEGIN
    IF batch_size IS NULL THEN
        lim := idem.purge_batch_size();
    ELSIF batch_size <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'batch_size must be positive';
    ELSE
        lim := batch_size;
    END IF;
    IF pg_catalog.current_setting('transaction_read_only') = 'on' THEN
        RAISE EXCEPTION USING ERRCODE = 'read_only_sql_transaction',
            MESSAGE = 'cannot execute idem_purge() in a read-only transaction';
    END IF;
    -- a key becomes purgeable at its expiry, or at its lease's end if later
    WITH gone AS (
        DELETE FROM idem.keys
         WHERE ctid = ANY (ARRAY(
               SELECT k.ctid FROM idem.keys k
                WHERE k.expires_at <= at
                  AND (k.lease_until IS NULL OR k.lease_until <= at)
                ORDER BY k.expires_at
                LIMIT lim
                  FOR UPDATE SKIP LOCKED))
        RETURNING 1)
    SELECT pg_catalog.count(*) INTO total FROM gone;
    IF total < lim THEN
        WITH gone AS (
            DELETE FROM idem.webhooks
             WHERE ctid = ANY (ARRAY(
                   SELECT w.ctid FROM idem.webhooks w
                    WHERE w.expires_at <= at
                    ORDER BY w.expires_at
                    LIMIT lim - total
                      FOR UPDATE SKIP LOCKED))
            RETURNING 1)
        SELECT pg_catalog.count(*) INTO n FROM gone;
        total := total + n;
    END IF;
    IF total < lim THEN
        WITH gone AS (
            DELETE FROM idem.webhook_order
             WHERE ctid = ANY (ARRAY(
                   SELECT o.ctid FROM idem.webhook_order o
                    WHERE o.expires_at <= at
                    ORDER BY o.expires_at
                    LIMIT lim - total
                      FOR UPDATE SKIP LOCKED))
            RETURNING 1)
        SELECT pg_catalog.count(*) INTO n FROM gone;
        total := total + n;
    END IF;
    RETURN total;
END
$$;
REVOKE ALL ON FUNCTION idem_purge(integer) FROM PUBLIC;

-- idem.purge_backlog(): for keys and webhooks, how many rows a purge could
-- delete now and the earliest expiry among them (NULL: none)
CREATE OR REPLACE FUNCTION idem.purge_backlog(OUT "table" text, OUT expired bigint,
                                              OUT oldest timestamptz)
RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT 'keys'::text, pg_catalog.count(*), pg_catalog.min(k.expires_at)
      FROM idem.keys k
     WHERE k.expires_at <= pg_catalog.transaction_timestamp()
       AND (k.lease_until IS NULL OR k.lease_until <= pg_catalog.transaction_timestamp())
    UNION ALL
    SELECT 'webhooks'::text, pg_catalog.count(*), pg_catalog.min(w.expires_at)
      FROM idem.webhooks w
     WHERE w.expires_at <= pg_catalog.transaction_timestamp()
$$;
REVOKE ALL ON FUNCTION idem.purge_backlog() FROM PUBLIC;

-- The counters' functions raise the C edition's 55000 of a server without
-- preload, each its own (no nested call, so no second context line; the
-- 1.0 columns, which no 1.7 object reads, excepted).
-- They are SECURITY DEFINER, as the C edition's need no rights on schema
-- idem.

-- idem.stats_1_3(): the counters as idem_stats shows them; raises 55000 here
CREATE OR REPLACE FUNCTION idem.stats_1_3(OUT dbid oid, OUT claimed bigint, OUT completed bigint,
                                          OUT failed bigint, OUT replayed bigint,
                                          OUT in_progress bigint, OUT mismatched bigint,
                                          OUT webhooks_new bigint, OUT webhooks_duplicate bigint,
                                          OUT purged bigint, OUT last_purge_at timestamptz,
                                          OUT taken_over bigint, OUT stale_tokens bigint,
                                          OUT webhooks_rejected bigint)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
        MESSAGE = 'idem counters are not available',
        DETAIL = 'The counters need shared memory, which only a library loaded at server start can have: the SQL edition (idem_sql) has none.',
        HINT = 'Use the C edition of idem (the extension idem) with idem in shared_preload_libraries.';
END
$$;
REVOKE ALL ON FUNCTION idem.stats_1_3() FROM PUBLIC;

-- idem.stats_1_0(): the 1.0 columns of the counters; raises 55000 here
CREATE OR REPLACE FUNCTION idem.stats_1_0(OUT dbid oid, OUT claimed bigint, OUT completed bigint,
                                          OUT failed bigint, OUT replayed bigint,
                                          OUT in_progress bigint, OUT mismatched bigint,
                                          OUT webhooks_new bigint, OUT webhooks_duplicate bigint,
                                          OUT purged bigint, OUT last_purge_at timestamptz)
RETURNS SETOF record
LANGUAGE sql VOLATILE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT s.dbid, s.claimed, s.completed, s.failed, s.replayed, s.in_progress, s.mismatched,
           s.webhooks_new, s.webhooks_duplicate, s.purged, s.last_purge_at
      FROM idem.stats_1_3() s
$$;
REVOKE ALL ON FUNCTION idem.stats_1_0() FROM PUBLIC;

-- idem_stats: the C edition's view, on the function that raises here
CREATE OR REPLACE VIEW idem_stats AS
    SELECT d.datname, s.claimed, s.completed, s.failed, s.replayed, s.in_progress,
           s.mismatched, s.webhooks_new, s.webhooks_duplicate, s.purged,
           s.last_purge_at, s.taken_over, s.stale_tokens, s.webhooks_rejected
    FROM idem.stats_1_3() s
    LEFT JOIN pg_catalog.pg_database d ON d.oid = s.dbid;
REVOKE ALL ON idem_stats FROM PUBLIC;

-- idem_stats_reset(): zeroes the C edition's counters; raises 55000 here
CREATE OR REPLACE FUNCTION idem_stats_reset() RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL SAFE SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
        MESSAGE = 'idem counters are not available',
        DETAIL = 'The counters need shared memory, which only a library loaded at server start can have: the SQL edition (idem_sql) has none.',
        HINT = 'Use the C edition of idem (the extension idem) with idem in shared_preload_libraries.';
END
$$;
REVOKE ALL ON FUNCTION idem_stats_reset() FROM PUBLIC;
