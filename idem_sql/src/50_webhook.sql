-- Webhooks: idem_webhook (the record of a delivery), idem_webhook_verify
-- (the signature schemes that HMAC-SHA256 can check), the webhook sources
-- (idem_webhook_source_set, idem_webhook_source_drop, idem_webhook_sources),
-- idem_webhook_receive, and idem_wechatpay_decrypt.
--
-- As in the C edition (src/webhook/), what the request holds (headers,
-- payload) never raises an error: anything missing, malformed, forged or
-- stale is false (or "rejected").  Only what the application configures
-- (scheme, secret, tolerance, ttl) raises errors, before the request is read.
--
-- The schemes whose signatures are RSA (alipay, unionpay, wechatpay, paypal) or
-- Ed25519 (standard/svix "whpk_" keys), and AES-GCM decryption, need
-- cryptography that pgcrypto does not have: they raise feature_not_supported
-- (0A000) naming the C edition, where the C edition would check the secret.
--
-- HMACs are compared as HMACs of themselves under a random key drawn for the
-- call (double HMAC): PL/pgSQL has no constant-time comparison, and the bytes
-- whose equality it tests in varying time are then unknown to the sender.
--
-- idem_webhook_verify and idem_wechatpay_decrypt read no table but are
-- SECURITY DEFINER too: the helpers they call live in schema idem, which a
-- role granted EXECUTE on them alone cannot reach.  Internals are idem.wh_*.

-- Raise the error e of the shared checks (10_input.sql): {sqlstate,
-- message, detail, hint}, detail and hint possibly NULL; true if e is NULL.
-- The raising helpers here are called in assignments, never by PERFORM
-- (which runs a query, whose error context then quotes the SQL statement).
CREATE OR REPLACE FUNCTION idem.wh_raise_if(e text[])
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF e IS NULL THEN
        RETURN true;
    ELSIF e[3] IS NULL AND e[4] IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2];
    ELSIF e[4] IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], DETAIL = e[3];
    ELSIF e[3] IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], HINT = e[4];
    END IF;
    RAISE EXCEPTION USING ERRCODE = e[1], MESSAGE = e[2], DETAIL = e[3], HINT = e[4];
END
$$;
REVOKE ALL ON FUNCTION idem.wh_raise_if(text[]) FROM PUBLIC;

-- An interval's months, days and time parts, in seconds, a month counting
-- as 30 days (as the C edition measures a tolerance).
CREATE OR REPLACE FUNCTION idem.wh_interval_secs(iv interval)
RETURNS numeric
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT (extract(year FROM iv) * 12 + extract(month FROM iv)) * 30 * 86400
           + extract(day FROM iv) * 86400
           + extract(epoch FROM iv - date_trunc('day', iv))
$$;
REVOKE ALL ON FUNCTION idem.wh_interval_secs(interval) FROM PUBLIC;

-- A tolerance in seconds (NULL: no time check); negative is an error,
-- whose hint says NULL skips the check when null_skips.
CREATE OR REPLACE FUNCTION idem.wh_tolerance(tolerance interval, null_skips boolean)
RETURNS numeric
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    secs numeric := idem.wh_interval_secs(tolerance);
BEGIN
    IF secs < 0 THEN
        IF null_skips THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = 'tolerance must not be negative',
                HINT = 'Use NULL to skip the timestamp check.';
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'tolerance must not be negative';
    END IF;
    RETURN secs;
END
$$;
REVOKE ALL ON FUNCTION idem.wh_tolerance(interval, boolean) FROM PUBLIC;

-- Record a delivery of (source, event_id), kept for ttl (checked): true the
-- first time, false for a duplicate.  The insert waits for an uncommitted
-- record of the same delivery and answers from how its transaction ended; a
-- committed live record is a duplicate at once, without a lock.  An expired
-- record is a delivery seen too long ago: renewed in place, under its lock.
CREATE OR REPLACE FUNCTION idem.wh_record(source text, event_id text, ttl interval)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    first boolean;
    at timestamptz := clock_timestamp();
BEGIN
    -- one reading of the clock per record, so that expires_at - received_at
    -- is ttl exactly, as in the C edition
    INSERT INTO idem.webhooks VALUES ($1, $2, at, at + $3)
    ON CONFLICT DO NOTHING
    RETURNING true INTO first;
    IF first THEN
        RETURN true;
    END IF;
    -- a duplicate: new again only if its record expired (a read, cheaper
    -- than an UPDATE that finds nothing); the UPDATE checks again
    PERFORM FROM idem.webhooks w WHERE w.event_id = $2 AND w.source = $1 AND w.expires_at <= at;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE idem.webhooks w SET received_at = at, expires_at = at + $3
    WHERE w.event_id = $2 AND w.source = $1 AND w.expires_at <= at
    RETURNING true INTO first;
    RETURN coalesce(first, false);
END
$$;
REVOKE ALL ON FUNCTION idem.wh_record(text, text, interval) FROM PUBLIC;

-- idem_webhook past its fast path, and its whole work on any call.  The
-- checks are written out here, the helpers called only to raise.
CREATE OR REPLACE FUNCTION idem.webhook_full(source text, event_id text, ttl interval)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    ok boolean;
BEGIN
    IF source IS NULL OR octet_length(source) > 255 OR event_id IS NULL OR event_id = ''
       OR octet_length(event_id) > 255 OR ttl IS NOT NULL
       OR current_setting('transaction_read_only') = 'on' THEN
        ok := idem.wh_raise_if(coalesce(idem.input_scope_error(source, 'source'),
                                       idem.input_key_error(event_id, 'event_id'),
                                       idem.input_interval_error(ttl, 'ttl'),
                                       idem.input_writable_error('idem_webhook()')));
    END IF;
    RETURN idem.wh_record(source, event_id, coalesce(ttl, idem.setting_interval('idem.webhook_ttl', interval '168 hours')));
END
$$;
REVOKE ALL ON FUNCTION idem.webhook_full(text, text, interval) FROM PUBLIC;

-- idem_webhook(source, event_id, ttl): true the first time (source,
-- event_id) is seen, in the caller's transaction; false for a duplicate.
-- Fast path (qualified, as idem_claim's in 30_claim.sql): good arguments,
-- idem.webhook_ttl at its default (unset, or '7d' as a server with the C
-- library shows it), a writable transaction; the record is then
-- idem.wh_record's, written out.  The rest is idem.webhook_full's.
CREATE OR REPLACE FUNCTION idem_webhook(source text, event_id text, ttl interval DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
AS $$
#variable_conflict use_variable
DECLARE
    first boolean;
    at pg_catalog.timestamptz;
BEGIN
    IF NOT (source IS NOT NULL AND event_id IS NOT NULL AND ttl IS NULL
            AND pg_catalog.octet_length(source) OPERATOR(pg_catalog.<=) 255
            AND pg_catalog.octet_length(event_id) OPERATOR(pg_catalog.>) 0
            AND pg_catalog.octet_length(event_id) OPERATOR(pg_catalog.<=) 255
            AND coalesce(pg_catalog.current_setting('idem.webhook_ttl', true), '')
                OPERATOR(pg_catalog.=) ANY ('{"",7d}'::pg_catalog.text[])
            AND pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off') THEN
        RETURN idem.webhook_full(source, event_id, ttl);
    END IF;
    at := pg_catalog.clock_timestamp();
    INSERT INTO idem.webhooks VALUES (source, event_id, at, at OPERATOR(pg_catalog.+) interval '168 hours')
    ON CONFLICT DO NOTHING
    RETURNING true INTO first;
    IF first THEN
        RETURN true;
    END IF;
    PERFORM FROM idem.webhooks w
      WHERE w.event_id OPERATOR(pg_catalog.=) idem_webhook.event_id
        AND w.source OPERATOR(pg_catalog.=) idem_webhook.source
        AND w.expires_at OPERATOR(pg_catalog.<=) at;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    UPDATE idem.webhooks w SET received_at = at, expires_at = at OPERATOR(pg_catalog.+) interval '168 hours'
     WHERE w.event_id OPERATOR(pg_catalog.=) idem_webhook.event_id
       AND w.source OPERATOR(pg_catalog.=) idem_webhook.source
       AND w.expires_at OPERATOR(pg_catalog.<=) at
    RETURNING true INTO first;
    RETURN coalesce(first, false);
END
$$;
REVOKE ALL ON FUNCTION idem_webhook(text, text, interval) FROM PUBLIC;

--
-- The schemes
--

-- The unknown-scheme and NULL-scheme errors; the scheme's name otherwise
CREATE OR REPLACE FUNCTION idem.wh_scheme(scheme text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF scheme IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'webhook signature scheme must not be null';
    END IF;
    IF scheme <> ALL (ARRAY['stripe', 'standard', 'svix', 'github', 'shopify', 'razorpay',
                            'checkout', 'paddle', 'adyen', 'adyen_platform', 'square', 'paystack',
                            'airwallex', 'alipay', 'alipay_v3', 'antom', 'unionpay', 'wechatpay', 'paypal',
                            'mercadopago']) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('unknown webhook signature scheme "%s"', scheme),
            HINT = 'The schemes are "stripe", "standard", "svix", "github", "shopify", "razorpay", "checkout", "paddle", "adyen", "adyen_platform", "square", "paystack", "airwallex", "alipay", "alipay_v3", "antom", "unionpay", "wechatpay", "paypal", "mercadopago".';
    END IF;
    RETURN scheme;
END
$$;
REVOKE ALL ON FUNCTION idem.wh_scheme(text) FROM PUBLIC;

-- The error of what only the C edition can do, for idem.wh_raise
CREATE OR REPLACE FUNCTION idem.wh_c_only(what text, why text)
RETURNS text[]
LANGUAGE sql IMMUTABLE
RETURN ARRAY['0A000', what || ' needs idem''s C edition', why,
             'idem_sql verifies the HMAC schemes only; install the extension idem where the server can load its library.'];
REVOKE ALL ON FUNCTION idem.wh_c_only(text, text) FROM PUBLIC;

-- The C edition's 22023 errors of a "paypal" secret that is not a JSON
-- object of the strings webhook_id, subject and roots: its shape only, the
-- certificates in roots are not read (idem_sql/DIFFERENCES.md)
CREATE OR REPLACE FUNCTION idem.wh_paypal_secret(secret text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    fmt constant text := 'A "paypal" secret is a JSON object of three strings: "webhook_id", the webhook''s ID; "subject", the common name of PayPal''s signing certificate; "roots", the certificates it must chain to, PEM.';
    j jsonb;
    m text;
BEGIN
    BEGIN
        j := secret::jsonb;
    EXCEPTION WHEN others THEN
        j := NULL;
    END;
    IF jsonb_typeof(j) IS DISTINCT FROM 'object'
       OR EXISTS (SELECT FROM jsonb_each(j) e(k, v)
                  WHERE k <> ALL (ARRAY['webhook_id', 'subject', 'roots'])
                     OR jsonb_typeof(v) <> 'string')
       OR EXISTS (SELECT FROM json_object_keys(secret::json) k GROUP BY k HAVING count(*) > 1) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'webhook secret is not a PayPal configuration', DETAIL = fmt,
            HINT = 'Check for a misspelt or missing member, or a PEM whose line breaks are not written \n.';
    END IF;
    FOREACH m IN ARRAY ARRAY['webhook_id', 'subject', 'roots'] LOOP
        IF NOT j ? m THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('webhook secret has no "%s"', m), DETAIL = fmt;
        END IF;
    END LOOP;
    IF j->>'webhook_id' !~ '^[A-Za-z0-9_-]+$' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'webhook secret''s "webhook_id" is not a webhook ID', DETAIL = fmt,
            HINT = 'Copy the webhook ID from the app''s page in PayPal''s developer dashboard.';
    END IF;
    IF j->>'subject' !~ '^[A-Za-z0-9.-]+$' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'webhook secret''s "subject" is not a host name', DETAIL = fmt,
            HINT = 'Give the common name alone, such as messageverificationcerts.paypal.com.';
    END IF;
    IF strpos(j->>'roots', '-----BEGIN CERTIFICATE-----') = 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'webhook secret''s "roots" are not certificates', DETAIL = fmt,
            HINT = '"roots" holds "CERTIFICATE" blocks in PEM, well formed, and nothing else.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION idem.wh_paypal_secret(text) FROM PUBLIC;

-- The HMAC key of a secret (not NULL, checked) of a known scheme, as its
-- sender keys the HMAC; an error, before any request is read, for a
-- secret that cannot be a key of the scheme or a scheme SQL cannot verify.
CREATE OR REPLACE FUNCTION idem.wh_key(scheme text, secret text)
RETURNS bytea
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    s text := secret;
    is_pk boolean := false;
    k bytea;
    ok boolean;
BEGIN
    IF secret IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'webhook secret must not be null';
    END IF;
    IF secret = '' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'webhook secret must not be empty';
    END IF;
    CASE scheme
    WHEN 'standard', 'svix' THEN
        IF starts_with(s, 'whsec_') THEN
            s := substr(s, 7);
        ELSIF starts_with(s, 'whpk_') THEN
            s := substr(s, 6);
            is_pk := true;
        END IF;
        k := idem.wh_decode(s, 'base64');
        IF k IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = 'webhook secret is not valid base64',
                DETAIL = format('A secret of the "%s" scheme is "whsec_" followed by the standard base64 (with padding) of the key, or "whpk_" followed by that of an Ed25519 public key.', scheme),
                HINT = 'Check for stray whitespace or a truncated secret.';
        END IF;
        IF is_pk THEN
            IF length(k) <> 32 THEN
                RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                    MESSAGE = 'webhook public key is not an Ed25519 key',
                    DETAIL = format('A "whpk_" secret of the "%s" scheme is the base64 of the 32 bytes of an Ed25519 public key; this one has %s.', scheme, length(k));
            END IF;
            ok := idem.wh_raise_if(idem.wh_c_only(format('scheme "%s" with a "whpk_" key', scheme),
                                    'Its "v1a" signatures are Ed25519, which pgcrypto cannot verify.'));
        END IF;
        RETURN k;
    WHEN 'adyen', 'adyen_platform' THEN
        IF s !~ '^([0-9a-fA-F]{2})+$' THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = 'webhook secret is not a hexadecimal key',
                DETAIL = format('An HMAC key of the "%s" scheme is an even number of hexadecimal digits, as Adyen''s Customer Area shows it.', scheme),
                HINT = 'Check for stray whitespace or a truncated key.';
        END IF;
        RETURN decode(s, 'hex');
    WHEN 'square' THEN
        -- the notification URL, one space, the signature key: kept whole,
        -- idem.wh_check splits it at its last space
        IF s !~ '^https?://[^ ]* [^ ]+$' THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = 'webhook secret is not a notification URL and a signature key',
                DETAIL = 'A secret of the "square" scheme is the subscription''s notification URL, exactly as set in Square''s Developer Console, a space, then its signature key.',
                HINT = 'Square signs the URL with the body: a URL that differs in any character fails every delivery.';
        END IF;
        RETURN idem.wh_bytes(secret);
    WHEN 'alipay' THEN
        ok := idem.wh_raise_if(idem.wh_c_only('scheme "alipay"', 'Alipay signs its notifications with RSA (SHA256withRSA), which pgcrypto cannot verify.'));
    WHEN 'alipay_v3' THEN
        ok := idem.wh_raise_if(idem.wh_c_only('scheme "alipay_v3"', 'Alipay signs its v3 messages with RSA (SHA256withRSA), which pgcrypto cannot verify.'));
    WHEN 'antom' THEN
        ok := idem.wh_raise_if(idem.wh_c_only('scheme "antom"', 'Antom signs its notifications with RSA (SHA256withRSA), which pgcrypto cannot verify.'));
    WHEN 'unionpay' THEN
        ok := idem.wh_raise_if(idem.wh_c_only('scheme "unionpay"', 'UnionPay signs its notifications with RSA (SHA256withRSA) by certificates checked against a chain, which pgcrypto cannot verify.'));
    WHEN 'wechatpay' THEN
        ok := idem.wh_raise_if(idem.wh_c_only('scheme "wechatpay"', 'WeChat Pay signs its notifications with RSA (SHA256withRSA), which pgcrypto cannot verify.'));
    WHEN 'paypal' THEN
        PERFORM idem.wh_paypal_secret(secret);
        ok := idem.wh_raise_if(idem.wh_c_only('scheme "paypal"', 'PayPal signs its webhooks with RSA (SHA256withRSA) by certificates checked against a chain, which pgcrypto cannot verify.'));
    ELSE
        -- stripe, paddle, github, shopify, razorpay, checkout, paystack,
        -- airwallex, mercadopago: the text as given
        RETURN idem.wh_bytes(secret);
    END CASE;
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION idem.wh_key(text, text) FROM PUBLIC;

-- Does the request verify under key (from idem.wh_key) in the scheme?
-- tol: seconds, NULL for no time check.  Never an error.
CREATE OR REPLACE FUNCTION idem.wh_check(scheme text, key bytea, payload text, headers jsonb, tol numeric)
RETURNS boolean
LANGUAGE plpgsql VOLATILE
AS $$
DECLARE
    h text;
    hdr text;
    sep text;
    ts_name text;
    mac_name text;
    joiner text;
    prefix text;
    ts text;
    nts int := 0;
    nmacs int := 0;
    secs numeric;
    id text;
    given bytea[] := '{}';
    f text[];
    e text;
    pos int;
    name text;
BEGIN
    IF payload IS NULL OR headers IS NULL THEN
        RETURN false;
    END IF;
    CASE scheme
    WHEN 'stripe', 'paddle' THEN
        -- "t=<unix>,v1=<hex>..." over "<t>.<payload>"; Paddle: "ts=...;h1=..." over "<ts>:<payload>"
        IF scheme = 'stripe' THEN
            hdr := 'stripe-signature'; sep := ','; ts_name := 't'; mac_name := 'v1'; joiner := '.';
        ELSE
            hdr := 'paddle-signature'; sep := ';'; ts_name := 'ts'; mac_name := 'h1'; joiner := ':';
        END IF;
        h := idem.wh_header(headers, hdr);
        IF h IS NULL THEN
            RETURN false;
        END IF;
        -- name=value elements: one timestamp, one or more MACs, others ignored
        FOREACH e IN ARRAY string_to_array(h, sep) LOOP
            pos := strpos(e, '=');
            CONTINUE WHEN pos = 0;
            name := btrim(left(e, pos - 1), E' \t');
            IF name = ts_name THEN
                nts := nts + 1;
                ts := btrim(substr(e, pos + 1), E' \t');
            ELSIF name = mac_name THEN
                nmacs := nmacs + 1;
                given := given || idem.wh_decode(btrim(substr(e, pos + 1), E' \t'), 'hex-mac');
            END IF;
        END LOOP;
        secs := idem.wh_unix_secs(ts);
        IF nts <> 1 OR nmacs = 0 OR secs IS NULL OR NOT idem.wh_fresh(secs, tol) THEN
            RETURN false;
        END IF;
        RETURN idem.wh_mac_match(
            idem.hmac_sha256(idem.wh_bytes(ts || joiner) || idem.wh_bytes(payload), key), given);
    WHEN 'standard', 'svix' THEN
        -- <p>-id, <p>-timestamp, <p>-signature: "v1,<base64>" ... over "<id>.<ts>.<payload>"
        hdr := CASE scheme WHEN 'standard' THEN 'webhook' ELSE 'svix' END;
        id := idem.wh_header(headers, hdr || '-id');
        ts := idem.wh_header(headers, hdr || '-timestamp');
        h := idem.wh_header(headers, hdr || '-signature');
        IF id IS NULL OR id = '' OR ts IS NULL OR h IS NULL THEN
            RETURN false;
        END IF;
        secs := idem.wh_unix_secs(ts);
        IF secs IS NULL THEN
            RETURN false;
        END IF;
        -- version,signature elements: the v1 ones
        FOREACH e IN ARRAY string_to_array(h, ' ') LOOP
            pos := strpos(e, ',');
            CONTINUE WHEN pos = 0 OR btrim(left(e, pos - 1), E' \t') <> 'v1';
            nmacs := nmacs + 1;
            given := given || idem.wh_decode(btrim(substr(e, pos + 1), E' \t'), 'base64-mac');
        END LOOP;
        IF nmacs = 0 OR NOT idem.wh_fresh(secs, tol) THEN
            RETURN false;
        END IF;
        RETURN idem.wh_mac_match(
            idem.hmac_sha256(idem.wh_bytes(id || '.' || ts || '.') || idem.wh_bytes(payload), key), given);
    WHEN 'github', 'shopify', 'razorpay', 'checkout', 'adyen_platform', 'square', 'paystack', 'airwallex' THEN
        -- one header: a fixed prefix, then the MAC of the body (Square's:
        -- of the notification URL, then the body; Airwallex's: of
        -- x-timestamp, unix milliseconds, then the body; Paystack's an
        -- HMAC-SHA512)
        hdr := CASE scheme WHEN 'github' THEN 'x-hub-signature-256' WHEN 'shopify' THEN 'x-shopify-hmac-sha256'
                           WHEN 'razorpay' THEN 'x-razorpay-signature' WHEN 'checkout' THEN 'cko-signature'
                           WHEN 'square' THEN 'x-square-hmacsha256-signature' WHEN 'paystack' THEN 'x-paystack-signature'
                           WHEN 'airwallex' THEN 'x-signature' ELSE 'hmacsignature' END;
        prefix := CASE scheme WHEN 'github' THEN 'sha256=' ELSE '' END;
        IF scheme = 'airwallex' THEN
            ts := idem.wh_header(headers, 'x-timestamp');
            secs := idem.wh_unix_secs(left(ts, -3));
            IF length(ts) <= 3 OR right(ts, 3) !~ '^[0-9]{3}$' OR secs IS NULL OR NOT idem.wh_fresh(secs, tol) THEN
                RETURN false;
            END IF;
        END IF;
        h := idem.wh_header(headers, hdr);
        IF h IS NULL OR NOT starts_with(h, prefix) THEN
            RETURN false;
        END IF;
        h := substr(h, length(prefix) + 1);
        given := ARRAY[CASE WHEN scheme IN ('shopify', 'adyen_platform', 'square') THEN idem.wh_decode(h, 'base64-mac')
                            WHEN scheme = 'paystack' THEN idem.wh_decode(h, 'hex-mac512')
                            ELSE idem.wh_decode(h, 'hex-mac') END];
        IF given[1] IS NULL THEN
            RETURN false;
        END IF;
        IF scheme = 'paystack' THEN
            RETURN idem.wh_mac_match(idem.hmac_sha512(idem.wh_bytes(payload), key), given);
        ELSIF scheme = 'airwallex' THEN
            RETURN idem.wh_mac_match(idem.hmac_sha256(idem.wh_bytes(ts) || idem.wh_bytes(payload), key), given);
        END IF;
        IF scheme = 'square' THEN
            -- key holds the secret: "<url> <signature key>"
            f := regexp_match(convert_from(key, getdatabaseencoding()), '^(.*) ([^ ]+)$');
            RETURN idem.wh_mac_match(
                idem.hmac_sha256(idem.wh_bytes(f[1]) || idem.wh_bytes(payload), idem.wh_bytes(f[2])), given);
        END IF;
        RETURN idem.wh_mac_match(idem.hmac_sha256(idem.wh_bytes(payload), key), given);
    WHEN 'mercadopago' THEN
        -- x-signature "ts=<unix>,v1=<hex>" over "id:<data.id>;request-id:
        -- <x-request-id>;ts:<ts>;": data.id the body's, A-Z lowercased; no
        -- request-id part without one; ts in seconds, or ms from 10^11 on
        h := idem.wh_header(headers, 'x-signature');
        id := idem.wh_json_path(payload, ARRAY['data', 'id'], true);
        IF h IS NULL OR id IS NULL OR id = '' THEN
            RETURN false;
        END IF;
        FOREACH e IN ARRAY string_to_array(h, ',') LOOP
            pos := strpos(e, '=');
            CONTINUE WHEN pos = 0;
            name := btrim(left(e, pos - 1), E' \t');
            IF name = 'ts' THEN
                nts := nts + 1;
                ts := btrim(substr(e, pos + 1), E' \t');
            ELSIF name = 'v1' THEN
                nmacs := nmacs + 1;
                given := ARRAY[idem.wh_decode(btrim(substr(e, pos + 1), E' \t'), 'hex-mac')];
            END IF;
        END LOOP;
        secs := CASE WHEN length(ltrim(ts, '0')) >= 12 AND right(ts, 3) ~ '^[0-9]{3}$'
                     THEN idem.wh_unix_secs(left(ts, -3)) ELSE idem.wh_unix_secs(ts) END;
        IF nts <> 1 OR nmacs <> 1 OR secs IS NULL OR NOT idem.wh_fresh(secs, tol) THEN
            RETURN false;
        END IF;
        hdr := idem.wh_header(headers, 'x-request-id');
        RETURN idem.wh_mac_match(idem.hmac_sha256(idem.wh_bytes(
            'id:' || translate(id, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') || ';'
            || CASE WHEN hdr <> '' THEN 'request-id:' || hdr || ';' ELSE '' END || 'ts:' || ts || ';'), key), given);
    WHEN 'adyen' THEN
        -- the notification item signs eight of its fields; headers unread
        f := idem.wh_adyen_item(payload);
        IF f IS NULL THEN
            RETURN false;
        END IF;
        given := ARRAY[idem.wh_decode(f[9], 'base64-mac')];
        IF given[1] IS NULL THEN
            RETURN false;
        END IF;
        RETURN idem.wh_mac_match(
            idem.hmac_sha256(idem.wh_bytes(array_to_string(f[1:8], ':', '')), key), given);
    ELSE
        RETURN false;
    END CASE;
END
$$;
REVOKE ALL ON FUNCTION idem.wh_check(text, bytea, text, jsonb, numeric) FROM PUBLIC;

-- The event id of a verified request, where the scheme puts it; NULL if it
-- is missing, empty or longer than 255 bytes
CREATE OR REPLACE FUNCTION idem.wh_event_id(scheme text, payload text, headers jsonb)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    id text;
    f text[];
BEGIN
    CASE scheme
    WHEN 'stripe', 'checkout', 'wechatpay', 'paypal' THEN
        id := idem.wh_json_member(payload, 'id');
    WHEN 'paddle' THEN
        id := idem.wh_json_member(payload, 'event_id');
    WHEN 'standard' THEN
        id := idem.wh_header(headers, 'webhook-id');
    WHEN 'svix' THEN
        id := idem.wh_header(headers, 'svix-id');
    WHEN 'github' THEN
        id := idem.wh_header(headers, 'X-GitHub-Delivery');
    WHEN 'shopify' THEN
        id := idem.wh_header(headers, 'X-Shopify-Webhook-Id');
    WHEN 'razorpay' THEN
        id := idem.wh_header(headers, 'X-Razorpay-Event-Id');
    WHEN 'adyen' THEN
        f := idem.wh_adyen_item(payload);
        IF f[1] <> '' AND f[7] <> '' AND f[8] <> '' THEN
            id := f[1] || ':' || f[7] || ':' || f[8];
        END IF;
    WHEN 'adyen_platform' THEN
        -- these webhooks carry no event id: a retry resends the same body
        id := encode(sha256(idem.wh_bytes(payload)), 'hex');
    WHEN 'square' THEN
        id := idem.wh_json_member(payload, 'event_id');
    WHEN 'paystack' THEN
        -- no event id either: a retry resends the same body
        id := encode(sha256(idem.wh_bytes(payload)), 'hex');
    WHEN 'airwallex' THEN
        id := idem.wh_json_member(payload, 'id');
    WHEN 'mercadopago' THEN
        -- a string or a number: not signed
        id := idem.wh_json_path(payload, ARRAY['id'], true);
    ELSE
        id := NULL;
    END CASE;
    IF id = '' OR octet_length(id) > 255 THEN
        RETURN NULL;
    END IF;
    RETURN id;
END
$$;
REVOKE ALL ON FUNCTION idem.wh_event_id(text, text, jsonb) FROM PUBLIC;

-- idem_webhook_verify(scheme, secret, payload, headers, tolerance): true
-- when the headers carry a valid, fresh signature of payload under secret.
-- Configuration errors first, before the request is read.
CREATE OR REPLACE FUNCTION idem_webhook_verify(scheme text, secret text, payload text,
                                               headers jsonb,
                                               tolerance interval DEFAULT '5 minutes')
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    k bytea;
    tol numeric;
BEGIN
    scheme := idem.wh_scheme(scheme);
    IF secret IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'webhook secret must not be null';
    END IF;
    IF secret = '' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'webhook secret must not be empty';
    END IF;
    IF tolerance IS NOT NULL THEN
        tol := idem.wh_tolerance(tolerance, true);
    END IF;
    k := idem.wh_key(scheme, secret);
    RETURN idem.wh_check(scheme, k, payload, headers, tol);
END
$$;
REVOKE ALL ON FUNCTION idem_webhook_verify(text, text, text, jsonb, interval) FROM PUBLIC;

--
-- Webhook sources
--

-- idem_webhook_source_set(source, scheme, secrets, tolerance, allowed_ips,
-- ttl): create or replace the configuration of a source; every secret is
-- checked to be a key of the scheme here, not at the first delivery.
CREATE OR REPLACE FUNCTION idem_webhook_source_set(source text, scheme text, secrets text[],
                                                   tolerance interval DEFAULT '5 minutes',
                                                   allowed_ips cidr[] DEFAULT NULL,
                                                   ttl interval DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    s text;
    k bytea;
    ok boolean;
BEGIN
    ok := idem.wh_raise_if(idem.input_scope_error(source, 'source'));
    scheme := idem.wh_scheme(scheme);
    IF secrets IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'secrets must not be null';
    END IF;
    IF array_ndims(secrets) > 1 THEN
        secrets := ARRAY(SELECT unnest(secrets));
    END IF;
    IF array_position(secrets, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'secrets must not contain null';
    END IF;
    IF cardinality(secrets) = 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'secrets must not be empty';
    END IF;
    IF tolerance IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'tolerance must not be null';
    END IF;
    ok := idem.wh_tolerance(tolerance, false) >= 0;
    IF allowed_ips IS NOT NULL THEN
        IF array_position(allowed_ips, NULL) IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'allowed_ips must not contain null';
        END IF;
        IF cardinality(allowed_ips) = 0 THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'allowed_ips must not be empty';
        END IF;
    END IF;
    ok := idem.wh_raise_if(idem.input_interval_error(ttl, 'ttl'));
    FOREACH s IN ARRAY secrets LOOP
        IF s = '' THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'webhook secret must not be empty';
        END IF;
        k := idem.wh_key(scheme, s);
    END LOOP;
    ok := idem.wh_raise_if(idem.input_writable_error('idem_webhook_source_set()'));
    INSERT INTO idem.webhook_sources AS w (source, scheme, secrets, tolerance, allowed_ips, ttl, updated_at)
    VALUES (source, scheme, secrets, tolerance, allowed_ips, ttl, transaction_timestamp())
    ON CONFLICT ON CONSTRAINT webhook_sources_pkey DO UPDATE
        SET scheme = excluded.scheme, secrets = excluded.secrets, tolerance = excluded.tolerance,
            allowed_ips = excluded.allowed_ips, ttl = excluded.ttl, updated_at = excluded.updated_at;
END
$$;
REVOKE ALL ON FUNCTION idem_webhook_source_set(text, text, text[], interval, cidr[], interval) FROM PUBLIC;

-- idem_webhook_source_drop(source): true if there was such a source
CREATE OR REPLACE FUNCTION idem_webhook_source_drop(source text)
RETURNS boolean
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    ok boolean;
BEGIN
    ok := idem.wh_raise_if(coalesce(idem.input_scope_error(source, 'source'),
                                   idem.input_writable_error('idem_webhook_source_drop()')));
    DELETE FROM idem.webhook_sources w WHERE w.source = idem_webhook_source_drop.source;
    RETURN FOUND;
END
$$;
REVOKE ALL ON FUNCTION idem_webhook_source_drop(text) FROM PUBLIC;

-- The sources' configurations, never their secrets
CREATE OR REPLACE VIEW idem_webhook_sources AS
    SELECT source, scheme, pg_catalog.cardinality(secrets) AS secret_count,
           tolerance, allowed_ips, ttl, updated_at
    FROM idem.webhook_sources;
REVOKE ALL ON idem_webhook_sources FROM PUBLIC;

-- idem_wechatpay_decrypt(api_v3_key, resource): the key is checked as the C
-- edition checks it; the decryption (AES-256-GCM) needs the C edition.
CREATE OR REPLACE FUNCTION idem_wechatpay_decrypt(api_v3_key text, resource jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    ok boolean;
BEGIN
    IF api_v3_key IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'api_v3_key must not be null';
    END IF;
    IF octet_length(api_v3_key) <> 32 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'api_v3_key must be 32 bytes',
            DETAIL = format('The key given is %s bytes long.', octet_length(api_v3_key)),
            HINT = 'The APIv3 key is the 32-character key set in the merchant platform, not the merchant''s private key, certificate or APIv2 key.';
    END IF;
    IF resource IS NULL THEN
        RETURN NULL;
    END IF;
    ok := idem.wh_raise_if(idem.wh_c_only('idem_wechatpay_decrypt',
                            'WeChat Pay encrypts its resources with AES-256-GCM, which pgcrypto does not have.'));
    RETURN NULL;
END
$$;
REVOKE ALL ON FUNCTION idem_wechatpay_decrypt(text, jsonb) FROM PUBLIC;
