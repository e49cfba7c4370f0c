-- Fingerprints and deterministic keys: idem_canonical, idem_fingerprint,
-- idem_key and idem_payment_key, the same bytes as the C edition's
-- (src/fingerprint.c, src/payment_key.c, src/currency.c; the formats are in
-- doc/fingerprints.md).  Canonical JSON is jsonb's own text (its key order,
-- its string escaping) without whitespace and with numbers written without
-- insignificant trailing zeros; hashes are SHA-256 over the UTF-8 bytes of
-- the text, whatever the database's encoding.  They call nothing in
-- schema idem: a role granted them has no right there.

-- idem_canonical(request jsonb): compact JSON that other languages can
-- reproduce byte for byte (doc/fingerprints.md).  jsonb's own text already
-- has the canonical key order and string escaping (the C edition writes
-- strings with the same escape_json) and is written without recursion,
-- however deep the nesting.  Outside its string literals, the space after
-- each separator (", ", ": ") goes, and the trailing fractional zeros of
-- each number with the decimal point left bare (numeric's text has no
-- exponent: 100.00 -> 100, 1.50 -> 1.5).  When no string literal holds
-- ", ", ": " or what the numbers' expression would change (a decimal
-- point, digits, a last 0: tested with a match that needs no captures, so
-- it is quick), that is plain replace() and a regular expression on the
-- numbers; otherwise one pass keeps each string literal, matched whole
-- from its opening quote, as it is and rewrites the rest, ten times slower.
CREATE OR REPLACE FUNCTION idem_canonical(request jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT CASE
        WHEN t ~ '^(?:[^"]|"(?:[^"\\]|\\.)*")*"(?:[^"\\]|\\.)*(?:[,:] |\.[0-9]*0(?![0-9]))' THEN
            regexp_replace(t, '("(?:[^"\\]|\\.)*")|([,:]) |(\.[0-9]*[1-9])0+(?![0-9])|\.0+(?![0-9])',
                           '\1\2\3', 'g')
        ELSE
            regexp_replace(replace(replace(t, ', ', ','), ': ', ':'),
                           '(\.[0-9]*[1-9])0+(?![0-9])|\.0+(?![0-9])', '\1', 'g')
    END
    FROM (SELECT request::text AS t) s
$$;
REVOKE ALL ON FUNCTION idem_canonical(jsonb) FROM PUBLIC;

-- idem_fingerprint(request jsonb): SHA-256 of the canonical text as UTF-8,
-- made as idem_canonical makes it (a role may be granted this one alone).
CREATE OR REPLACE FUNCTION idem_fingerprint(request jsonb)
RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = pg_catalog, idem, pg_temp
AS $$
    SELECT sha256(convert_to(CASE
        WHEN t ~ '^(?:[^"]|"(?:[^"\\]|\\.)*")*"(?:[^"\\]|\\.)*(?:[,:] |\.[0-9]*0(?![0-9]))' THEN
            regexp_replace(t, '("(?:[^"\\]|\\.)*")|([,:]) |(\.[0-9]*[1-9])0+(?![0-9])|\.0+(?![0-9])',
                           '\1\2\3', 'g')
        ELSE
            regexp_replace(replace(replace(t, ', ', ','), ': ', ':'),
                           '(\.[0-9]*[1-9])0+(?![0-9])|\.0+(?![0-9])', '\1', 'g')
    END, 'UTF8'))
    FROM (SELECT request::text AS t) s
$$;
REVOKE ALL ON FUNCTION idem_fingerprint(jsonb) FROM PUBLIC;

-- idem_key(VARIADIC parts text[]): a deterministic key of its parts, the
-- SHA-256 of the netstrings "<bytes>:<part>," of their UTF-8 forms, as 64
-- lowercase hex digits.
CREATE OR REPLACE FUNCTION idem_key(VARIADIC parts text[])
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    p text;
    b bytea;
    netstrings bytea := '';
    i integer := 0;
BEGIN
    IF array_ndims(parts) = 1 THEN
        FOREACH p IN ARRAY parts LOOP
            i := i + 1;
            -- a NULL part has no bytes to encode; skipping it would be ambiguous
            IF p IS NULL THEN
                RAISE EXCEPTION USING ERRCODE = '22004',
                    MESSAGE = format('part %s of the key must not be null', i);
            END IF;
            b := convert_to(p, 'UTF8');
            netstrings := netstrings || convert_to(octet_length(b) || ':', 'UTF8') || b || '\x2c'::bytea;
        END LOOP;
        RETURN encode(sha256(netstrings), 'hex');
    ELSIF parts IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'parts must not be null';
    ELSIF array_ndims(parts) > 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'parts must be a one-dimensional array',
            DETAIL = format('The array has %s dimensions.', array_ndims(parts));
    END IF;
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'parts must not be empty',
        DETAIL = 'A key is made of at least one part.';
END
$$;
REVOKE ALL ON FUNCTION idem_key(text[]) FROM PUBLIC;

-- idem_payment_key(...): 'PAY_IDEM_' and the key of the payment's fields,
-- each in one written form: the amount with exactly the currency's minor
-- units (never rounded), the currency upper-cased, the date as YYYY-MM-DD.
-- The currencies are ISO 4217's active codes with their minor units (-1:
-- none), as src/currency.c lists them; change both together.
CREATE OR REPLACE FUNCTION idem_payment_key(merchant_id text, merchant_order_id text,
                                            amount numeric, currency text,
                                            request_date date DEFAULT current_date)
RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, idem, pg_temp
AS $$
DECLARE
    code text;
    minor integer;
    rounded numeric;
    part text;
    b bytea;
    netstrings bytea := '';
BEGIN
    -- NULL, empty and at most 255 bytes, as for every key
    IF merchant_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'merchant_id must not be null';
    ELSIF merchant_id = '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'merchant_id must not be empty';
    ELSIF octet_length(merchant_id) > 255 THEN
        RAISE EXCEPTION USING ERRCODE = '22001', MESSAGE = 'merchant_id is too long',
            DETAIL = format('It is %s bytes; the limit is 255.', octet_length(merchant_id));
    ELSIF merchant_order_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'merchant_order_id must not be null';
    ELSIF merchant_order_id = '' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'merchant_order_id must not be empty';
    ELSIF char_length(merchant_order_id) > 64 THEN
        RAISE EXCEPTION USING ERRCODE = '22001', MESSAGE = 'merchant_order_id is too long',
            DETAIL = format('It is %s characters; the limit is 64.', char_length(merchant_order_id));
    ELSIF num_nulls(amount, currency, request_date) > 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22004',
            MESSAGE = CASE WHEN amount IS NULL THEN 'amount'
                           WHEN currency IS NULL THEN 'currency'
                           ELSE 'request_date' END || ' must not be null';
    END IF;

    -- the currency first: it decides how the amount is written.  ASCII
    -- only: a locale's idea of upper case must not change the key.
    code := translate(currency, 'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ');
    IF octet_length(code) = 3 THEN
        minor := ('{
        "AED":2,"AFN":2,"ALL":2,"AMD":2,"AOA":2,"ARS":2,"AUD":2,"AWG":2,"AZN":2,
        "BAM":2,"BBD":2,"BDT":2,"BHD":3,"BIF":0,"BMD":2,"BND":2,"BOB":2,"BOV":2,
        "BRL":2,"BSD":2,"BTN":2,"BWP":2,"BYN":2,"BZD":2,"CAD":2,"CDF":2,"CHE":2,
        "CHF":2,"CHW":2,"CLF":4,"CLP":0,"CNY":2,"COP":2,"COU":2,"CRC":2,"CUP":2,
        "CVE":2,"CZK":2,"DJF":0,"DKK":2,"DOP":2,"DZD":2,"EGP":2,"ERN":2,"ETB":2,
        "EUR":2,"FJD":2,"FKP":2,"GBP":2,"GEL":2,"GHS":2,"GIP":2,"GMD":2,"GNF":0,
        "GTQ":2,"GYD":2,"HKD":2,"HNL":2,"HTG":2,"HUF":2,"IDR":2,"ILS":2,"INR":2,
        "IQD":3,"IRR":2,"ISK":0,"JMD":2,"JOD":3,"JPY":0,"KES":2,"KGS":2,"KHR":2,
        "KMF":0,"KPW":2,"KRW":0,"KWD":3,"KYD":2,"KZT":2,"LAK":2,"LBP":2,"LKR":2,
        "LRD":2,"LSL":2,"LYD":3,"MAD":2,"MDL":2,"MGA":2,"MKD":2,"MMK":2,"MNT":2,
        "MOP":2,"MRU":2,"MUR":2,"MVR":2,"MWK":2,"MXN":2,"MXV":2,"MYR":2,"MZN":2,
        "NAD":2,"NGN":2,"NIO":2,"NOK":2,"NPR":2,"NZD":2,"OMR":3,"PAB":2,"PEN":2,
        "PGK":2,"PHP":2,"PKR":2,"PLN":2,"PYG":0,"QAR":2,"RON":2,"RSD":2,"RUB":2,
        "RWF":0,"SAR":2,"SBD":2,"SCR":2,"SDG":2,"SEK":2,"SGD":2,"SHP":2,"SLE":2,
        "SOS":2,"SRD":2,"SSP":2,"STN":2,"SVC":2,"SYP":2,"SZL":2,"THB":2,"TJS":2,
        "TMT":2,"TND":3,"TOP":2,"TRY":2,"TTD":2,"TWD":2,"TZS":2,"UAH":2,"UGX":0,
        "USD":2,"USN":2,"UYI":0,"UYU":2,"UYW":4,"UZS":2,"VED":2,"VES":2,"VND":0,
        "VUV":0,"WST":2,"XAD":-1,"XAF":0,"XAG":-1,"XAU":-1,"XBA":-1,"XBB":-1,
        "XBC":-1,"XBD":-1,"XCD":2,"XCG":2,"XDR":-1,"XOF":0,"XPD":-1,"XPF":0,
        "XPT":-1,"XSU":-1,"XTS":-1,"XUA":-1,"XXX":-1,"YER":2,"ZAR":2,"ZMW":2,
        "ZWG":2
        }'::jsonb ->> code)::integer;
    END IF;
    IF minor IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('currency "%s" is not an active ISO 4217 code', code),
            HINT = 'Use a three-letter code such as USD, EUR or JPY.';
    ELSIF minor < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('currency "%s" cannot be used for a payment', code),
            DETAIL = 'ISO 4217 gives it no minor unit (precious metals, units of account and testing codes have none).';
    END IF;

    -- the amount with exactly the currency's minor units: USD 100 is
    -- "100.00", JPY 100.00 is "100", KWD 1.5 is "1.500"
    IF amount = 'NaN' THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'amount must be a number',
            DETAIL = 'NaN is not an amount.';
    ELSIF amount <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22003', MESSAGE = 'amount must be greater than zero';
    ELSIF amount > 999999999.99 THEN
        RAISE EXCEPTION USING ERRCODE = '22003', MESSAGE = 'amount is too large',
            DETAIL = 'The largest amount is 999999999.99.';
    END IF;
    -- rounding sets the scale; if it also changed the value, the amount had
    -- a non-zero digit the currency cannot express
    rounded := round(amount, minor);
    IF rounded <> amount THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = format('amount has more decimal places than %s allows', code),
            DETAIL = format('%s has %s decimal place%s; the amount is %s.',
                            code, minor, CASE WHEN minor = 1 THEN '' ELSE 's' END, amount);
    END IF;

    -- the date as YYYY-MM-DD, whatever DateStyle says, in four digits AD
    IF NOT isfinite(request_date) THEN
        RAISE EXCEPTION USING ERRCODE = '22008', MESSAGE = 'request_date must be a finite date';
    ELSIF request_date < '0001-01-01' OR request_date > '9999-12-31' THEN
        RAISE EXCEPTION USING ERRCODE = '22008', MESSAGE = 'request_date is out of range',
            DETAIL = 'The year must be between 1 and 9999.';
    END IF;

    -- the key of the parts, as idem_key makes it
    FOREACH part IN ARRAY ARRAY[merchant_id, merchant_order_id, rounded::text, code,
                                to_char(request_date, 'YYYY-MM-DD')] LOOP
        b := convert_to(part, 'UTF8');
        netstrings := netstrings || convert_to(octet_length(b) || ':', 'UTF8') || b || '\x2c'::bytea;
    END LOOP;
    RETURN 'PAY_IDEM_' || encode(sha256(netstrings), 'hex');
END
$$;
REVOKE ALL ON FUNCTION idem_payment_key(text, text, numeric, text, date) FROM PUBLIC;
