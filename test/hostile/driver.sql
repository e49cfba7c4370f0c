-- The hostile-input sweep's driver: tables for the cases and their results,
-- the NULL sweep generated from pg_proc, and a procedure that runs cases one
-- transaction each.  Load it into a database where idem is installed, then
-- load the cases that generate.pl writes and CALL hostile.run(first, last).
-- See test/hostile/README.

SET client_min_messages = warning;
CREATE SCHEMA hostile;

-- expect: ok, ok:<value>, err (any acceptable error), err:<SQLSTATE>, or
-- any (works or fails with an acceptable error).  setup runs in the case's
-- transaction before it, outside the check that nothing was written.
CREATE TABLE hostile.cases (
    id      integer PRIMARY KEY,
    family  text NOT NULL,
    setup   text,
    sql     text NOT NULL,
    expect  text NOT NULL
);

CREATE TABLE hostile.results (
    id              integer PRIMARY KEY,
    outcome         text NOT NULL,      -- ok or the SQLSTATE
    message         text,
    value           text,
    wrote_on_error  boolean NOT NULL
);

-- A big, very compressible response stored compressed: its size on disk
-- must not be what idem.max_response_size is compared with.
CREATE TABLE hostile.blobs (name text PRIMARY KEY, j jsonb);
INSERT INTO hostile.blobs
VALUES ('compressible', jsonb_build_object('pad', repeat('0123456789', 300000)));

-- What a case could write: rows of both tables and the token sequence
CREATE FUNCTION hostile.written() RETURNS text LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM idem.keys) || ' keys, '
           || (SELECT count(*) FROM idem.webhooks) || ' webhooks, token '
           || (SELECT last_value || CASE WHEN is_called THEN '+' ELSE '' END
               FROM idem.token_seq)
$$;

-- Run cases first..last, each in a transaction of its own.  The server log
-- names each case before it runs, so a crash points at its case.
CREATE PROCEDURE hostile.run(first integer, last integer)
LANGUAGE plpgsql AS $$
DECLARE
    c record;
    before text;
    after text;
    v text;
    st text;
    msg text;
BEGIN
    FOR c IN SELECT * FROM hostile.cases WHERE id BETWEEN first AND last ORDER BY id LOOP
        RAISE LOG 'hostile case %', c.id;
        IF c.setup IS NOT NULL THEN
            EXECUTE c.setup;
        END IF;
        before := hostile.written();
        v := NULL;
        msg := NULL;
        BEGIN
            EXECUTE c.sql INTO v;
            st := 'ok';
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
        END;
        after := hostile.written();
        INSERT INTO hostile.results
        VALUES (c.id, st, msg, left(v, 300), st <> 'ok' AND before <> after);
        COMMIT;
    END LOOP;
END $$;

-- A valid value for an argument of one of idem's functions, as SQL
CREATE FUNCTION hostile.valid_arg(argname text, argtype regtype) RETURNS text
LANGUAGE sql AS $$
    SELECT CASE
        WHEN argname = 'scheme' THEN '''standard'''
        WHEN argname = 'secret' THEN '''whsec_c2VjcmV0'''
        WHEN argname = 'secrets' THEN 'ARRAY[''whsec_c2VjcmV0'']'
        WHEN argname = 'currency' THEN '''USD'''
        WHEN argname = 'headers' THEN '''{"webhook-id": "x"}''::jsonb'
        WHEN argname = 'api_v3_key' THEN '''0123456789abcdef0123456789abcdef'''
        WHEN argtype = 'text'::regtype THEN '''null-sweep'''
        WHEN argtype = 'bytea'::regtype THEN '''\x01''::bytea'
        WHEN argtype = 'interval'::regtype THEN '''1 minute''::interval'
        WHEN argtype = 'boolean'::regtype THEN 'false'
        WHEN argtype = 'bigint'::regtype THEN '1::bigint'
        WHEN argtype = 'integer'::regtype THEN '10'
        WHEN argtype = 'jsonb'::regtype THEN '''{"a": 1}''::jsonb'
        WHEN argtype = 'numeric'::regtype THEN '10'
        WHEN argtype = 'date'::regtype THEN '''2024-01-01''::date'
        WHEN argtype = 'text[]'::regtype THEN 'ARRAY[''a'', ''b'']'
        WHEN argtype = 'cidr[]'::regtype THEN 'ARRAY[''192.0.2.0/24'']::cidr[]'
        WHEN argtype = 'inet'::regtype THEN '''192.0.2.1''::inet'
        WHEN argtype = 'timestamptz'::regtype THEN '''2026-01-01 10:00:00+00''::timestamptz'
    END
$$;

-- The NULL sweep: every function of the extension that takes arguments is
-- called once with valid values, and once more for each argument with NULL
-- there.  A NULL where the interface forbids it must be 22004; elsewhere it
-- takes the default or gives a result (never an internal error).
CREATE FUNCTION hostile.add_null_cases(first_id integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    f record;
    i integer;
    j integer;
    args text[];
    call text;
    n integer := first_id;
    must_not_be_null text[] := ARRAY['key', 'scope', 'source', 'event_id', 'phase',
        'retryable', 'http_status', 'scheme', 'secret', 'merchant_id', 'merchant_order_id',
        'amount', 'currency', 'request_date', 'parts', 'api_v3_key', 'secrets',
        'object_id', 'event_time'];
BEGIN
    FOR f IN
        SELECT p.oid, p.oid::regproc::text AS name, p.proargnames AS argnames,
               p.proargtypes::regtype[] AS argtypes, p.pronargs AS nargs,
               p.provariadic <> 0 AS variadic
        FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
        WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
          AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'idem')
          AND p.pronargs > 0
        ORDER BY 2
    LOOP
        FOR i IN 0 .. f.nargs LOOP      -- 0: all valid
            args := '{}';
            FOR j IN 1 .. f.nargs LOOP
                args := args || CASE WHEN j = i
                    THEN 'NULL::' || f.argtypes[j - 1]::text
                    ELSE hostile.valid_arg(f.argnames[j], f.argtypes[j - 1]) END;
            END LOOP;
            call := format('SELECT (SELECT string_agg(r::text, '','') FROM %s(%s%s) r)',
                           f.name,
                           CASE WHEN f.variadic THEN 'VARIADIC ' ELSE '' END,
                           array_to_string(args, ', '));
            INSERT INTO hostile.cases VALUES (n, 'null', NULL, call,
                CASE WHEN i = 1 AND f.name = 'idem_http_claim'
                     -- no Idempotency-Key header: an answer (400), not an error
                     THEN 'ok:(bad_key,400,' || quote_ident('{"type":"about:blank","title":"Idempotency-Key is missing or invalid","status":400,"detail":"This operation is idempotent: send an Idempotency-Key header of 1 to 255 bytes."}') || ',application/problem+json,,,,,)'
                     -- an event without an id: ordered by its time alone
                     WHEN i > 0 AND f.name = 'idem_webhook_order' AND f.argnames[i] = 'event_id'
                     THEN 'any'
                     WHEN i > 0 AND f.argnames[i] = ANY (must_not_be_null)
                     THEN 'err:22004' ELSE 'any' END);
            n := n + 1;
        END LOOP;
    END LOOP;
    RETURN n - first_id;
END $$;
RESET client_min_messages;
