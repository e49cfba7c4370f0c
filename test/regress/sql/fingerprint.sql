SET client_min_messages = warning;
DROP EXTENSION IF EXISTS idem CASCADE;
CREATE EXTENSION idem;
-- pgcrypto's digest() is the independent reference for idem_fingerprint
CREATE EXTENSION IF NOT EXISTS pgcrypto;
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
-- idem_canonical
------------------------------------------------------------------------

-- The documented example: spacing, key order and 100.00 vs 100 vanish.
SELECT idem_canonical('{"amount": 100.00, "currency": "USD"}') AS a,
       idem_canonical('{"currency":"USD","amount":100}') AS b;

-- Every top-level value works: scalars, empty and nested containers.
SELECT j AS input, idem_canonical(j::jsonb) AS canonical
FROM (VALUES ('"text"'), ('42'), ('1.10'), ('true'), ('false'), ('null'),
             ('[]'), ('{}'), ('[[]]'), ('[{}, {"a": []}]'),
             ('[1, "two", [3.0, {"four": null}], {"five": false}]')) AS v(j);

-- Object keys come in jsonb's stored order (shorter keys first, then
-- bytewise), at every level; a repeated key keeps its last value, as jsonb does.
SELECT idem_canonical('{"bb": 1, "a": 2, "ab": 3, "c": {"zz": 1, "y": 2}}');
SELECT idem_canonical('{"a": 1, "a": 2}');

-- Numbers: trailing fractional zeros and a bare decimal point go; exponents
-- are written out; there is no -0.
SELECT n AS input, idem_canonical(n::jsonb) AS canonical
FROM (VALUES ('100.00'), ('1.50'), ('0.000'), ('-0.0'), ('-2.10'), ('10'),
             ('1e3'), ('1E+2'), ('1.5e-3'), ('2.50e1'), ('0.1000001'),
             ('123456789012345678901234567890.1234567890')) AS v(n);

-- Strings are escaped exactly as PostgreSQL's escape_json does: a jsonb
-- string's own text form is that escaping, so compare every character
-- from U+0001 to U+07FF plus a few beyond (expect 0 differences).
SELECT count(*) AS differences
FROM (SELECT chr(i) AS c FROM generate_series(1, 2047) AS i
      UNION ALL SELECT chr(x) FROM unnest(ARRAY[8232, 8233, 20013, 65279, 128512]) AS x) s
WHERE idem_canonical(to_jsonb(c)) <> to_jsonb(c)::text;
-- ... and a few shown: quote, backslash, \b \f \n \r \t, other controls
-- as lowercase \u00XX, non-ASCII as it is, "/" not escaped.  (DEL, 0x7f,
-- is also written as it is; psql would display it as \x7F, so the count
-- above covers it.)
SELECT idem_canonical(to_jsonb(E'q" b\\ \b\f\n\r\t \x01\x1f / é 中'::text));
-- Keys use the same escaping.
SELECT idem_canonical(jsonb_build_object(E'k"\n', E'v\t'));

-- Deep nesting uses no C stack per level: with the stack limit lowered to
-- 100kB, documents 3000 levels deep (built beforehand) still work.
CREATE TEMP TABLE deep AS
SELECT (repeat('[', 3000) || repeat(']', 3000))::jsonb AS arr,
       (repeat('{"a":[', 1500) || '1' || repeat(']}', 1500))::jsonb AS obj;
SET max_stack_depth = '100kB';
SELECT length(idem_canonical(arr)) AS arr_len,
       idem_canonical(arr) = repeat('[', 3000) || repeat(']', 3000) AS arr_ok,
       idem_canonical(obj) = repeat('{"a":[', 1500) || '1' || repeat(']}', 1500) AS obj_ok,
       idem_fingerprint(obj) = digest(idem_canonical(obj), 'sha256') AS obj_fp_ok
FROM deep;
RESET max_stack_depth;

-- NULL in, NULL out (the function is STRICT).
SELECT idem_canonical(NULL) IS NULL AS is_null;

------------------------------------------------------------------------
-- idem_fingerprint
------------------------------------------------------------------------

-- Equal requests, equal fingerprints; 100.01 is a different request.
SELECT idem_fingerprint('{"amount": 100.00, "currency": "USD"}')
         = idem_fingerprint('{"currency":"USD","amount":100}') AS same_request,
       idem_fingerprint('{"amount": 100.00, "currency": "USD"}')
         = idem_fingerprint('{"amount": 100.01, "currency": "USD"}') AS same_as_100_01;

-- Pinned vectors, computed outside PostgreSQL:
--   printf '%s' '{"amount":100,"currency":"USD"}'    | sha256sum
--   printf '%s' '{"amount":100.01,"currency":"USD"}' | sha256sum
SELECT encode(idem_fingerprint('{"currency": "USD", "amount": 100.00}'), 'hex') AS usd_100,
       encode(idem_fingerprint('{"currency": "USD", "amount": 100.01}'), 'hex') AS usd_100_01;

-- A fingerprint is always 32 bytes.
SELECT length(idem_fingerprint('{}')) AS bytes;

-- It equals pgcrypto's digest(idem_canonical(j), 'sha256') over many shapes:
-- every kind of value, nesting, escapes, non-ASCII text, numbers, and a
-- document far larger than the 8kB pieces the hash is fed in.
CREATE TEMP TABLE shapes (j jsonb);
INSERT INTO shapes VALUES
  ('null'), ('true'), ('false'), ('0'), ('-0.0'), ('1e-20'), ('"é"'), ('""'),
  ('[]'), ('{}'), ('[null]'), ('{"": ""}'), ('[[[[[[[[[[1]]]]]]]]]]'),
  ('{"amount": 100.00, "currency": "USD", "items": [{"sku": "A-1", "qty": 2}]}'),
  ('{"note": "tab\there \"quoted\" back\\slash \u0001 \u001f", "emoji": "😀"}'),
  ('{"中文": "値", "ü": ["ß", "é"], "long key with spaces": 1.000}'),
  ('[1, 2.5, -3.25e2, 4E-2, 99999999999999999999.000]');
INSERT INTO shapes
SELECT jsonb_build_object('id', i, 'price', i / 8.0, 'tags', jsonb_build_array('t' || i, i % 3 = 0),
                          'nested', jsonb_build_object('depth', jsonb_build_array(i, jsonb_build_object('x', NULL))))
FROM generate_series(1, 200) AS i;
INSERT INTO shapes
SELECT jsonb_agg(jsonb_build_object('k' || i, repeat('x', i % 50), 'n', i / 7.0))
FROM generate_series(1, 5000) AS i;
SELECT count(*) AS shapes,
       count(*) FILTER (WHERE idem_fingerprint(j) <> digest(idem_canonical(j), 'sha256')) AS differences,
       max(length(idem_canonical(j))) > 100000 AS has_large_document
FROM shapes;

-- NULL in, NULL out (STRICT): idem_claim then treats it as "no fingerprint".
SELECT idem_fingerprint(NULL) IS NULL AS is_null;

------------------------------------------------------------------------
-- idem_key
------------------------------------------------------------------------

-- The encoding is length-prefixed, so moving a separator between parts
-- changes the key: ('a|b','c') and ('a','b|c') differ.
SELECT idem_key('a|b', 'c') <> idem_key('a', 'b|c') AS differ;

-- Pinned vectors, computed outside PostgreSQL:
--   printf '3:a|b,1:c,'         | sha256sum
--   printf '1:a,3:b|c,'         | sha256sum
--   printf '0:,'                | sha256sum   (one empty part)
--   printf '2:é,1:x,'           | sha256sum   (é is 2 bytes in UTF-8)
--   printf '5:order,2:42,3:pay,' | sha256sum
SELECT idem_key('a|b', 'c') AS a_bar_b__c,
       idem_key('a', 'b|c') AS a__b_bar_c;
SELECT idem_key('') AS one_empty_part,
       idem_key('é', 'x') AS utf8_part,
       idem_key('order', '42', 'pay') AS three_parts;

-- VARIADIC with an explicit array gives the same key; so does an array
-- whose subscripts do not start at 1.
SELECT idem_key(VARIADIC ARRAY['order', '42', 'pay']) = idem_key('order', '42', 'pay') AS array_form,
       idem_key(VARIADIC '[0:2]={order,42,pay}'::text[]) = idem_key('order', '42', 'pay') AS lower_bound_0;

-- Lowercase hex, 64 digits.
SELECT idem_key('x') ~ '^[0-9a-f]{64}$' AS lower_hex;

-- Errors: NULL part or NULL array 22004; empty or multi-dimensional array 22023.
SELECT call, pg_temp.err(call) AS result
FROM (VALUES ($$idem_key('a', NULL)$$),
             ($$idem_key(NULL::text)$$),
             ($$idem_key(VARIADIC NULL::text[])$$),
             ($$idem_key(VARIADIC ARRAY[]::text[])$$),
             ($$idem_key(VARIADIC ARRAY[['a','b'],['c','d']])$$)) AS c(call);

------------------------------------------------------------------------
-- Database encodings
------------------------------------------------------------------------

-- A fingerprint is the SHA-256 of the canonical text's UTF-8 bytes,
-- whatever the database encoding.  In a UTF-8 database that is pgcrypto's
-- digest(idem_canonical(j), 'sha256'); in a LATIN1 database the text is
-- converted to UTF-8 first, so the fingerprint is the same as in UTF-8 and
-- differs from digest() of the LATIN1 bytes.  The vector, from outside:
--   printf '%s' '{"city":"Köln","name":"Zoë"}' | sha256sum
SELECT current_database() AS here \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS regress_idem_utf8;
DROP DATABASE IF EXISTS regress_idem_latin1;
RESET client_min_messages;
CREATE DATABASE regress_idem_utf8 TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C';
CREATE DATABASE regress_idem_latin1 TEMPLATE template0 ENCODING 'LATIN1' LOCALE 'C';
-- in each: the extensions, then the fingerprint and the comparison
\set setup 'SET client_encoding = ''UTF8''; SET client_min_messages = warning; CREATE EXTENSION pgcrypto; CREATE EXTENSION idem; RESET client_min_messages;'
\set check 'SELECT getdatabaseencoding() AS encoding, encode(idem_fingerprint(j), ''hex'') AS fingerprint, idem_fingerprint(j) = digest(idem_canonical(j), ''sha256'') AS equals_digest FROM (SELECT ''{"name": "Zoë", "city": "Köln"}''::jsonb AS j) s'
\c regress_idem_utf8
:setup
:check;
\c regress_idem_latin1
:setup
:check;
\c :here
DROP DATABASE regress_idem_utf8;
DROP DATABASE regress_idem_latin1;
