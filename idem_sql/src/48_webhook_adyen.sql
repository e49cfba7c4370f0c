-- Adyen's notification items, as the scheme "adyen" of 50_webhook.sql reads
-- them (its signed fields, its event id), as src/webhook/scheme_adyen.c
-- does in the C edition.  Like everything that reads the request, they
-- answer NULL, never an error.

-- The fields of an Adyen notification item read once (see
-- idem.wh_adyen_item): the eight signed fields' texts (NULL when absent or
-- null) and the signature; NULL if the JSON is no item.
CREATE OR REPLACE FUNCTION idem.wh_adyen_item_once(p text)
RETURNS text[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    j json := idem.wh_json(p);
    item json;
    nroot bigint;
    nwrap bigint;
    wrap json;
    top record;
    sub record;
    names text[] := ARRAY['pspReference', 'originalReference', 'merchantAccountCode', 'merchantReference',
                          'amount.value', 'amount.currency', 'eventCode', 'success', 'additionalData.hmacSignature'];
    vals text[] := array_fill(NULL::text, ARRAY[9]);
    kinds text[] := array_fill(NULL::text, ARRAY[9]);
    i int;
BEGIN
    IF j IS NULL OR json_typeof(j) <> 'object' THEN
        RETURN NULL;
    END IF;
    SELECT count(*), count(*) FILTER (WHERE e.key = 'NotificationRequestItem'),
           min(e.value::text) FILTER (WHERE e.key = 'NotificationRequestItem')
      INTO nroot, nwrap, wrap
      FROM json_each(j) e;
    IF nwrap = 0 THEN
        item := j;
    ELSIF nwrap = 1 AND nroot = 1 AND json_typeof(wrap) = 'object' THEN
        item := wrap;
    ELSE
        RETURN NULL;
    END IF;
    FOR top IN SELECT e.key, e.value, json_typeof(e.value) AS kind FROM json_each(item) e LOOP
        IF top.key IN ('amount', 'additionalData') THEN
            -- each at most once, an object or null
            IF top.key = ANY (kinds) OR top.kind NOT IN ('object', 'null') THEN
                RETURN NULL;
            END IF;
            kinds := kinds || top.key;
            IF top.kind = 'object' THEN
                FOR sub IN SELECT s.key, s.value, json_typeof(s.value) AS kind FROM json_each(top.value) s LOOP
                    i := array_position(names, top.key || '.' || sub.key);
                    CONTINUE WHEN i IS NULL;
                    IF kinds[i] IS NOT NULL THEN
                        RETURN NULL;
                    END IF;
                    kinds[i] := sub.kind;
                    vals[i] := CASE WHEN sub.kind IN ('object', 'array') THEN NULL ELSE sub.value #>> '{}' END;
                END LOOP;
            END IF;
        ELSE
            i := array_position(names, top.key);
            CONTINUE WHEN i IS NULL;
            IF kinds[i] IS NOT NULL THEN
                RETURN NULL;
            END IF;
            kinds[i] := top.kind;
            vals[i] := CASE WHEN top.kind IN ('object', 'array') THEN NULL ELSE top.value #>> '{}' END;
        END IF;
    END LOOP;
    -- the signed fields scalars or null; the signature a string
    IF 'object' = ANY (kinds[1:8]) OR 'array' = ANY (kinds[1:8])
       OR kinds[9] IS DISTINCT FROM 'string' THEN
        RETURN NULL;
    END IF;
    RETURN vals;
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION idem.wh_adyen_item_once(text) FROM PUBLIC;

-- The fields of an Adyen notification item (the root object, or the only
-- member NotificationRequestItem of the root): every field at most once,
-- the signed ones scalars or null, amount and additionalData objects or
-- null, the signature a string; a number's or boolean's text as written.
-- A \u0000 in the payload is read around, as the C edition does.
CREATE OR REPLACE FUNCTION idem.wh_adyen_item(p text)
RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(idem.wh_adyen_item_once(p),
                    (SELECT a FROM (SELECT idem.wh_adyen_item_once(idem.wh_json_nul_as(p, '1')) AS a,
                                           idem.wh_adyen_item_once(idem.wh_json_nul_as(p, '2')) AS b) s
                     WHERE a = b))
$$;
REVOKE ALL ON FUNCTION idem.wh_adyen_item(text) FROM PUBLIC;
