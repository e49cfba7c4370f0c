-- Webhooks in the order they happened: idem_webhook_order and
-- idem_webhook_receive_ordered, the watermark table idem.webhook_order,
-- and their helpers.  From idem.webhook_json on, the same text as the C
-- edition's (idem--1.6--1.7.sql); the three helpers first are this
-- edition's own.

-- idem_webhook's record, for the functions below
CREATE OR REPLACE FUNCTION idem.webhook_record(source text, event_id text, ttl interval)
RETURNS boolean
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT idem.wh_record(source, event_id, ttl)
$$;
REVOKE ALL ON FUNCTION idem.webhook_record(text, text, interval) FROM PUBLIC;

-- The lock of one gateway object of a source, which serializes
-- idem_webhook_order's deliveries for it: a transaction-level advisory lock
-- on a 64-bit hash of both (in PostgreSQL's advisory lock space, which any
-- role can take: DIFFERENCES.md)
CREATE OR REPLACE FUNCTION idem.webhook_order_lock(source_name text, object_key text)
RETURNS void
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT pg_advisory_xact_lock(hashtextextended(object_key, hashtextextended(source_name, 7652)))
$$;
REVOKE ALL ON FUNCTION idem.webhook_order_lock(text, text) FROM PUBLIC;

-- idem.webhook_ttl as whole seconds (168 hours when unset)
CREATE OR REPLACE FUNCTION idem.webhook_ttl_default()
RETURNS interval
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT idem.setting_interval('idem.webhook_ttl', interval '168 hours')
$$;
REVOKE ALL ON FUNCTION idem.webhook_ttl_default() FROM PUBLIC;

-- The newest event idem_webhook_order applied to each gateway object of a
-- source (doc/webhooks.md, "Webhooks in order"): its time and id, when it
-- was applied, and until when this is kept (the source's ttl, as its
-- deliveries are).  A delivery older than event_time is stale.
CREATE TABLE IF NOT EXISTS idem.webhook_order (
    source      text        COLLATE "C" NOT NULL,
    object_id   text        COLLATE "C" NOT NULL,
    event_time  timestamptz NOT NULL,
    event_id    text        COLLATE "C",
    applied_at  timestamptz NOT NULL,
    expires_at  timestamptz NOT NULL,
    CONSTRAINT webhook_order_pkey PRIMARY KEY (object_id, source)
);
CREATE INDEX IF NOT EXISTS webhook_order_expires_at_idx ON idem.webhook_order (expires_at);
REVOKE ALL ON idem.webhook_order FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('idem.webhook_order', ''); -- extension only

-- A payload as jsonb, or NULL if it is not JSON the server reads (a
-- verified body is the gateway's, but a reader never raises)
CREATE OR REPLACE FUNCTION idem.webhook_json(payload text)
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
CREATE OR REPLACE FUNCTION idem.webhook_object(scheme_name text, body jsonb,
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
CREATE OR REPLACE FUNCTION idem.webhook_order_apply(p_source text, p_object text,
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
CREATE OR REPLACE FUNCTION idem.webhook_order_check(object_id text, what text,
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
CREATE OR REPLACE FUNCTION idem_webhook_order(source text, object_id text, event_time timestamptz,
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
CREATE OR REPLACE FUNCTION idem_webhook_receive_ordered(source text, payload text, headers jsonb,
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
