-- Checks of the arguments the public functions share, and the readers of
-- the settings (idem.ttl, idem.lease, idem.max_response_size), with the C
-- edition's SQLSTATEs, messages, details and hints.  Each check runs before
-- anything is locked or written, so a call that errors here has written
-- nothing.
--
-- The checks return the error instead of raising it: an array {sqlstate,
-- message, detail, hint} (detail and hint may be NULL), or NULL when the
-- argument is good.  The public function raises it itself (RAISE with the
-- four parts), so that the error carries no CONTEXT line of a helper, as the
-- C edition's errors carry none.  Callers test the common case inline (a
-- cheap expression) and call these only when it fails.

-- The error for a key or event id (what names it) that is NULL, empty or
-- over 255 bytes; NULL when it is good.
CREATE OR REPLACE FUNCTION idem.input_key_error(v text, what text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN v IS NULL THEN ARRAY['22004', what || ' must not be null', NULL, NULL]
    WHEN octet_length(v) = 0 THEN ARRAY['22023', what || ' must not be empty', NULL, NULL]
    WHEN octet_length(v) > 255 THEN ARRAY['22001', what || ' is too long',
        'It is ' || octet_length(v) || ' bytes; the limit is 255.', NULL]
END;

-- The error for a scope or source (what names it) that is NULL or over 255
-- bytes (empty is allowed); NULL when it is good.
CREATE OR REPLACE FUNCTION idem.input_scope_error(v text, what text) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN v IS NULL THEN ARRAY['22004', what || ' must not be null', NULL,
        'Use the empty string for the default ' || what || '.']
    WHEN octet_length(v) > 255 THEN ARRAY['22001', what || ' is too long',
        'It is ' || octet_length(v) || ' bytes; the limit is 255.', NULL]
END;

-- Would idem.input_key_error accept v?  For calls that answer instead of raising.
CREATE OR REPLACE FUNCTION idem.input_key_valid(v text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN v IS NOT NULL AND octet_length(v) BETWEEN 1 AND 255;

-- The error for a fingerprint over 255 bytes (a hash, not a payload).
CREATE OR REPLACE FUNCTION idem.input_fingerprint_error(fp bytea) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN octet_length(fp) > 255 THEN ARRAY['22001', 'fingerprint is too long',
        'It is ' || octet_length(fp) || ' bytes; the limit is 255.',
        'Pass a hash of the request, such as idem_fingerprint(request).']
END;

-- from_ts + iv, as the C edition's idem_after adds it: the calendar part
-- (months, days) first (an end out of range is PostgreSQL's own 22008,
-- raised), then the time; 'infinity' when that runs past 294276-12-31,
-- '-infinity' when it ends before the first timestamp.
CREATE OR REPLACE FUNCTION idem.input_end(from_ts timestamptz, iv interval) RETURNS timestamptz
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cal interval := date_trunc('day', iv);
    t timestamptz := from_ts + cal;
    secs numeric := extract(epoch FROM t) + extract(epoch FROM iv - cal);
BEGIN
    -- 294277-01-01 00:00:00 UTC is the first time past the range
    IF secs >= 9224318016000 THEN
        RETURN CASE WHEN extract(epoch FROM iv - cal) > 0 THEN 'infinity' ELSE '-infinity' END;
    ELSIF secs < -210866803200 THEN
        RETURN '-infinity';
    END IF;
    RETURN t + (iv - cal);
END
$$;

-- The error for from_ts + iv (idem.input_end) when it runs past the last
-- timestamp, or ends at or before from_ts (months and days of opposite
-- signs: '-12 months +360 days'); NULL when it is good.
CREATE OR REPLACE FUNCTION idem.input_after_error(from_ts timestamptz, iv interval, what text)
RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT CASE
        WHEN e = 'infinity' THEN ARRAY['22008', what || ' is too long',
            'Added to the current time, it ends after the last timestamp, 294276-12-31 23:59:59.999999 UTC.', NULL]
        WHEN e <= from_ts THEN ARRAY['22023', what || ' must be positive',
            'Added to the current time, it ends at or before the current time.', NULL]
    END
    FROM idem.input_end(from_ts, iv) e;
END;

-- from_ts + iv, raising idem.input_after_error's error: for the time a
-- claim writes, whose interval was checked already (so it raises only at
-- the very end of time).
CREATE OR REPLACE FUNCTION idem.input_after(from_ts timestamptz, iv interval, what text)
RETURNS timestamptz
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    e text[] := idem.input_after_error(from_ts, iv, what);
BEGIN
    IF e IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], DETAIL = e[3];
    END IF;
    RETURN idem.input_end(from_ts, iv);
END
$$;

-- The error for a lease or ttl (what names it) that is not positive, or
-- that would end past the last timestamp; NULL when it is good or NULL
-- (the caller then takes the setting).
CREATE OR REPLACE FUNCTION idem.input_interval_error(iv interval, what text) RETURNS text[]
LANGUAGE plpgsql STABLE PARALLEL SAFE
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    now_ts timestamptz := clock_timestamp();
    e timestamptz;
BEGIN
    IF iv IS NULL THEN
        RETURN NULL;
    END IF;
    IF date_part('year', iv) * 12 + date_part('month', iv) <= 0 AND date_part('day', iv) <= 0
       AND iv - date_trunc('day', iv) <= interval '0' THEN
        RETURN ARRAY['22023', what || ' must be positive', NULL, NULL];
    END IF;
    -- '1 month -30 days' is positive or not depending on the date: ask the calendar
    e := idem.input_end(now_ts, iv);
    IF e = 'infinity' THEN
        RETURN idem.input_after_error(now_ts, iv, what);
    ELSIF e <= now_ts THEN
        RETURN ARRAY['22023', what || ' must be positive', NULL, NULL];
    END IF;
    RETURN NULL;
END
$$;

-- A time setting (idem.ttl, idem.lease, idem.webhook_ttl) as an interval
-- of seconds, as the C edition holds it: a bare number is seconds, or a
-- value with a unit ('30s', '5min', '24h', '7d': 604800 seconds, not 7
-- calendar days, which a change of daylight saving time makes longer or
-- shorter); NULL or '' is the default.
CREATE OR REPLACE FUNCTION idem.setting_interval(name text, dflt interval) RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE
    WHEN coalesce(pg_catalog.current_setting(name, true), '') = '' THEN dflt
    WHEN pg_catalog.current_setting(name, true) OPERATOR(pg_catalog.~) '^\s*[0-9]+\s*$'
        THEN pg_catalog.make_interval(secs => pg_catalog.current_setting(name, true)::pg_catalog.float8)
    ELSE pg_catalog.make_interval(secs => pg_catalog.date_part('epoch',
             pg_catalog.current_setting(name, true)::pg_catalog.interval))
END;

-- idem.ttl (default 24h): how long a key is kept.
CREATE OR REPLACE FUNCTION idem.setting_ttl() RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
RETURN idem.setting_interval('idem.ttl', '24 hours');

-- idem.lease (default 60s): how long a committed processing claim is honoured.
CREATE OR REPLACE FUNCTION idem.setting_lease() RETURNS interval
LANGUAGE sql STABLE PARALLEL SAFE
RETURN idem.setting_interval('idem.lease', '60 seconds');

-- idem.max_response_size in kB (default 1MB): a bare number is kB, or a
-- value with a unit ('512kB', '2MB', '1GB').
CREATE OR REPLACE FUNCTION idem.setting_max_response_kb() RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE
    WHEN coalesce(pg_catalog.current_setting('idem.max_response_size', true), '') = '' THEN 1024
    WHEN pg_catalog.current_setting('idem.max_response_size', true) OPERATOR(pg_catalog.~) '^\s*[0-9]+\s*$'
        THEN pg_catalog.current_setting('idem.max_response_size', true)::pg_catalog.int8
    ELSE pg_catalog.pg_size_bytes(pg_catalog.current_setting('idem.max_response_size', true)) OPERATOR(pg_catalog./) 1024
END;

-- The error for a value of this many bytes (what names it: response,
-- error, data, body) over idem.max_response_size, or over what a replay
-- holds (1023 MB); NULL when it is good.
CREATE OR REPLACE FUNCTION idem.input_size_error(bytes bigint, what text) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT CASE
        WHEN bytes > m * 1024 THEN ARRAY['54000', what || ' is too large',
            'It is ' || bytes || ' bytes; idem.max_response_size is ' || m || ' kB.', NULL]
        WHEN bytes > 1023 * 1024 * 1024 THEN ARRAY['54000', what || ' is too large to replay',
            'It is ' || bytes || ' bytes; a replay holds at most 1023 MB.', NULL]
    END
    FROM idem.setting_max_response_kb() m;
END;

-- A jsonb value's own bytes, as idem.max_response_size counts them: its
-- binary form, uncompressed, without PostgreSQL's varlena header.
CREATE OR REPLACE FUNCTION idem.input_jsonb_bytes(v jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN pg_column_compression(v) IS NULL THEN pg_column_size(v) - 4
    ELSE pg_column_size(v::text::jsonb) - 4
END;

-- The error for a jsonb value (what names it) whose text, as jsonb prints
-- it, would be over 1023 MB, the most a replay holds (idem_http_claim prints
-- it, a client reads idem_claim's); NULL when it is good.  One byte of jsonb
-- prints as at most 10600 bytes of text (a numeric of the largest weight),
-- so a value of up to about 100 kB always fits; a larger one is read
-- through, each scalar and key counted with 2 bytes for its separator.
CREATE OR REPLACE FUNCTION idem.input_jsonb_prints_error(v jsonb, what text) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE
    WHEN idem.input_jsonb_bytes(v) > 1072693248 / 10600
     AND (SELECT sum(octet_length(i::text) + 2)
            FROM jsonb_path_query(v, 'strict $.** ? (@.type() != "object" && @.type() != "array")') i)
         + coalesce((SELECT sum(octet_length(k::text) + 2)
                       FROM jsonb_path_query(v, 'strict $.** ? (@.type() == "object").keyvalue().key') k), 0)
         > 1072693248
    THEN ARRAY['54000', what || ' is too large to replay',
               'As jsonb prints it, its text is over 1023 MB, the most a replay holds.', NULL]
END;

-- The error for a jsonb response, error or checkpoint data over
-- idem.max_response_size, or that a replay could not print; NULL when it is
-- good or NULL.  A value of at most 1024 bytes with its header is within any
-- setting, and is not measured.
CREATE OR REPLACE FUNCTION idem.input_jsonb_error(v jsonb, what text) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE WHEN pg_column_size(v) > 1024
            THEN coalesce(idem.input_size_error(idem.input_jsonb_bytes(v), what),
                          idem.input_jsonb_prints_error(v, what)) END;

-- The error for a write where PostgreSQL refuses one (a read-only
-- transaction, a standby), with the C edition's message naming the
-- function (fname: 'idem_claim()'); NULL when writes are allowed.
CREATE OR REPLACE FUNCTION idem.input_writable_error(fname text) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE
RETURN CASE
    WHEN current_setting('transaction_read_only') = 'on' THEN
        CASE WHEN pg_is_in_recovery()
             THEN ARRAY['25006', 'cannot execute ' || fname || ' during recovery', NULL, NULL]
             ELSE ARRAY['25006', 'cannot execute ' || fname || ' in a read-only transaction', NULL, NULL]
        END
END;

REVOKE ALL ON FUNCTION idem.input_key_error(text, text), idem.input_scope_error(text, text),
    idem.input_key_valid(text), idem.input_fingerprint_error(bytea),
    idem.input_end(timestamptz, interval), idem.input_after_error(timestamptz, interval, text),
    idem.input_after(timestamptz, interval, text), idem.input_interval_error(interval, text),
    idem.setting_interval(text, interval), idem.setting_ttl(), idem.setting_lease(),
    idem.setting_max_response_kb(), idem.input_size_error(bigint, text),
    idem.input_jsonb_bytes(jsonb), idem.input_jsonb_prints_error(jsonb, text),
    idem.input_jsonb_error(jsonb, text),
    idem.input_writable_error(text) FROM PUBLIC;
