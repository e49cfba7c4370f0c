-- Receiving a delivery for a webhook source (50_webhook.sql sets them):
-- the checks of idem.webhook_check, which idem_webhook_receive and
-- idem_webhook_receive_ordered (55_webhook_order.sql) share.

-- May a delivery from client_ip reach a source that lists nets?  Only a
-- known host address inside one of them (an IPv4-mapped IPv6 address also
-- as its IPv4 form); NULL or a network is refused.
CREATE OR REPLACE FUNCTION idem.wh_ip_allowed(client_ip inet, nets cidr[])
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT client_ip IS NOT NULL
       AND masklen(client_ip) = CASE family(client_ip) WHEN 4 THEN 32 ELSE 128 END
       AND (EXISTS (SELECT FROM unnest(nets) n WHERE client_ip <<= n)
            OR (family(client_ip) = 6 AND client_ip <<= inet '::ffff:0.0.0.0/96'
                AND EXISTS (SELECT FROM unnest(nets) n
                            WHERE inet '0.0.0.0' + (client_ip - inet '::ffff:0.0.0.0') <<= n)))
$$;
REVOKE ALL ON FUNCTION idem.wh_ip_allowed(inet, cidr[]) FROM PUBLIC;

-- idem.webhook_check(source, payload, headers, client_ip): what
-- idem_webhook_receive checks, in its order: the source is known, the
-- address allowed, the signature verifies with one of its secrets, the
-- event id is found.  status verified (with the source's scheme and ttl)
-- or rejected (reason unknown_source, ip, timestamp, signature or
-- malformed).  Writes nothing.
CREATE OR REPLACE FUNCTION idem.webhook_check(source text, payload text, headers jsonb, client_ip inet,
                                              OUT status text, OUT event_id text, OUT reason text,
                                              OUT scheme text, OUT ttl interval)
RETURNS record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    src idem.webhook_sources;
    keys bytea[] := '{}';
    s text;
    ok boolean;
    tol numeric;
    genuine boolean;
BEGIN
    ok := idem.wh_raise_if(idem.input_scope_error(source, 'source'));
    IF payload IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'payload must not be null',
            HINT = 'Pass the raw body as received; an empty body is the empty string.';
    END IF;
    IF headers IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'headers must not be null',
            HINT = 'Pass the request''s headers as a JSON object of name to string.';
    END IF;
    ok := idem.wh_raise_if(idem.input_writable_error('idem_webhook_receive()'));

    status := 'rejected';
    SELECT * INTO src FROM idem.webhook_sources w WHERE w.source = webhook_check.source;
    IF NOT FOUND THEN
        reason := 'unknown_source';
        RETURN;
    END IF;
    IF src.allowed_ips IS NOT NULL AND NOT idem.wh_ip_allowed(client_ip, src.allowed_ips) THEN
        reason := 'ip';
        RETURN;
    END IF;

    FOREACH s IN ARRAY src.secrets LOOP
        keys := keys || idem.wh_key(src.scheme, s);
    END LOOP;
    tol := idem.wh_interval_secs(src.tolerance);
    SELECT bool_or(idem.wh_check(src.scheme, k, payload, headers, tol)) INTO genuine FROM unnest(keys) k;
    IF NOT genuine THEN
        -- genuine but signed outside the tolerance, or forged?
        IF src.scheme IN ('stripe', 'standard', 'svix', 'paddle', 'airwallex', 'wechatpay', 'mercadopago')
           AND EXISTS (SELECT FROM unnest(keys) k WHERE idem.wh_check(src.scheme, k, payload, headers, NULL)) THEN
            reason := 'timestamp';
            RETURN;
        END IF;
        reason := 'signature';
        RETURN;
    END IF;

    event_id := idem.wh_event_id(src.scheme, payload, headers);
    IF event_id IS NULL THEN
        reason := 'malformed';
        RETURN;
    END IF;
    status := 'verified';
    scheme := src.scheme;
    ttl := coalesce(src.ttl, idem.setting_interval('idem.webhook_ttl', interval '168 hours'));
END
$$;
REVOKE ALL ON FUNCTION idem.webhook_check(text, text, jsonb, inet) FROM PUBLIC;

-- idem_webhook_receive(source, payload, headers, client_ip): the checks
-- of idem.webhook_check, then the delivery is recorded as idem_webhook
-- records it.  status new, duplicate or rejected (nothing written).
CREATE OR REPLACE FUNCTION idem_webhook_receive(source text, payload text, headers jsonb,
                                                client_ip inet DEFAULT NULL,
                                                OUT status text, OUT event_id text, OUT reason text)
RETURNS record
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    c record;
BEGIN
    SELECT * INTO c FROM idem.webhook_check(source, payload, headers, client_ip);
    IF c.status = 'rejected' THEN
        status := 'rejected';
        reason := c.reason;
        RETURN;
    END IF;
    event_id := c.event_id;
    status := CASE WHEN idem.wh_record(source, event_id, c.ttl) THEN 'new' ELSE 'duplicate' END;
END
$$;
REVOKE ALL ON FUNCTION idem_webhook_receive(text, text, jsonb, inet) FROM PUBLIC;
