-- Moving webhook deliveries between databases (a shard move):
-- idem_webhooks_export writes live deliveries as JSON, idem_webhooks_import
-- writes them into another database with idem or idem_sql.  The same JSON,
-- checks, errors and answers as the C edition's functions of the same name
-- (idem--1.5--1.6.sql, idem--1.6--1.7.sql), which are PL/pgSQL there too:
-- like them they run with the caller's rights on the tables, and PUBLIC can
-- execute neither.  The element and field readers (idem.import_rows,
-- import_text, import_time, import_raise) are those of the key import,
-- 70_keys_transfer.sql, as in the C edition.

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
    INSERT INTO idem.webhooks AS w (source, event_id, received_at, expires_at)
    SELECT d.source, d.event_id, d.received_at, d.expires_at FROM unnest(rows) d
    ON CONFLICT (event_id, source) DO UPDATE
        SET received_at = least(w.received_at, excluded.received_at),
            expires_at = greatest(w.expires_at, excluded.expires_at);
    RETURN cardinality(rows);
END
$$;

REVOKE ALL ON FUNCTION idem_webhooks_export(text, text[]), idem_webhooks_import(jsonb) FROM PUBLIC;
