/* idem--1.6--1.7.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION idem UPDATE TO '1.7'" to load this file. \quit

-- Imports that keep fencing.  1.6's idem_keys_import wrote every row
-- before it locked the token sequence, so claims made meanwhile drew the
-- tokens it was writing; took a row as "the same attempt" by its token
-- alone, which is unique in one database only; let one token move the
-- sequence to its end; wrote any value of the right JSON type; turned a
-- response that was the JSON value null into SQL NULL; and reset the
-- sequence's INCREMENT to 1.  1.7 locks the sequence, checks every
-- element as the functions that write a key would, moves the sequence past
-- the imported tokens and only then writes (doc/api.md, "Moving keys").

-- The largest response, checkpoint data or body, in bytes:
-- idem.max_response_size as the library reads it.  SHOW gives it with a
-- unit ('1MB'); a value from the configuration before the library is
-- loaded may be a bare number, which is in kB.
CREATE FUNCTION idem.max_response_bytes()
RETURNS bigint
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT CASE
        WHEN s IS NULL OR s = '' THEN 1048576
        WHEN s ~ '^\s*\d+\s*$' THEN s::bigint * 1024
        WHEN s ~ '^\s*\d+\s*B\s*$' THEN regexp_replace(s, '\D', '', 'g')::bigint
        ELSE pg_size_bytes(s)
    END
    FROM current_setting('idem.max_response_size', true) s
$$;
REVOKE ALL ON FUNCTION idem.max_response_bytes() FROM PUBLIC;

-- Raise again an error caught while reading element i (0: none) of an
-- import of what (keys or deliveries), with its SQLSTATE, detail and hint,
-- and the element named in its message.
CREATE FUNCTION idem.import_raise(what text, i bigint, state text, msg text,
                                  detail text, hint text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF i > 0 THEN
        msg := format('element %s of %s: %s', i, what, msg);
    END IF;
    IF coalesce(detail, '') = '' AND coalesce(hint, '') = '' THEN
        RAISE EXCEPTION USING ERRCODE = state, MESSAGE = msg;
    ELSIF coalesce(hint, '') = '' THEN
        RAISE EXCEPTION USING ERRCODE = state, MESSAGE = msg, DETAIL = detail;
    ELSIF coalesce(detail, '') = '' THEN
        RAISE EXCEPTION USING ERRCODE = state, MESSAGE = msg, HINT = hint;
    END IF;
    RAISE EXCEPTION USING ERRCODE = state, MESSAGE = msg, DETAIL = detail, HINT = hint;
END
$$;
REVOKE ALL ON FUNCTION idem.import_raise(text, bigint, text, text, text, text) FROM PUBLIC;

-- The readers of one field below run with the search_path of the import
-- that calls them (pg_catalog, pg_temp): a SET of their own would cost each
-- of the fifteen calls an element makes a save and restore of the setting,
-- half of the time of an import.

-- Field f of element e as text: NULL if absent or null, else a JSON string
-- of min_bytes to max_bytes bytes (NULL: any), refused as idem's functions
-- refuse such an argument (empty 22023, too long 22001).
CREATE FUNCTION idem.import_text(e jsonb, f text, min_bytes integer, max_bytes integer)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v jsonb := e -> f;
    t text;
BEGIN
    IF v IS NULL OR v = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(v) <> 'string' THEN
        RAISE EXCEPTION '% must be a JSON string', f USING ERRCODE = 'invalid_parameter_value';
    END IF;
    t := e ->> f;
    IF octet_length(t) < min_bytes THEN
        RAISE EXCEPTION '% must not be empty', f USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(t) > max_bytes THEN
        RAISE EXCEPTION '% is too long', f USING ERRCODE = 'string_data_right_truncation',
            DETAIL = format('It is %s bytes; the limit is %s.', octet_length(t), max_bytes);
    END IF;
    RETURN t;
END
$$;
REVOKE ALL ON FUNCTION idem.import_text(jsonb, text, integer, integer) FROM PUBLIC;

-- Field f of element e as a time: NULL if absent or null, else a JSON
-- string of a finite timestamptz.
CREATE FUNCTION idem.import_time(e jsonb, f text)
RETURNS timestamptz
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    t timestamptz := idem.import_text(e, f, 0, NULL)::timestamptz;
BEGIN
    IF NOT isfinite(t) THEN
        RAISE EXCEPTION '% must be a finite time', f USING ERRCODE = 'datetime_field_overflow';
    END IF;
    RETURN t;
END
$$;
REVOKE ALL ON FUNCTION idem.import_time(jsonb, text) FROM PUBLIC;

-- Field f of element e as a number: NULL if absent or null, else a JSON
-- number without a fraction.
CREATE FUNCTION idem.import_integer(e jsonb, f text)
RETURNS numeric
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v jsonb := e -> f;
BEGIN
    IF v IS NULL OR v = 'null' THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(v) <> 'number' OR v::numeric <> trunc(v::numeric) THEN
        RAISE EXCEPTION '% must be a JSON integer', f USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN v::numeric;
END
$$;
REVOKE ALL ON FUNCTION idem.import_integer(jsonb, text) FROM PUBLIC;

-- Refuse a jsonb value whose text is more than a replay holds (1023 MB),
-- as idem_complete, idem_fail, idem_checkpoint and idem_http_respond do: a
-- value far under idem.max_response_size can print larger than that.
CREATE FUNCTION idem.check_replay(value jsonb, what text)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_check_replay' LANGUAGE C STRICT;
REVOKE ALL ON FUNCTION idem.check_replay(jsonb, text) FROM PUBLIC;

-- Field f of element e as jsonb: NULL if absent; null is SQL NULL in an
-- element of a 1.6 export (v16), which wrote every field and null for
-- SQL NULL, and the JSON value null otherwise.  At most max_size bytes,
-- measured as idem_complete measures it (the value without its header).
CREATE FUNCTION idem.import_json(e jsonb, f text, v16 boolean, max_size bigint)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    v jsonb := e -> f;
BEGIN
    IF v IS NULL OR (v16 AND v = 'null') THEN
        RETURN NULL;
    END IF;
    IF pg_column_size(v) - 4 > max_size THEN
        RAISE EXCEPTION '% is too large', f USING ERRCODE = 'program_limit_exceeded',
            DETAIL = format('It is %s bytes; idem.max_response_size is %s bytes.',
                            pg_column_size(v) - 4, max_size);
    END IF;
    PERFORM idem.check_replay(v, f);
    RETURN v;
END
$$;
REVOKE ALL ON FUNCTION idem.import_json(jsonb, text, boolean, bigint) FROM PUBLIC;

-- One element of idem_keys_import as the row it writes, every value
-- checked as the function that writes it would check it: tokens up to
-- max_token, responses, checkpoint data and bodies up to max_size bytes.
CREATE FUNCTION idem.import_key(e jsonb, max_size bigint, max_token bigint)
RETURNS idem.keys
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r idem.keys;
    n numeric;
    -- a 1.6 export wrote all 15 fields, null for SQL NULL; 1.7 leaves a
    -- SQL NULL out, and never writes all 15 (no row has both a lease and a
    -- completion time)
    v16 boolean := (SELECT count(*) = 15 FROM jsonb_object_keys(e));
BEGIN
    r.scope := idem.import_text(e, 'scope', 0, 255);
    r.key := idem.import_text(e, 'key', 1, 255);
    r.state := idem.import_text(e, 'state', 0, NULL);
    IF r.state NOT IN ('processing', 'completed', 'failed', 'released') THEN
        RAISE EXCEPTION 'state "%" is not a state of a key', r.state
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A key is processing, completed, failed or released.';
    END IF;
    n := idem.import_integer(e, 'token');
    IF n < 1 THEN
        RAISE EXCEPTION 'token must be positive' USING ERRCODE = 'invalid_parameter_value';
    ELSIF n > max_token THEN
        RAISE EXCEPTION 'token % is out of range', n USING ERRCODE = 'numeric_value_out_of_range',
            DETAIL = format('Imported tokens are at most %s: the maximum of idem.token_seq less 2^32, room for the claims after them.', max_token);
    END IF;
    r.token := n;
    n := idem.import_integer(e, 'attempt');
    IF n NOT BETWEEN 1 AND 2147483646 THEN
        RAISE EXCEPTION 'attempt must be between 1 and 2147483646' USING ERRCODE = 'invalid_parameter_value',
            DETAIL = format('It is %s; the next attempt must fit in an integer.', n);
    END IF;
    r.attempt := n;
    r.fingerprint := decode(idem.import_text(e, 'fingerprint', 0, NULL), 'hex');
    IF octet_length(r.fingerprint) > 255 THEN
        RAISE EXCEPTION 'fingerprint is too long' USING ERRCODE = 'string_data_right_truncation',
            DETAIL = format('It is %s bytes; the limit is 255.', octet_length(r.fingerprint));
    END IF;
    r.lease_until := idem.import_time(e, 'lease_until');
    r.checkpoint := idem.import_text(e, 'checkpoint', 1, 255);
    r.checkpoint_data := idem.import_json(e, 'checkpoint_data', v16, max_size);
    r.response := idem.import_json(e, 'response', v16, max_size);
    r.created_at := idem.import_time(e, 'created_at');
    r.completed_at := idem.import_time(e, 'completed_at');
    r.expires_at := idem.import_time(e, 'expires_at');
    n := idem.import_integer(e, 'http_status');
    IF n NOT BETWEEN 200 AND 599 THEN
        RAISE EXCEPTION 'http_status must be between 200 and 599' USING ERRCODE = 'invalid_parameter_value',
            DETAIL = format('It is %s.', n);
    END IF;
    r.http_status := n;
    r.body := idem.import_text(e, 'body', 0, NULL);
    IF octet_length(r.body) > max_size THEN
        RAISE EXCEPTION 'body is too large' USING ERRCODE = 'program_limit_exceeded',
            DETAIL = format('It is %s bytes; idem.max_response_size is %s bytes.',
                            octet_length(r.body), max_size);
    END IF;
    -- a replay through idem_claim reads the body as jsonb
    PERFORM idem.check_replay(r.body::jsonb, 'body');

    -- what the state says of the other fields, as idem's functions write them
    IF r.state = 'processing' AND r.lease_until IS NULL THEN
        RAISE EXCEPTION 'a processing key needs lease_until' USING ERRCODE = 'null_value_not_allowed';
    ELSIF r.state <> 'processing' AND r.lease_until IS NOT NULL THEN
        RAISE EXCEPTION 'a % key has no lease_until', r.state USING ERRCODE = 'invalid_parameter_value';
    ELSIF r.state IN ('completed', 'failed') AND r.completed_at IS NULL THEN
        RAISE EXCEPTION 'a % key needs completed_at', r.state USING ERRCODE = 'null_value_not_allowed';
    ELSIF r.state IN ('processing', 'released') AND r.completed_at IS NOT NULL THEN
        RAISE EXCEPTION 'a % key has no completed_at', r.state USING ERRCODE = 'invalid_parameter_value';
    ELSIF r.http_status IS NOT NULL
          AND r.state <> (CASE WHEN r.http_status < 400 THEN 'completed' ELSE 'failed' END)
          AND (r.state <> 'released' OR r.http_status < 400) THEN
        RAISE EXCEPTION 'a % key has no http_status %', r.state, r.http_status
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'idem_http_respond completes a key below 400 and fails it from 400; '
                         'idem_http_respond_retryable releases it from 400.';
    ELSIF r.body IS NOT NULL AND r.http_status IS NULL THEN
        RAISE EXCEPTION 'a body needs an http_status' USING ERRCODE = 'invalid_parameter_value';
    ELSIF r.http_status IS NOT NULL AND r.response IS NOT NULL THEN
        RAISE EXCEPTION 'a key with an http_status has no response' USING ERRCODE = 'invalid_parameter_value',
            HINT = 'idem_http_respond stores the body as sent instead.';
    ELSIF r.created_at > r.expires_at OR r.lease_until > r.expires_at THEN
        RAISE EXCEPTION 'expires_at must not be before created_at or lease_until'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN r;
END
$$;
REVOKE ALL ON FUNCTION idem.import_key(jsonb, bigint, bigint) FROM PUBLIC;

-- 1.7 leaves out the fields that are SQL NULL, so that a response or
-- checkpoint data that is the JSON value null goes as null.
CREATE OR REPLACE FUNCTION idem_keys_export(scopes text[])
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
           - array_remove(ARRAY[
                 CASE WHEN k.fingerprint IS NULL THEN 'fingerprint' END,
                 CASE WHEN k.lease_until IS NULL THEN 'lease_until' END,
                 CASE WHEN k.checkpoint IS NULL THEN 'checkpoint' END,
                 CASE WHEN k.checkpoint_data IS NULL THEN 'checkpoint_data' END,
                 CASE WHEN k.response IS NULL THEN 'response' END,
                 CASE WHEN k.completed_at IS NULL THEN 'completed_at' END,
                 CASE WHEN k.http_status IS NULL THEN 'http_status' END,
                 CASE WHEN k.body IS NULL THEN 'body' END], NULL)
    FROM idem.keys k
    WHERE k.scope = ANY (scopes) AND k.expires_at > now()
    ORDER BY k.scope, k.key
$$;

CREATE OR REPLACE FUNCTION idem_keys_import(keys jsonb)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    e jsonb;
    i bigint := 0;
    rows idem.keys[] := '{}';
    max_size bigint := idem.max_response_bytes();
    max_token bigint;
    top bigint;
    clash record;
    st text;
    msg text;
    det text;
    hnt text;
BEGIN
    -- 1. the token sequence locked, first: ALTER SEQUENCE, restating the
    -- sequence's own increment, keeps nextval out until this transaction
    -- ends, so a claim here from now on waits for the import to commit and
    -- then draws a token past every imported one (taken after the checks,
    -- a lock would let the claims made during them draw imported tokens).
    -- It also gives the sequence a new file, which makes every session drop
    -- the tokens it had cached (CACHE), and takes the setval below back if
    -- the import fails: nothing is written then.
    EXECUTE format('ALTER SEQUENCE idem.token_seq INCREMENT BY %s',
                   (SELECT s.seqincrement FROM pg_sequence s
                    WHERE s.seqrelid = 'idem.token_seq'::regclass));
    SELECT s.seqmax - 4294967296 INTO max_token
    FROM pg_sequence s WHERE s.seqrelid = 'idem.token_seq'::regclass;

    -- 2. every element checked (an empty import has nothing to check or write)
    BEGIN
        FOR e IN SELECT * FROM idem.import_rows(
                     keys, 'keys',
                     ARRAY['scope', 'key', 'state', 'token', 'attempt', 'fingerprint', 'lease_until',
                           'checkpoint', 'checkpoint_data', 'response', 'created_at', 'completed_at',
                           'expires_at', 'http_status', 'body'],
                     ARRAY['scope', 'key', 'state', 'token', 'attempt', 'created_at', 'expires_at'])
        LOOP
            i := i + 1;
            rows := rows || idem.import_key(e, max_size, max_token);
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        PERFORM idem.import_raise('keys', i, st, msg, det, hnt);
    END;
    IF cardinality(rows) = 0 THEN
        RETURN 0;
    END IF;
    SELECT r.scope, r.key INTO clash
    FROM unnest(rows) r GROUP BY r.scope, r.key HAVING count(*) > 1 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'key "%" of scope "%" is in the import twice', clash.key, clash.scope
            USING ERRCODE = 'unique_violation';
    END IF;
    SELECT max(r.token) INTO top FROM unnest(rows) r;

    -- 3. a live row of an imported key must be the same attempt, from the
    -- same export: tokens are unique in one database only.  No claim here
    -- can take a new token now, so no attempt begins before the rows are
    -- written.
    SELECT r.scope, r.key, l.state, l.attempt, l.token INTO clash
    FROM unnest(rows) r
    JOIN idem.keys l ON l.key = r.key AND l.scope = r.scope
    WHERE l.expires_at > now()
      AND (l.attempt, l.token, l.created_at, l.fingerprint)
          IS DISTINCT FROM (r.attempt, r.token, r.created_at, r.fingerprint)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'key "%" of scope "%" is live in this database as another attempt', clash.key, clash.scope
            USING ERRCODE = 'unique_violation',
                  DETAIL = format('It is %s at attempt %s with token %s; an imported row is the same attempt only with the same attempt, token, created_at and fingerprint.',
                                  clash.state, clash.attempt, clash.token);
    END IF;

    -- 4. the sequence past every imported token, never back
    PERFORM setval('idem.token_seq', top)
    FROM idem.token_seq s
    WHERE top > CASE WHEN s.is_called THEN s.last_value ELSE s.last_value - 1 END;

    -- 5. the rows: an expired row of the key gives way; a live one of the
    -- same attempt may have gone on here (completed since), and stays
    INSERT INTO idem.keys AS k (scope, key, state, token, attempt, fingerprint, lease_until,
                                checkpoint, checkpoint_data, response, created_at,
                                completed_at, expires_at, http_status, body)
    SELECT r.scope, r.key, r.state, r.token, r.attempt, r.fingerprint, r.lease_until,
           r.checkpoint, r.checkpoint_data, r.response, r.created_at,
           r.completed_at, r.expires_at, r.http_status, r.body
    FROM unnest(rows) r
    ON CONFLICT (key, scope) DO UPDATE
        SET state = excluded.state, token = excluded.token, attempt = excluded.attempt,
            fingerprint = excluded.fingerprint, lease_until = excluded.lease_until,
            checkpoint = excluded.checkpoint, checkpoint_data = excluded.checkpoint_data,
            response = excluded.response, created_at = excluded.created_at,
            completed_at = excluded.completed_at, expires_at = excluded.expires_at,
            http_status = excluded.http_status, body = excluded.body
        WHERE k.expires_at <= now();
    RETURN cardinality(rows);
END
$$;

CREATE OR REPLACE FUNCTION idem_webhooks_import(deliveries jsonb)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    e jsonb;
    i bigint := 0;
    rows idem.webhooks[] := '{}';
    r idem.webhooks;
    clash record;
    st text;
    msg text;
    det text;
    hnt text;
BEGIN
    BEGIN
        FOR e IN SELECT * FROM idem.import_rows(
                     deliveries, 'deliveries', ARRAY['source', 'event_id', 'received_at', 'expires_at'],
                     ARRAY['source', 'event_id', 'received_at', 'expires_at'])
        LOOP
            i := i + 1;
            r.source := idem.import_text(e, 'source', 0, 255);
            r.event_id := idem.import_text(e, 'event_id', 1, 255);
            r.received_at := idem.import_time(e, 'received_at');
            r.expires_at := idem.import_time(e, 'expires_at');
            IF r.received_at > r.expires_at THEN
                RAISE EXCEPTION 'expires_at must not be before received_at'
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            rows := rows || r;
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        PERFORM idem.import_raise('deliveries', i, st, msg, det, hnt);
    END;
    SELECT d.source, d.event_id INTO clash
    FROM unnest(rows) d GROUP BY d.source, d.event_id HAVING count(*) > 1 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'event "%" of source "%" is in the import twice', clash.event_id, clash.source
            USING ERRCODE = 'unique_violation';
    END IF;
    -- a delivery seen in both places is seen: keep the later expiry
    INSERT INTO idem.webhooks AS w (source, event_id, received_at, expires_at)
    SELECT d.source, d.event_id, d.received_at, d.expires_at FROM unnest(rows) d
    ON CONFLICT (event_id, source) DO UPDATE
        SET received_at = least(w.received_at, excluded.received_at),
            expires_at = greatest(w.expires_at, excluded.expires_at);
    RETURN cardinality(rows);
END
$$;

-- A transient failure of an HTTP request (a gateway down, say): answered
-- now, then released as idem_fail(retryable => true) releases an attempt,
-- so that the next request with the key runs again.  idem_http_respond
-- still makes every answer from 400 final.
CREATE FUNCTION idem_http_respond_retryable(key text, http_status integer, body text,
                                            scope text DEFAULT '', token bigint DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_http_respond_retryable' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION idem_http_respond_retryable(text, integer, text, text, bigint) FROM PUBLIC;

-- Webhooks in the order they happened (issue 38): idem_webhook_order and
-- idem_webhook_receive_ordered, the watermark table idem.webhook_order,
-- and their helpers.  The functions below the C ones are PL/pgSQL, the
-- same text as the SQL edition's (idem_sql/src/55_webhook_order.sql).

-- idem_webhook_receive's checks without its record (src/webhook/receive.c)
CREATE FUNCTION idem.webhook_check(source text, payload text, headers jsonb, client_ip inet,
                                   OUT status text, OUT event_id text, OUT reason text,
                                   OUT scheme text, OUT ttl interval)
RETURNS record
AS 'MODULE_PATHNAME', 'idem_webhook_check' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION idem.webhook_check(text, text, jsonb, inet) FROM PUBLIC;

-- idem_webhook's record, for the functions below, whose search_path does
-- not name the extension's schema
CREATE FUNCTION idem.webhook_record(source text, event_id text, ttl interval)
RETURNS boolean
AS 'MODULE_PATHNAME', 'idem_webhook' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION idem.webhook_record(text, text, interval) FROM PUBLIC;

-- The lock of one gateway object of a source, which serializes
-- idem_webhook_order's deliveries for it (src/webhook/order_lock.c): in idem's
-- own lock space, which pg_advisory_lock cannot take
CREATE FUNCTION idem.webhook_order_lock(source_name text, object_key text)
RETURNS void
AS 'MODULE_PATHNAME', 'idem_webhook_order_lock' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION idem.webhook_order_lock(text, text) FROM PUBLIC;

-- idem.webhook_ttl as whole seconds (as the library reads it; 168 hours
-- when unset)
CREATE FUNCTION idem.webhook_ttl_default()
RETURNS interval
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce(make_interval(secs => extract(epoch FROM
               nullif(current_setting('idem.webhook_ttl', true), '')::interval)),
           interval '168 hours')
$$;
REVOKE ALL ON FUNCTION idem.webhook_ttl_default() FROM PUBLIC;

-- The newest event idem_webhook_order applied to each gateway object of a
-- source (doc/webhooks.md, "Webhooks in order"): its time and id, when it
-- was applied, and until when this is kept (the source's ttl, as its
-- deliveries are).  A delivery older than event_time is stale.
CREATE TABLE idem.webhook_order (
    source      text        COLLATE "C" NOT NULL,
    object_id   text        COLLATE "C" NOT NULL,
    event_time  timestamptz NOT NULL,
    event_id    text        COLLATE "C",
    applied_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    CONSTRAINT webhook_order_pkey PRIMARY KEY (object_id, source)
);
CREATE INDEX webhook_order_expires_at_idx ON idem.webhook_order (expires_at);
REVOKE ALL ON idem.webhook_order FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('idem.webhook_order', '');

-- A payload as jsonb, or NULL if it is not JSON the server reads (a
-- verified body is the gateway's, but a reader never raises)
CREATE FUNCTION idem.webhook_json(payload text)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN payload::jsonb;
EXCEPTION WHEN data_exception OR program_limit_exceeded THEN
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION idem.webhook_json(text) FROM PUBLIC;

-- The gateway object a delivery of scheme_name is about, and the time of its
-- event, as the gateway writes them in the body (NULL where the scheme
-- carries none, or the body lacks it; never an error).  A time written as
-- text must carry its offset.
CREATE FUNCTION idem.webhook_object(scheme_name text, body jsonb,
                                    OUT object_id text, OUT event_time timestamptz)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    id jsonb;
    t jsonb;
    n numeric;
BEGIN
    CASE scheme_name
    WHEN 'stripe' THEN
        id := body #> '{data,object,id}';
        t := body -> 'created';
    WHEN 'checkout' THEN
        id := body #> '{data,id}';
        t := body -> 'created_on';
    WHEN 'paddle' THEN
        id := body #> '{data,id}';
        t := body -> 'occurred_at';
    WHEN 'square' THEN
        id := body #> '{data,id}';
        t := body -> 'created_at';
    WHEN 'adyen' THEN
        -- one item, bare or wrapped; a modification's payment is its originalReference
        body := coalesce(body -> 'NotificationRequestItem', body);
        id := coalesce(nullif(body -> 'originalReference', '""'), body -> 'pspReference');
        t := body -> 'eventDate';
    WHEN 'airwallex' THEN
        id := body #> '{data,object,id}';
        t := body -> 'created_at';
    WHEN 'razorpay' THEN
        id := body -> 'payload' -> (body #>> '{contains,0}') -> 'entity' -> 'id';
        t := body -> 'created_at';
    ELSE
        RETURN;
    END CASE;
    IF jsonb_typeof(id) = 'string' THEN
        object_id := id #>> '{}';
    END IF;
    IF jsonb_typeof(t) = 'number' THEN
        n := t::numeric;
        IF n = trunc(n) AND n BETWEEN 0 AND 253402300799 THEN
            event_time := to_timestamp(n::double precision);
        END IF;
    ELSIF jsonb_typeof(t) = 'string'
          AND t #>> '{}' ~ '^\d{4}-\d\d-\d\d[Tt ]\d\d:\d\d:\d\d(\.\d{1,9})?([Zz]|[+-]\d\d:?\d\d)$' THEN
        BEGIN
            event_time := (t #>> '{}')::timestamptz;
        EXCEPTION WHEN data_exception THEN
            event_time := NULL;
        END;
    END IF;
END
$$;
REVOKE ALL ON FUNCTION idem.webhook_object(text, jsonb) FROM PUBLIC;

-- Apply an event of source at p_time (id p_event, NULL: none) to object
-- p_object, unless it is older than what was applied: 'new' (the event
-- id recorded as idem_webhook records it, the object's newest time moved
-- to p_time, both kept for keep), 'duplicate' (the event id is recorded;
-- without one, the object's newest time is p_time) or 'stale' (older than
-- the object's newest time).  A duplicate or a stale one writes nothing.
-- Deliveries for one object serialize on its lock
-- (idem.webhook_order_lock), taken before anything is read and held to the
-- end of the transaction (or of a subtransaction that rolls back, with
-- its writes), so the second waits for the first to commit or roll back
-- and then reads what it left.  The newest event's record is kept as long
-- as the longest ttl it was applied with.
CREATE FUNCTION idem.webhook_order_apply(p_source text, p_object text,
                                                    p_time timestamptz, p_event text,
                                                    keep interval)
RETURNS text
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    w idem.webhook_order;
    at timestamptz;
BEGIN
    PERFORM idem.webhook_order_lock(p_source, p_object);
    at := clock_timestamp();
    IF p_event IS NOT NULL AND EXISTS (
           SELECT FROM idem.webhooks h
            WHERE h.event_id = p_event AND h.source = p_source AND h.expires_at > at) THEN
        RETURN 'duplicate';
    END IF;
    SELECT * INTO w FROM idem.webhook_order o
     WHERE o.object_id = p_object AND o.source = p_source AND o.expires_at > at;
    IF FOUND AND p_time < w.event_time THEN
        RETURN 'stale';
    END IF;
    IF FOUND AND p_event IS NULL AND p_time = w.event_time THEN
        RETURN 'duplicate';
    END IF;
    -- false if idem_webhook recorded the id meanwhile, outside the order
    IF p_event IS NOT NULL AND NOT idem.webhook_record(p_source, p_event, keep) THEN
        RETURN 'duplicate';
    END IF;
    INSERT INTO idem.webhook_order AS o (source, object_id, event_time, event_id, applied_at, expires_at)
    VALUES (p_source, p_object, p_time, p_event, at, at + keep)
    ON CONFLICT ON CONSTRAINT webhook_order_pkey DO UPDATE
        SET event_time = excluded.event_time, event_id = excluded.event_id,
            applied_at = excluded.applied_at,
            expires_at = CASE WHEN o.expires_at > excluded.applied_at
                              THEN greatest(o.expires_at, excluded.expires_at)
                              ELSE excluded.expires_at END;
    RETURN 'new';
END
$$;
REVOKE ALL ON FUNCTION idem.webhook_order_apply(text, text, timestamptz, text, interval) FROM PUBLIC;

-- Raise the error for a gateway object id (what names it) that is NULL,
-- empty or over 255 bytes, or for a time (when) that is NULL or infinite
CREATE FUNCTION idem.webhook_order_check(object_id text, what text,
                                                    event_time timestamptz, when_ text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF object_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = what || ' must not be null';
    ELSIF object_id = '' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = what || ' must not be empty';
    ELSIF octet_length(object_id) > 255 THEN
        RAISE EXCEPTION USING ERRCODE = 'string_data_right_truncation', MESSAGE = what || ' is too long',
            DETAIL = format('It is %s bytes; the limit is 255.', octet_length(object_id));
    ELSIF event_time IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = when_ || ' must not be null';
    ELSIF NOT isfinite(event_time) THEN
        RAISE EXCEPTION USING ERRCODE = 'datetime_field_overflow', MESSAGE = when_ || ' must be a finite time';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION idem.webhook_order_check(text, text, timestamptz, text) FROM PUBLIC;

-- idem_webhook_order(source, object_id, event_time, event_id, ttl): in the
-- handler's transaction, before it applies an event of source to gateway
-- object object_id: 'new' (apply it), 'duplicate' or 'stale' (apply
-- nothing; answer 2xx all the same).  idem.webhook_order_apply says how.
-- Every argument is checked before anything is locked or written.
CREATE FUNCTION idem_webhook_order(source text, object_id text, event_time timestamptz,
                                              event_id text DEFAULT NULL, ttl interval DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    now_ timestamptz := clock_timestamp();
BEGIN
    IF source IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'source must not be null';
    ELSIF octet_length(source) > 255 THEN
        RAISE EXCEPTION USING ERRCODE = 'string_data_right_truncation', MESSAGE = 'source is too long',
            DETAIL = format('It is %s bytes; the limit is 255.', octet_length(source));
    END IF;
    PERFORM idem.webhook_order_check(object_id, 'object_id', event_time, 'event_time');
    IF event_id IS NOT NULL THEN
        PERFORM idem.webhook_order_check(event_id, 'event_id', event_time, 'event_time');
    END IF;
    -- as idem_webhook reads a ttl: the calendar part first, from now
    IF now_ + ttl <= now_ THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'ttl must be positive';
    END IF;
    IF current_setting('transaction_read_only') = 'on' THEN
        RAISE EXCEPTION USING ERRCODE = 'read_only_sql_transaction',
            MESSAGE = 'cannot execute idem_webhook_order() in a read-only transaction';
    END IF;
    RETURN idem.webhook_order_apply(source, object_id, event_time, event_id,
                                    coalesce(ttl, idem.webhook_ttl_default()));
END
$$;
REVOKE ALL ON FUNCTION idem_webhook_order(text, text, timestamptz, text, interval) FROM PUBLIC;

-- idem_webhook_receive_ordered(source, payload, headers, client_ip, object,
-- object_time): idem_webhook_receive's checks (source, address, signature,
-- event id), then idem_webhook_order's, with the object and the time read
-- from the body by the source's scheme (idem.webhook_object), or given.
-- status new, duplicate, stale or rejected (reason as idem_webhook_receive
-- answers it; malformed also when no object or time is found).
CREATE FUNCTION idem_webhook_receive_ordered(source text, payload text, headers jsonb,
                                                        client_ip inet DEFAULT NULL,
                                                        object text DEFAULT NULL,
                                                        object_time timestamptz DEFAULT NULL,
                                                        OUT status text, OUT event_id text,
                                                        OUT reason text, OUT object_id text,
                                                        OUT event_time timestamptz)
RETURNS record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c record;
    o record;
BEGIN
    IF object IS NOT NULL OR object_time IS NOT NULL THEN
        PERFORM idem.webhook_order_check(coalesce(object, 'x'), 'object',
                                         coalesce(object_time, 'epoch'), 'object_time');
    END IF;
    SELECT * INTO c FROM idem.webhook_check(source, payload, headers, client_ip);
    IF c.status = 'rejected' THEN
        status := 'rejected';
        reason := c.reason;
        RETURN;
    END IF;
    object_id := object;
    event_time := object_time;
    IF object_id IS NULL OR event_time IS NULL THEN
        SELECT * INTO o FROM idem.webhook_object(c.scheme, idem.webhook_json(payload));
        object_id := coalesce(object_id, o.object_id);
        event_time := coalesce(event_time, o.event_time);
    END IF;
    IF object_id IS NULL OR object_id = '' OR octet_length(object_id) > 255
       OR event_time IS NULL OR NOT isfinite(event_time) THEN
        reason := 'malformed';
    ELSIF object_time IS NULL AND event_time > clock_timestamp() + interval '1 hour' THEN
        -- a time read from the delivery an hour or more ahead of the clock
        -- (a clock off, or an unsigned time changed) would hold back every
        -- later event of the object: refused as a timestamp out of tolerance
        reason := 'timestamp';
    END IF;
    IF reason IS NOT NULL THEN
        status := 'rejected';
        object_id := NULL;
        event_time := NULL;
        RETURN;
    END IF;
    event_id := c.event_id;
    status := idem.webhook_order_apply(source, object_id, event_time, event_id, c.ttl);
END
$$;
REVOKE ALL ON FUNCTION idem_webhook_receive_ordered(text, text, jsonb, inet, text, timestamptz) FROM PUBLIC;
