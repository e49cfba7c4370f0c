-- The wire format of webhook deliveries, for the schemes of
-- 50_webhook.sql, as src/webhook/wire_*.c is the C edition's: headers,
-- lists, codecs, timestamps, JSON.  Like everything that reads the request,
-- none of these raises an error on what a sender sends: they answer NULL
-- or false.

-- The value of a header found by case-insensitive name (A-Z folded only):
-- NULL if headers is no object, the name is missing, present twice in
-- different cases, or its value is not a JSON string.  Taken as it is.
CREATE OR REPLACE FUNCTION idem.wh_header(headers jsonb, name text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    n bigint;
    kind text;
    v text;
BEGIN
    IF jsonb_typeof(headers) IS DISTINCT FROM 'object' THEN
        RETURN NULL;
    END IF;
    SELECT count(*), min(jsonb_typeof(h.value)), min(h.value #>> '{}') INTO n, kind, v
    FROM jsonb_each(headers) h
    WHERE translate(h.key, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')
          = translate(name, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz');
    IF n = 1 AND kind = 'string' THEN
        RETURN v;
    END IF;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION idem.wh_header(jsonb, text) FROM PUBLIC;

-- The bytes s spells in a form, or NULL if it is not exactly that:
-- 'hex-mac' is 64 hex digits (either case), 'hex-mac512' 128; 'base64' canonical padded
-- standard base64 (not empty, a length a multiple of 4, "=" only as the
-- padding, no stray low bits before it); 'base64-mac' that of 32 bytes.
CREATE OR REPLACE FUNCTION idem.wh_decode(s text, form text)
RETURNS bytea
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN form = 'hex-mac' AND length(s) = 64 AND s !~ '[^0-9a-fA-F]' THEN decode(s, 'hex')
        WHEN form = 'hex-mac512' AND length(s) = 128 AND s !~ '[^0-9a-fA-F]' THEN decode(s, 'hex')
        WHEN form = 'base64-mac' AND length(s) = 44 AND s ~ '^[A-Za-z0-9+/]*[AEIMQUYcgkosw048]=$'
            THEN decode(s, 'base64')
        WHEN form = 'base64' AND length(s) % 4 = 0
             AND s ~ '^[A-Za-z0-9+/]*(?:[A-Za-z0-9+/]|[AQgw]==|[AEIMQUYcgkosw048]=)$'
            THEN decode(s, 'base64')
    END
$$;
REVOKE ALL ON FUNCTION idem.wh_decode(text, text) FROM PUBLIC;

-- Unix seconds written as plain decimal digits, up to 9999-12-31 23:59:59
-- UTC, or NULL
CREATE OR REPLACE FUNCTION idem.wh_unix_secs(s text)
RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN s ~ '^[0-9]+$' AND length(ltrim(s, '0')) <= 12
                     AND s::numeric <= 253402300799 THEN s::numeric END
$$;
REVOKE ALL ON FUNCTION idem.wh_unix_secs(text) FROM PUBLIC;

-- Is a unix time within tol seconds of the wall clock, either way?  NULL
-- tol: no check.
CREATE OR REPLACE FUNCTION idem.wh_fresh(secs numeric, tol numeric)
RETURNS boolean
LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$
    SELECT tol IS NULL OR abs(extract(epoch FROM clock_timestamp()) - secs) <= tol
$$;
REVOKE ALL ON FUNCTION idem.wh_fresh(numeric, numeric) FROM PUBLIC;

-- The bytes of a text in the database encoding, as the C edition signs them
CREATE OR REPLACE FUNCTION idem.wh_bytes(t text)
RETURNS bytea
LANGUAGE sql STABLE STRICT PARALLEL SAFE
AS $$
    SELECT convert_to(t, getdatabaseencoding())
$$;
REVOKE ALL ON FUNCTION idem.wh_bytes(text) FROM PUBLIC;

-- Does any of the given MACs equal expected?  Each is compared as its HMAC
-- under a key drawn for the call (double HMAC) against expected's, so the
-- time the comparison takes depends on bytes the sender cannot predict,
-- not on the MAC; every MAC is compared, without stopping at a match.  The
-- key is two UUIDs of gen_random_uuid (the server's strong random source,
-- 244 random bits).
CREATE OR REPLACE FUNCTION idem.wh_mac_match(expected bytea, given bytea[])
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
    r bytea;
    e bytea;
    g bytea;
    matched boolean := false;
BEGIN
    IF expected IS NULL OR given IS NULL THEN
        RETURN false;
    END IF;
    r := uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid());
    e := idem.hmac_sha256(expected, r);
    FOREACH g IN ARRAY given LOOP
        IF g IS NOT NULL AND idem.hmac_sha256(g, r) = e THEN
            matched := true;
        END IF;
    END LOOP;
    RETURN matched;
END
$$;
REVOKE ALL ON FUNCTION idem.wh_mac_match(bytea, bytea[]) FROM PUBLIC;

-- Can the server's JSON parser read this text as the C edition lets it:
-- nested at most 64 deep (counted outside strings, as a stack guard), and
-- outside UTF-8 no \u escape beyond ASCII?
CREATE OR REPLACE FUNCTION idem.wh_json_safe(p text)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    outside text;
    deep boolean;
BEGIN
    IF getdatabaseencoding() <> 'UTF8'
       AND p ~ '\\u(?!00[0-7][0-9A-Fa-f])' THEN
        -- an escape beyond ASCII, unless every such "\u" is itself escaped
        IF regexp_replace(p, '\\\\', '', 'g') ~ '\\u(?!00[0-7][0-9A-Fa-f])' THEN
            RETURN false;
        END IF;
    END IF;
    IF length(p) - length(translate(p, '{[', '')) <= 64 THEN
        RETURN true;
    END IF;
    -- the brackets outside strings, in order
    outside := regexp_replace(regexp_replace(p, '"(?:[^"\\]|\\[\s\S])*(?:"|\\?$)', '', 'g'),
                              '[^][{}]', '', 'g');
    SELECT coalesce(bool_or(d > 64), false) INTO deep
    FROM (SELECT sum(CASE WHEN c IN ('{', '[') THEN 1 ELSE -1 END) OVER (ORDER BY n) AS d
          FROM unnest(string_to_array(outside, NULL)) WITH ORDINALITY AS u(c, n)) s;
    RETURN NOT deep;
END
$$;
REVOKE ALL ON FUNCTION idem.wh_json_safe(text) FROM PUBLIC;

-- The payload as json, or NULL if the C edition would not read it (see
-- idem.wh_json_safe) or it is not well formed.
CREATE OR REPLACE FUNCTION idem.wh_json(p text)
RETURNS json
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF p IS NULL OR NOT idem.wh_json_safe(p) THEN
        RETURN NULL;
    END IF;
    RETURN p::json;
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION idem.wh_json(text) FROM PUBLIC;

-- p with each \u0000 escape in a string written as \u000<n>; NULL if it
-- has none.  The server decodes no \u0000 (text holds no NUL): a value
-- read the same from the copies for n = 1 and n = 2 holds none.
CREATE OR REPLACE FUNCTION idem.wh_json_nul_as(p text, n text)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT CASE WHEN r <> p THEN r END
    FROM (SELECT regexp_replace(p, '(?<![^\\](?:\\\\)*\\)(?<!^(?:\\\\)*\\)\\u0000', '\\u000' || n, 'g') AS r) s
$$;
REVOKE ALL ON FUNCTION idem.wh_json_nul_as(text, text) FROM PUBLIC;

-- The value down path (member names from the root object) of p, read
-- once: a string's text, or with numbers a number's as written; NULL if a
-- member of the path is absent, given twice or (but the last) no object,
-- or the value is of another kind
CREATE OR REPLACE FUNCTION idem.wh_json_path_once(p text, path text[], numbers boolean)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v json := idem.wh_json(p);
    n bigint;
    name text;
BEGIN
    FOREACH name IN ARRAY path LOOP
        IF v IS NULL OR json_typeof(v) <> 'object' THEN
            RETURN NULL;
        END IF;
        SELECT count(*), min(e.value::text)::json INTO n, v FROM json_each(v) e WHERE e.key = name;
        IF n <> 1 THEN
            RETURN NULL;
        END IF;
    END LOOP;
    IF json_typeof(v) = 'string' THEN
        RETURN v #>> '{}';
    ELSIF numbers AND json_typeof(v) = 'number' THEN
        RETURN v::text;
    END IF;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION idem.wh_json_path_once(text, text[], boolean) FROM PUBLIC;

-- The string (or with numbers, number) down path of the JSON text p:
-- NULL, never an error, if p is not well formed, its root is not an
-- object, a member of the path is absent, given twice or (but the last) no
-- object, or the value is of another kind or holds a NUL
CREATE OR REPLACE FUNCTION idem.wh_json_path(p text, path text[], numbers boolean)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(idem.wh_json_path_once(p, path, numbers),
                    (SELECT a FROM (SELECT idem.wh_json_path_once(idem.wh_json_nul_as(p, '1'), path, numbers) AS a,
                                           idem.wh_json_path_once(idem.wh_json_nul_as(p, '2'), path, numbers) AS b) s
                     WHERE a = b))
$$;
REVOKE ALL ON FUNCTION idem.wh_json_path(text, text[], boolean) FROM PUBLIC;

-- The string value of member name of the root object of the JSON text p
-- (idem.wh_json_path)
CREATE OR REPLACE FUNCTION idem.wh_json_member(p text, name text)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT idem.wh_json_path(p, ARRAY[name], false)
$$;
REVOKE ALL ON FUNCTION idem.wh_json_member(text, text) FROM PUBLIC;
