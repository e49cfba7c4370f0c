-- Moving webhook deliveries between databases (a shard move):
-- idem_webhooks_export writes live deliveries as JSON, idem_webhooks_import
-- writes them into another database with idem or idem_sql.  The same JSON,
-- checks, errors and answers as the C edition's functions of the same name
-- (idem--1.5--1.6.sql, idem--1.6--1.7.sql), which are PL/pgSQL there too:
-- like them they run with the caller's rights on the tables, and PUBLIC can
-- execute neither.  Internals are idem.wht_*.

-- idem_webhooks_export(source, event_ids): the live deliveries of source
-- among event_ids, one JSON object each, by event id.
CREATE OR REPLACE FUNCTION idem_webhooks_export(source text, event_ids text[])
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

-- The elements of deliveries, a JSON array of objects, each with exactly
-- the fields of an export, none of them null (the C edition's
-- idem.import_rows for deliveries).  Its errors name the element.
CREATE OR REPLACE FUNCTION idem.wht_elements(deliveries jsonb)
RETURNS SETOF jsonb
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    fields text[] := ARRAY['source', 'event_id', 'received_at', 'expires_at'];
    e jsonb;
    f text;
    i bigint := 0;
BEGIN
    IF jsonb_typeof(deliveries) IS DISTINCT FROM 'array' THEN
        RAISE EXCEPTION 'deliveries must be a JSON array of what idem_webhooks_export returns'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    FOR e IN SELECT jsonb_array_elements(deliveries) LOOP
        i := i + 1;
        IF jsonb_typeof(e) IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'element % of deliveries is not a JSON object', i
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        SELECT string_agg(x, ', ') INTO f FROM jsonb_object_keys(e) x WHERE x <> ALL (fields);
        IF f IS NOT NULL THEN
            RAISE EXCEPTION 'element % of deliveries has unknown fields: %', i, f
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Import into a database with the idem version that exported them, or later.';
        END IF;
        SELECT string_agg(x, ', ') INTO f
        FROM unnest(fields) x
        WHERE jsonb_typeof(e -> x) IS NULL OR jsonb_typeof(e -> x) = 'null';
        IF f IS NOT NULL THEN
            RAISE EXCEPTION 'element % of deliveries lacks %', i, f
                USING ERRCODE = 'null_value_not_allowed';
        END IF;
        RETURN NEXT e;
    END LOOP;
END
$$;
REVOKE ALL ON FUNCTION idem.wht_elements(jsonb) FROM PUBLIC;

-- One element as the row it writes, each field checked as idem_webhook
-- would check it: source at most 255 bytes, event_id 1 to 255, both JSON
-- strings; the times finite timestamps, received_at not after expires_at.
CREATE OR REPLACE FUNCTION idem.wht_row(e jsonb)
RETURNS idem.webhooks
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r idem.webhooks;
    f text;
    t text;
BEGIN
    FOREACH f IN ARRAY ARRAY['source', 'event_id', 'received_at', 'expires_at'] LOOP
        IF jsonb_typeof(e -> f) <> 'string' THEN
            RAISE EXCEPTION '% must be a JSON string', f USING ERRCODE = 'invalid_parameter_value';
        END IF;
        t := e ->> f;
        IF f = 'event_id' AND t = '' THEN
            RAISE EXCEPTION '% must not be empty', f USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF f IN ('source', 'event_id') AND octet_length(t) > 255 THEN
            RAISE EXCEPTION '% is too long', f USING ERRCODE = 'string_data_right_truncation',
                DETAIL = format('It is %s bytes; the limit is %s.', octet_length(t), 255);
        END IF;
        IF f IN ('received_at', 'expires_at') AND NOT isfinite(t::timestamptz) THEN
            RAISE EXCEPTION '% must be a finite time', f USING ERRCODE = 'datetime_field_overflow';
        END IF;
    END LOOP;
    r.source := e ->> 'source';
    r.event_id := e ->> 'event_id';
    r.received_at := (e ->> 'received_at')::timestamptz;
    r.expires_at := (e ->> 'expires_at')::timestamptz;
    IF r.received_at > r.expires_at THEN
        RAISE EXCEPTION 'expires_at must not be before received_at'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN r;
END
$$;
REVOKE ALL ON FUNCTION idem.wht_row(jsonb) FROM PUBLIC;

-- idem_webhooks_import(deliveries): write what idem_webhooks_export gave,
-- all checked before anything is written; a delivery seen in both places
-- keeps the earlier reception and the later expiry.  Returns how many.
CREATE OR REPLACE FUNCTION idem_webhooks_import(deliveries jsonb)
RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    e jsonb;
    i bigint := 0;
    rows idem.webhooks[] := '{}';
    clash record;
    st text;
    msg text;
    det text;
    hnt text;
BEGIN
    BEGIN
        FOR e IN SELECT * FROM idem.wht_elements(deliveries) LOOP
            i := i + 1;
            rows := rows || idem.wht_row(e);
        END LOOP;
    EXCEPTION WHEN OTHERS THEN
        -- again, with the element named in the message
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                                det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
        IF i > 0 THEN
            msg := format('element %s of deliveries: %s', i, msg);
        END IF;
        IF coalesce(det, '') = '' AND coalesce(hnt, '') = '' THEN
            RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg;
        ELSIF coalesce(hnt, '') = '' THEN
            RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg, DETAIL = det;
        ELSIF coalesce(det, '') = '' THEN
            RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg, HINT = hnt;
        END IF;
        RAISE EXCEPTION USING ERRCODE = st, MESSAGE = msg, DETAIL = det, HINT = hnt;
    END;
    SELECT d.source, d.event_id INTO clash
    FROM unnest(rows) d GROUP BY d.source, d.event_id HAVING count(*) > 1 LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'event "%" of source "%" is in the import twice', clash.event_id, clash.source
            USING ERRCODE = 'unique_violation';
    END IF;
    INSERT INTO idem.webhooks AS w (source, event_id, received_at, expires_at)
    SELECT d.source, d.event_id, d.received_at, d.expires_at FROM unnest(rows) d
    ON CONFLICT (event_id, source) DO UPDATE
        SET received_at = least(w.received_at, excluded.received_at),
            expires_at = greatest(w.expires_at, excluded.expires_at);
    RETURN cardinality(rows);
END
$$;

REVOKE ALL ON FUNCTION idem_webhooks_export(text, text[]), idem_webhooks_import(jsonb) FROM PUBLIC;
