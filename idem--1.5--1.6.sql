/* idem--1.5--1.6.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem UPDATE TO '1.6'" to load this file. \quit

-- 1.6 drops the indexes on expires_at.  Each cost every claim and every
-- webhook delivery a B-tree insert (66 bytes of WAL, 23 bytes a key on
-- disk) for the purge alone, which now reads the tables in physical order
-- and skips what an expiry map in shared memory knows holds nothing to
-- delete (doc/architecture.md, "The purge").  Each DROP INDEX holds its
-- table's ACCESS EXCLUSIVE lock for a moment: run the update with a
-- lock_timeout (doc/install.md, "Upgrading").

-- idem writes its tables without the executor, so this trigger fires only
-- for a statement that writes them without idem (SQL, COPY, a restore): the
-- map then forgets the table, whose rows may expire anywhere.  ALWAYS: also
-- under session_replication_role = replica.
CREATE FUNCTION idem.expiry_outside_write() RETURNS trigger
AS 'MODULE_PATHNAME', 'idem_expiry_outside_write' LANGUAGE C;
REVOKE ALL ON FUNCTION idem.expiry_outside_write() FROM PUBLIC;

CREATE TRIGGER keys_outside_write AFTER INSERT OR UPDATE ON idem.keys
    FOR EACH STATEMENT EXECUTE FUNCTION idem.expiry_outside_write();
ALTER TABLE idem.keys ENABLE ALWAYS TRIGGER keys_outside_write;
CREATE TRIGGER webhooks_outside_write AFTER INSERT OR UPDATE ON idem.webhooks
    FOR EACH STATEMENT EXECUTE FUNCTION idem.expiry_outside_write();
ALTER TABLE idem.webhooks ENABLE ALWAYS TRIGGER webhooks_outside_write;

-- What the purge has left to do, for monitoring: without the indexes a
-- count of expired rows would read the tables whole; this reads where the
-- expiry map does not know there is nothing.  Counts and times only, so
-- monitoring/idem_monitor.sql grants it to the exporter's role.
CREATE FUNCTION idem.purge_backlog(OUT "table" text, OUT expired bigint,
                                   OUT oldest timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'idem_purge_backlog' LANGUAGE C STABLE;
REVOKE ALL ON FUNCTION idem.purge_backlog() FROM PUBLIC;

DROP INDEX idem.keys_expires_at_idx;
DROP INDEX idem.webhooks_expires_at_idx;

-- Moving keys between databases (a shard move: doc/scaling.md): the live
-- keys of some scopes, and some webhook deliveries, as JSON that
-- idem_keys_import and idem_webhooks_import write into another database
-- with idem.  Every field of a row goes along, so that a retry on the new
-- database replays, a two-phase worker completes with its token, and a
-- lease runs out when it would have.  For the extension's owner: PUBLIC
-- can execute none of them.

CREATE FUNCTION idem_keys_export(scopes text[])
RETURNS SETOF jsonb
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT jsonb_build_object(
               'scope', k.scope, 'key', k.key, 'state', k.state, 'token', k.token,
               'attempt', k.attempt, 'fingerprint', encode(k.fingerprint, 'hex'),
               'lease_until', k.lease_until, 'checkpoint', k.checkpoint,
               'checkpoint_data', k.checkpoint_data, 'response', k.response,
               'created_at', k.created_at, 'completed_at', k.completed_at,
               'expires_at', k.expires_at, 'http_status', k.http_status, 'body', k.body)
    FROM idem.keys k
    WHERE k.scope = ANY (scopes) AND k.expires_at > now()
    ORDER BY k.scope, k.key
$$;

-- The elements of rows, a JSON array of objects (what, for the errors:
-- keys or deliveries), each checked to have only the fields and at least the
-- required ones; a helper of the imports below.
CREATE FUNCTION idem.import_rows(rows jsonb, what text, fields text[], required text[])
RETURNS SETOF jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    e jsonb;
    f text;
    i bigint := 0;
BEGIN
    IF jsonb_typeof(rows) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION '% must be a JSON array of what idem_%_export returns', what,
                        CASE what WHEN 'keys' THEN 'keys' ELSE 'webhooks' END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR e IN SELECT jsonb_array_elements(rows) LOOP
        i := i + 1;
        IF jsonb_typeof(e) IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'element % of % is not a JSON object', i, what
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT string_agg(x, ', ') INTO f FROM jsonb_object_keys(e) x WHERE x <> ALL (fields);
        IF f IS NOT NULL THEN
            RAISE EXCEPTION 'element % of % has unknown fields: %', i, what, f
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Import into a database with the idem version that exported them, or later.';
        END IF;
        SELECT string_agg(x, ', ') INTO f
        FROM unnest(required) x
        WHERE jsonb_typeof(e -> x) IS NULL OR jsonb_typeof(e -> x) = 'null';
        IF f IS NOT NULL THEN
            RAISE EXCEPTION 'element % of % lacks %', i, what, f
                USING ERRCODE = 'null_value_not_allowed';
        END IF;
        RETURN NEXT e;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION idem.import_rows(jsonb, text, text[], text[]) FROM PUBLIC;

CREATE FUNCTION idem_keys_import(keys jsonb)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k jsonb;
    n bigint := 0;
    top bigint := 0;
    live record;
BEGIN
    FOR k IN SELECT * FROM idem.import_rows(
                 keys, 'keys',
                 ARRAY['scope', 'key', 'state', 'token', 'attempt', 'fingerprint', 'lease_until',
                       'checkpoint', 'checkpoint_data', 'response', 'created_at', 'completed_at',
                       'expires_at', 'http_status', 'body'],
                 ARRAY['scope', 'key', 'state', 'token', 'attempt', 'created_at', 'expires_at'])
    LOOP
        IF octet_length(k ->> 'key') NOT BETWEEN 1 AND 255 OR octet_length(k ->> 'scope') > 255 THEN
            RAISE EXCEPTION 'element % of keys: a key is 1 to 255 bytes, a scope at most 255', n + 1
                USING ERRCODE = 'string_data_right_truncation';
        END IF;
        IF jsonb_typeof(k -> 'token') <> 'number' OR jsonb_typeof(k -> 'attempt') <> 'number' THEN
            RAISE EXCEPTION 'element % of keys: token and attempt are numbers', n + 1
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF (k ->> 'state') NOT IN ('processing', 'completed', 'failed', 'released') THEN
            RAISE EXCEPTION 'element % of keys has state "%"', n + 1, k ->> 'state'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- A row of the key that is still live here is another attempt's:
        -- refuse, rather than lose either.  An expired one gives way.
        SELECT r.state, r.token INTO live
        FROM idem.keys r
        WHERE r.key = k ->> 'key' AND r.scope = k ->> 'scope' AND r.expires_at > now();
        IF FOUND AND live.token IS DISTINCT FROM (k ->> 'token')::bigint THEN
            RAISE EXCEPTION 'key "%" of scope "%" is live in this database (%, token %)',
                            k ->> 'key', k ->> 'scope', live.state, live.token
                USING ERRCODE = 'unique_violation';
        END IF;
        INSERT INTO idem.keys (scope, key, state, token, attempt, fingerprint, lease_until,
                               checkpoint, checkpoint_data, response, created_at,
                               completed_at, expires_at, http_status, body)
        VALUES (k ->> 'scope', k ->> 'key', k ->> 'state', (k ->> 'token')::bigint,
                (k ->> 'attempt')::integer, decode(k ->> 'fingerprint', 'hex'),
                (k ->> 'lease_until')::timestamptz, k ->> 'checkpoint',
                nullif(k -> 'checkpoint_data', 'null'), nullif(k -> 'response', 'null'),
                (k ->> 'created_at')::timestamptz, (k ->> 'completed_at')::timestamptz,
                (k ->> 'expires_at')::timestamptz, (k ->> 'http_status')::smallint,
                k ->> 'body')
        ON CONFLICT (key, scope) DO UPDATE
            SET state = excluded.state, token = excluded.token, attempt = excluded.attempt,
                fingerprint = excluded.fingerprint, lease_until = excluded.lease_until,
                checkpoint = excluded.checkpoint, checkpoint_data = excluded.checkpoint_data,
                response = excluded.response, created_at = excluded.created_at,
                completed_at = excluded.completed_at, expires_at = excluded.expires_at,
                http_status = excluded.http_status, body = excluded.body
            -- only an expired row gives way: a live one of the same attempt
            -- may have gone on here (completed since), and stays as it is
            WHERE keys.expires_at <= now();
        n := n + 1;
        top := greatest(top, (k ->> 'token')::bigint);
    END LOOP;
    -- every claim made here from now on gets a token above the imported
    -- ones, so that a worker of an imported attempt is fenced off by a
    -- takeover here as it would have been where it was claimed.  ALTER
    -- SEQUENCE (which changes nothing here) locks out nextval until this
    -- transaction ends, so that no claim draws past top between the read
    -- and setval, which would then move the sequence back.
    ALTER SEQUENCE idem.token_seq INCREMENT BY 1;
    PERFORM setval('idem.token_seq', top)
    FROM idem.token_seq s
    WHERE top > CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END;
    RETURN n;
END
$$;

CREATE FUNCTION idem_webhooks_export(source text, event_ids text[])
RETURNS SETOF jsonb
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF source IS NULL THEN
        RAISE EXCEPTION 'source must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    RETURN QUERY
    SELECT jsonb_build_object('source', w.source, 'event_id', w.event_id,
                              'received_at', w.received_at, 'expires_at', w.expires_at)
    FROM idem.webhooks w
    WHERE w.source = idem_webhooks_export.source AND w.event_id = ANY (event_ids)
      AND w.expires_at > now()
    ORDER BY w.event_id;
END
$$;

CREATE FUNCTION idem_webhooks_import(deliveries jsonb)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    d jsonb;
    n bigint := 0;
BEGIN
    FOR d IN SELECT * FROM idem.import_rows(
                 deliveries, 'deliveries', ARRAY['source', 'event_id', 'received_at', 'expires_at'],
                 ARRAY['source', 'event_id', 'received_at', 'expires_at'])
    LOOP
        IF octet_length(d ->> 'event_id') NOT BETWEEN 1 AND 255 OR octet_length(d ->> 'source') > 255 THEN
            RAISE EXCEPTION 'element % of deliveries: an event id is 1 to 255 bytes, a source at most 255', n + 1
                USING ERRCODE = 'string_data_right_truncation';
        END IF;
        -- a delivery seen in both places is seen: keep the later expiry
        INSERT INTO idem.webhooks AS w (source, event_id, received_at, expires_at)
        VALUES (d ->> 'source', d ->> 'event_id', (d ->> 'received_at')::timestamptz,
                (d ->> 'expires_at')::timestamptz)
        ON CONFLICT (event_id, source) DO UPDATE
            SET received_at = least(w.received_at, excluded.received_at),
                expires_at = greatest(w.expires_at, excluded.expires_at);
        n := n + 1;
    END LOOP;
    RETURN n;
END
$$;

REVOKE ALL ON FUNCTION idem_keys_export(text[]), idem_keys_import(jsonb),
    idem_webhooks_export(text, text[]), idem_webhooks_import(jsonb) FROM PUBLIC;
