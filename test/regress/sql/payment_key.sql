SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
RESET client_min_messages;

-- err(call) runs "SELECT <call>" and returns "SQLSTATE: message" instead of
-- failing, so each error case below shows its code on one line.
CREATE FUNCTION pg_temp.err(call text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'SELECT ' || call;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

------------------------------------------------------------------------
-- Normal cases
------------------------------------------------------------------------

-- Pinned full keys, computed outside PostgreSQL:
--   printf '2:m1,2:o1,6:100.00,3:USD,10:2026-01-02,' | sha256sum
--   printf '2:m1,2:o1,3:100,3:JPY,10:2026-01-02,'    | sha256sum
--   printf '2:m1,2:o1,5:1.500,3:KWD,10:2026-01-02,'  | sha256sum
--   printf '2:m1,2:o1,6:1.5000,3:CLF,10:2026-01-02,' | sha256sum
--   printf '12:merchant-001,9:order-042,7:1234.50,3:EUR,10:2026-03-15,' | sha256sum
SELECT idem_payment_key('m1', 'o1', 100, 'USD', '2026-01-02') AS usd_100;
SELECT idem_payment_key('m1', 'o1', 100, 'JPY', '2026-01-02') AS jpy_100;
SELECT idem_payment_key('m1', 'o1', 1.5, 'KWD', '2026-01-02') AS kwd_1_5;
SELECT idem_payment_key('m1', 'o1', 1.5, 'CLF', '2026-01-02') AS clf_1_5;
SELECT idem_payment_key('merchant-001', 'order-042', 1234.5, 'eur', '2026-03-15') AS eur_1234_5;

-- The key is PAY_IDEM_ + idem_key of the normalised fields: the amount
-- written to the currency's minor units (USD 100 -> 100.00, JPY 100.00 ->
-- 100, KWD 1.5 -> 1.500, CLF 1.5 -> 1.5000), the currency upper-cased, the
-- date as YYYY-MM-DD.
SELECT idem_payment_key('m1', 'o1', 100, 'usd', '2026-01-02')
         = 'PAY_IDEM_' || idem_key('m1', 'o1', '100.00', 'USD', '2026-01-02') AS usd,
       idem_payment_key('m1', 'o1', 100.00, 'JPY', '2026-01-02')
         = 'PAY_IDEM_' || idem_key('m1', 'o1', '100', 'JPY', '2026-01-02') AS jpy,
       idem_payment_key('m1', 'o1', 1.5, 'KWD', '2026-01-02')
         = 'PAY_IDEM_' || idem_key('m1', 'o1', '1.500', 'KWD', '2026-01-02') AS kwd,
       idem_payment_key('m1', 'o1', 0.0001, 'UYW', '2026-01-02')
         = 'PAY_IDEM_' || idem_key('m1', 'o1', '0.0001', 'UYW', '2026-01-02') AS uyw;

-- Same payment, same key: currency case, trailing zeros of the amount.
SELECT count(DISTINCT k) AS distinct_keys
FROM (VALUES (idem_payment_key('m1', 'o1', 100, 'usd', '2026-01-02')),
             (idem_payment_key('m1', 'o1', 100, 'USD', '2026-01-02')),
             (idem_payment_key('m1', 'o1', 100.00, 'Usd', '2026-01-02')),
             (idem_payment_key('m1', 'o1', 100.0000, 'uSD', '2026-01-02'))) AS v(k);

-- Different payment, different key: each field counts.
SELECT count(DISTINCT k) AS distinct_keys
FROM (VALUES (idem_payment_key('m1', 'o1', 100, 'USD', '2026-01-02')),
             (idem_payment_key('m2', 'o1', 100, 'USD', '2026-01-02')),
             (idem_payment_key('m1', 'o2', 100, 'USD', '2026-01-02')),
             (idem_payment_key('m1', 'o1', 100.01, 'USD', '2026-01-02')),
             (idem_payment_key('m1', 'o1', 100, 'EUR', '2026-01-02')),
             (idem_payment_key('m1', 'o1', 100, 'USD', '2026-01-03'))) AS v(k);

-- request_date defaults to current_date.
SELECT idem_payment_key('m1', 'o1', 100, 'USD')
         = idem_payment_key('m1', 'o1', 100, 'USD', current_date) AS default_is_today;

-- DateStyle does not change the written date.
SET DateStyle = 'SQL, DMY';
SELECT idem_payment_key('m1', 'o1', 100, 'USD', '2026-01-02'::date)
         = 'PAY_IDEM_' || idem_key('m1', 'o1', '100.00', 'USD', '2026-01-02') AS datestyle_ignored;
RESET DateStyle;

-- Limits that are still accepted: the largest amount, the smallest
-- minor unit, 64-character order ids (also multibyte), 255-byte merchant ids.
SELECT pg_temp.err($$idem_payment_key('m1', 'o1', 999999999.99, 'USD', '2026-01-02')$$) AS max_amount,
       pg_temp.err($$idem_payment_key('m1', 'o1', 0.001, 'BHD', '2026-01-02')$$) AS smallest_bhd,
       pg_temp.err($$idem_payment_key('m1', repeat('x', 64), 1, 'USD', '2026-01-02')$$) AS order_id_64,
       pg_temp.err($$idem_payment_key('m1', repeat('é', 64), 1, 'USD', '2026-01-02')$$) AS order_id_64_multibyte,
       pg_temp.err($$idem_payment_key(repeat('m', 255), 'o1', 1, 'USD', '2026-01-02')$$) AS merchant_id_255;

-- Minor units of each class of the ISO 4217 table.
SELECT c AS currency,
       substr(pg_temp.err(format('idem_payment_key(%L, %L, 1, %L, %L)', 'm1', 'o1', c, '2026-01-02')), 1, 8) AS accepted,
       idem_payment_key('m1', 'o1', 1, c, '2026-01-02')
         = 'PAY_IDEM_' || idem_key('m1', 'o1', w, upper(c), '2026-01-02') AS written_as
FROM (VALUES ('JPY', '1'), ('KRW', '1'), ('VND', '1'), ('CLP', '1'), ('ISK', '1'),
             ('XOF', '1'), ('USD', '1.00'), ('EUR', '1.00'), ('GBP', '1.00'),
             ('XCG', '1.00'), ('ZWG', '1.00'), ('BHD', '1.000'), ('IQD', '1.000'),
             ('JOD', '1.000'), ('KWD', '1.000'), ('LYD', '1.000'), ('OMR', '1.000'),
             ('TND', '1.000'), ('CLF', '1.0000'), ('UYW', '1.0000')) AS v(c, w);

------------------------------------------------------------------------
-- Errors, each with its SQLSTATE
------------------------------------------------------------------------

-- NULL in any argument: 22004.
SELECT call, pg_temp.err(call) AS result
FROM (VALUES ($$idem_payment_key(NULL, 'o1', 100, 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', NULL, 100, 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', NULL, 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 100, NULL, '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 100, 'USD', NULL)$$)) AS c(call);

-- Empty merchant_id or merchant_order_id: 22023.  Too long: 22001
-- (merchant_id over 255 bytes, merchant_order_id over 64 characters).
SELECT call, pg_temp.err(call) AS result
FROM (VALUES ($$idem_payment_key('', 'o1', 100, 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', '', 100, 'USD', '2026-01-02')$$),
             ($$idem_payment_key(repeat('m', 256), 'o1', 100, 'USD', '2026-01-02')$$),
             ($$idem_payment_key(repeat('é', 128), 'o1', 100, 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', repeat('x', 65), 100, 'USD', '2026-01-02')$$)) AS c(call);

-- Currency not an active ISO 4217 code (unknown, wrong length, withdrawn),
-- or one without minor units (gold, SDR, testing, no currency): 22023.
SELECT call, pg_temp.err(call) AS result
FROM (VALUES ($$idem_payment_key('m1', 'o1', 100, 'ABC', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 100, 'US', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 100, 'USDX', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 100, ' USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 100, '', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 100, 'HRK', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 100, 'XAU', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 100, 'xdr', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 100, 'XTS', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 100, 'XXX', '2026-01-02')$$)) AS c(call);

-- Amount <= 0 or above 999999999.99, infinities included: 22003.
-- NaN: 22023.  A non-zero digit beyond the currency's minor units: 22023.
SELECT call, pg_temp.err(call) AS result
FROM (VALUES ($$idem_payment_key('m1', 'o1', 0, 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 0.00, 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', -1, 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', '-Infinity', 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 1000000000, 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 999999999.991, 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 'Infinity', 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 'NaN', 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 100.001, 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 0.001, 'USD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 1.5, 'JPY', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 1.0001, 'KWD', '2026-01-02')$$),
             ($$idem_payment_key('m1', 'o1', 1.00001, 'CLF', '2026-01-02')$$)) AS c(call);

-- A date that cannot be written as YYYY-MM-DD: 22008.
SELECT call, pg_temp.err(call) AS result
FROM (VALUES ($$idem_payment_key('m1', 'o1', 100, 'USD', 'infinity')$$),
             ($$idem_payment_key('m1', 'o1', 100, 'USD', '-infinity')$$),
             ($$idem_payment_key('m1', 'o1', 100, 'USD', '10000-01-01')$$),
             ($$idem_payment_key('m1', 'o1', 100, 'USD', '0001-01-01 BC')$$)) AS c(call);
