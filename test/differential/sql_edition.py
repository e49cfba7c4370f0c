#!/usr/bin/python3
"""The SQL edition (idem_sql) against the C edition (idem), value by value.

Usage: sql_edition.py SEED COUNT C_CONNINFO SQL_CONNINFO [OUTDIR]

Each conninfo names a database where the edition is created (CREATE
EXTENSION idem, or idem_sql); the script needs a role that may write
idem's tables (the keys below are inserted and deleted directly).  From
SEED it makes COUNT random cases of each kind and asks both databases:

  json     idem_canonical and idem_fingerprint of a jsonb value: nested
           objects and arrays, empty ones, deep nesting, repeated keys;
           numbers written every way JSON allows (100.00, 1e20, -0, 0.000,
           1.50E+3, large and small exponents, long digit strings); strings
           with control characters, quotes, backslashes, non-ASCII
           characters and emoji, as raw UTF-8 or as \\u escapes
  key      idem_key of 1 to 6 parts: empty parts, separators, non-ASCII;
           and the refused calls (a NULL part, no part, two dimensions)
  payment  idem_payment_key: currencies of every minor unit, in any case,
           unknown and without minor units; amounts with trailing zeros,
           too many decimals, 0, negative, NaN, infinity, too large; dates
           at and past the ends; order ids at and past 64 characters;
           NULL arguments
  export   rows written alike into both databases' idem.keys (every state,
           fingerprints, leases, checkpoints, JSON null and SQL NULL
           responses, HTTP bodies), then: idem_keys_export's text from
           each; the C edition's export imported into the SQL edition and
           exported again; the SQL edition's imported into the C edition
           and exported again.  Each must be the same bytes.

In a database that is not UTF-8 (LATIN1, WIN1252, else ASCII), strings are
made of the characters it holds.  A result is the value as text, or "ERROR <SQLSTATE>: <message> | <detail>
| <hint>", so that refusals are compared too.  Prints one line per kind
and a total ("compared N values, M differed"); each difference goes to
OUTDIR/differences.txt (default: the current directory) with its input.
Exits 1 when any differs, 2 when a database could not be asked.
"""

import os
import random
import subprocess
import sys

# ISO 4217 codes of src/currency.c, each class of minor units, and codes
# that are not active ones (withdrawn, made up, wrong length, not ASCII)
CURRENCIES = ['USD', 'EUR', 'JPY', 'KWD', 'BHD', 'CLF', 'UYW', 'UYI', 'ISK',
              'XAF', 'XCG', 'ZWG', 'VED', 'SLE', 'MRU', 'CHE', 'USN']
NO_MINOR = ['XAU', 'XAG', 'XDR', 'XTS', 'XXX', 'XSU', 'XUA', 'XAD']
NOT_ACTIVE = ['HRK', 'SLL', 'ZWL', 'ANG', 'CUC', 'BGN', 'ABC', 'US', 'USDD',
              '', ' USD', 'usé', 'ÜSD', 'U$D', 'xyz']

# characters strings are made of: every control character but NUL, the
# characters JSON escapes, multibyte UTF-8 of each length, emoji
CHARS = ([chr(c) for c in range(1, 32)] + ['"', '\\', '/', "'", ' ', '\x7f']
         + list('abcXYZ0159:,.{}[]|') + [', ', ': ', '.0', '1.50', '\\"', 'é', 'ß', 'ÿ', 'Ω', '中', '文', '€',
                                        '\u2028', '\u2029', '\ufeff', '😀',
                                        '🇫🇷', '\U0010ffff', '\u0800'])

SPECIAL_NUMBERS = ['0', '-0', '0.000', '-0.0', '100.00', '1.50', '1e20',
                   '1E+20', '1.50E+3', '-1.50e-3', '1e-20', '2.50e1',
                   '0.1000001', '10', '1e3', '0e10', '0.0e-5', '-2.10',
                   '99999999999999999999.000', '1e300', '-1e-300', '5E-324',
                   '123456789012345678901234567890.1234567890', '1e1000',
                   '1e-1000', '1e1001', '0.00000000000000000000000001']


def rand_number(r):
    """A JSON number literal, possibly with trailing zeros and an exponent"""
    if r.random() < 0.3:
        return r.choice(SPECIAL_NUMBERS)
    s = r.choice(['', '', '-'])
    s += r.choice(['0', str(r.randrange(1, 10)) + ''.join(
        r.choice('0123456789') for _ in range(r.randrange(0, 25)))])
    if r.random() < 0.6:
        s += '.' + ''.join(r.choice('0123456789') for _ in range(r.randrange(1, 20)))
        if r.random() < 0.5:
            s += '0' * r.randrange(1, 8)
    if r.random() < 0.3:
        s += r.choice('eE') + r.choice(['', '+', '-']) + str(r.randrange(0, 400))
    return s


def rand_string(r, maxlen=12):
    return ''.join(r.choice(CHARS) for _ in range(r.randrange(0, maxlen)))


def json_string(r, s):
    """s as a JSON string literal: raw UTF-8 or \\u escapes, at random"""
    out = ['"']
    ascii_only = r.random() < 0.3
    for ch in s:
        c = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == '\\':
            out.append('\\\\')
        elif c < 0x20:
            out.append(r.choice(['\\u%04x' % c, '\\u%04X' % c])
                       if ch not in '\b\f\n\r\t' or r.random() < 0.5
                       else {'\b': '\\b', '\f': '\\f', '\n': '\\n',
                             '\r': '\\r', '\t': '\\t'}[ch])
        elif ch == '/' and r.random() < 0.5:
            out.append('\\/')
        elif c > 0x7f and ascii_only:
            if c > 0xffff:
                c -= 0x10000
                out.append('\\u%04x\\u%04x' % (0xd800 + (c >> 10), 0xdc00 + (c & 0x3ff)))
            else:
                out.append('\\u%04x' % c)
        else:
            out.append(ch)
    out.append('"')
    return ''.join(out)


def ws(r):
    return r.choice(['', '', ' ', '\n', '\t ', '  '])


def rand_json(r, depth=0):
    """A JSON text: scalars, or containers down to a few levels"""
    roll = r.random()
    if depth > 4 or roll < 0.45:
        kind = r.choice(['num', 'num', 'str', 'str', 'true', 'false', 'null'])
        if kind == 'num':
            return rand_number(r)
        if kind == 'str':
            return json_string(r, rand_string(r))
        return kind
    if roll < 0.72:
        items = [rand_json(r, depth + 1) for _ in range(r.randrange(0, 6))]
        return '[' + ws(r) + (',' + ws(r)).join(items) + ws(r) + ']'
    keys = [rand_string(r, 6) for _ in range(r.randrange(0, 6))]
    if keys and r.random() < 0.2:
        keys.append(r.choice(keys))    # a repeated key: the last one counts
    members = [json_string(r, k) + ws(r) + ':' + ws(r) + rand_json(r, depth + 1) for k in keys]
    return '{' + ws(r) + (',' + ws(r)).join(members) + ws(r) + '}'


def json_cases(r, count):
    cases = ['{}', '[]', '""', '0', '-0', 'null', 'true', '{"": ""}', '[[]]', '[{}]',
             '{"amount": 100.00, "currency": "USD"}',
             '{"a": "x, y", "b": "1.50", "c": 1.50, "d: e": [2.0, "f. g"]}',
             '["v1.0", "a.0b", "x.10\\"", "e.g. 2.0", "x@y.com", "0.", ".", 3.30, 0.0]',
             '{"k.0": 1.0, "x\\\\": "\\\\", "y": "\\", \\\\", "z": 0.10}',
             '[' + ','.join(SPECIAL_NUMBERS) + ']',
             json_string(r, ''.join(CHARS)),
             '{' + ','.join('%s: %d' % (json_string(r, c), i) for i, c in enumerate(CHARS)) + '}',
             '[' * 3000 + '1.10' + ']' * 3000,
             '{"a":' * 1000 + '"\\u0001"' + '}' * 1000,
             '[' + ','.join(rand_number(r) for _ in range(3000)) + ']']
    while len(cases) < count:
        cases.append(rand_json(r))
    return [('json', c) for c in cases[:count]]


def sql_literal(s):
    if s is None:
        return 'NULL'
    return "'" + s.replace("'", "''") + "'"


def key_cases(r, count):
    cases = ["idem_key('a|b', 'c')", "idem_key('a', 'b|c')", "idem_key('é', 'x')",
             "idem_key('')", "idem_key('', '')", "idem_key('1:a,', '')",
             "idem_key(VARIADIC NULL::text[])", "idem_key(VARIADIC '{}'::text[])",
             "idem_key(VARIADIC '{{a,b},{c,d}}'::text[])", "idem_key('a', NULL, 'c')",
             "idem_key(VARIADIC '[3:4]={x,NULL}'::text[])", "idem_key(NULL)",
             "idem_key(repeat('x', 100000), 'y')"]
    while len(cases) < count:
        parts = []
        for _ in range(r.randrange(1, 7)):
            p = rand_string(r, 20)
            if r.random() < 0.03:
                p = None
            parts.append(sql_literal(p))
        cases.append('idem_key(%s)' % ', '.join(parts))
    return [('sql', c) for c in cases[:count]]


def rand_amount(r):
    roll = r.random()
    if roll < 0.1:
        return r.choice(["'NaN'", "'Infinity'", "'-Infinity'", '0', '-1', '0.00',
                         '999999999.99', '999999999.991', '1000000000', '1e9',
                         '0.001', '0.0001', '0.00001', '1e-10', 'NULL'])
    s = str(r.randrange(0, 10 ** r.randrange(1, 10)))
    if r.random() < 0.7:
        s += '.' + ''.join(r.choice('0123456789') for _ in range(r.randrange(0, 5)))
        if r.random() < 0.5:
            s += '0' * r.randrange(1, 5)
    if r.random() < 0.05:
        s = '-' + s
    return "'%s'" % s


def rand_date(r):
    roll = r.random()
    if roll < 0.15:
        return r.choice(["'infinity'", "'-infinity'", "'0001-01-01'", "'9999-12-31'",
                         "'10000-01-01'", "'0001-12-31 BC'", "'4713-01-01 BC'",
                         "'5874897-12-31'", "'2024-02-29'", 'NULL'])
    return "'%04d-%02d-%02d'" % (r.randrange(1, 10000), r.randrange(1, 13), r.randrange(1, 29))


def rand_currency(r):
    roll = r.random()
    if roll < 0.75:
        c = r.choice(CURRENCIES)
    elif roll < 0.85:
        c = r.choice(NO_MINOR)
    elif roll < 0.98:
        c = r.choice(NOT_ACTIVE)
    else:
        return 'NULL'
    # any case: the key is the same
    c = ''.join(ch.lower() if r.random() < 0.3 else ch for ch in c)
    return sql_literal(c)


def payment_cases(r, count):
    cases = ["idem_payment_key('m1', 'o1', 100, 'USD', '2026-01-02')",
             "idem_payment_key('m1', 'o1', 100, 'USD')",
             "idem_payment_key('m1', repeat('é', 64), 1, 'USD', '2026-01-02')",
             "idem_payment_key('m1', repeat('é', 65), 1, 'USD', '2026-01-02')",
             "idem_payment_key(repeat('m', 255), 'o1', 1, 'USD', '2026-01-02')",
             "idem_payment_key(repeat('m', 256), 'o1', 1, 'USD', '2026-01-02')",
             "idem_payment_key(repeat('é', 128), 'o1', 1, 'USD', '2026-01-02')",
             "idem_payment_key('', 'o1', 1, 'USD', '2026-01-02')",
             "idem_payment_key('m1', '', 1, 'USD', '2026-01-02')",
             "idem_payment_key(NULL, NULL, NULL, NULL, NULL)",
             "idem_payment_key('m1', NULL, NULL, NULL, NULL)",
             "idem_payment_key('m1', 'o1', NULL, 'XAU', NULL)",
             "idem_payment_key('m1', 'o1', 1, NULL, NULL)",
             "idem_payment_key('m1', 'o1', 1, 'usd', NULL)",
             "idem_payment_key('m1', 'o1', 'NaN', 'zzz', '2026-01-02')"]
    while len(cases) < count:
        m = rand_string(r, 10) if r.random() < 0.97 else None
        o = rand_string(r, 70) if r.random() < 0.97 else None
        cases.append('idem_payment_key(%s, %s, %s::numeric, %s, %s::date)' % (
            sql_literal(m), sql_literal(o), rand_amount(r), rand_currency(r), rand_date(r)))
    return [('sql', c) for c in cases[:count]]


# Each case is evaluated by pg_temp.ev in both databases; the result comes
# back hex-encoded, so that no byte is lost on the way
EVAL = r"""
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SET client_encoding = 'UTF8';
CREATE TEMP TABLE dcase (n integer, kind text, p text);
\copy dcase FROM '%(file)s' (FORMAT csv)
CREATE FUNCTION pg_temp.ev(kind text, p text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
    st text;
    m text;
    d text;
    h text;
BEGIN
    IF kind = 'json' THEN
        SELECT idem_canonical(p::jsonb) || ' ' || encode(idem_fingerprint(p::jsonb), 'hex') INTO r;
    ELSE
        EXECUTE 'SELECT (' || p || ')::text' INTO r;
    END IF;
    RETURN coalesce(r, 'NULL');
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, m = MESSAGE_TEXT,
                            d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN 'ERROR ' || st || ': ' || m || ' | ' || d || ' | ' || h;
END $$;
SELECT n, encode(convert_to(pg_temp.ev(kind, convert_from(decode(p, 'hex'), 'UTF8')), 'UTF8'), 'hex')
FROM dcase ORDER BY n;
"""


def psql(conninfo, script):
    """Run script with psql on conninfo; its unaligned, tuples-only output"""
    proc = subprocess.run([os.environ.get('PSQL', 'psql'), '-X', '-q', '-A', '-t',
                           '-F', '\t', '-d', conninfo],
                          input=script.encode(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    if proc.returncode != 0:
        sys.stderr.write('psql on %s failed:\n%s' % (conninfo, proc.stderr.decode(errors='replace')))
        sys.exit(2)
    return proc.stdout.decode()


def evaluate(conninfo, cases, outdir):
    path = os.path.join(outdir, 'sql_edition_cases.csv')
    with open(path, 'w') as f:
        for n, (kind, p) in enumerate(cases, 1):
            f.write('%d,%s,%s\n' % (n, kind, p.encode().hex()))
    out = psql(conninfo, EVAL % {'file': path})
    results = {}
    for line in out.splitlines():
        if line:
            n, h = line.split('\t')
            results[int(n)] = bytes.fromhex(h).decode()
    return results


# Keys written alike into both databases, then exported and moved
def rand_json_value(r):
    return r.choice(['null', '{}', '"x"', rand_json(r), rand_json(r)])


def key_rows(r, count, scope_prefix):
    rows = []
    for i in range(count):
        state = r.choice(['processing', 'completed', 'failed', 'released'])
        created = '2026-01-%02d %02d:%02d:%02d.%06d+00' % (
            r.randrange(1, 28), r.randrange(24), r.randrange(60), r.randrange(60),
            r.choice([0, r.randrange(1000000)]))
        row = {'scope': scope_prefix + r.choice(['a', 'b', 'é', '']),
               'key': 'k%d-%s' % (i, rand_string(r, 8)),
               'state': state,
               'token': str(r.randrange(1, 5000)),
               'attempt': str(r.randrange(1, 5)),
               'fingerprint': r.choice([None, os.urandom(32).hex(), os.urandom(1).hex()]),
               'lease_until': None, 'checkpoint': None, 'checkpoint_data': None,
               'response': None, 'created_at': created, 'completed_at': None,
               'expires_at': '2099-%02d-01 00:00:00.5+05:30' % r.randrange(1, 13),
               'http_status': None, 'body': None}
        if state == 'processing':
            row['lease_until'] = '2098-01-01 00:00:00+00'
        if state in ('completed', 'failed'):
            row['completed_at'] = '2026-02-01 00:00:00.000001+00'
            if r.random() < 0.3:
                row['http_status'] = str(r.randrange(200, 400) if state == 'completed'
                                         else r.randrange(400, 600))
                row['body'] = r.choice([rand_json(r), '', None])
                if row['body'] == '':
                    row['body'] = '{"ok": true}'
            elif r.random() < 0.8:
                row['response'] = rand_json_value(r)
        if r.random() < 0.4:
            row['checkpoint'] = rand_string(r, 10) or 'phase'
            row['checkpoint_data'] = r.choice([None, rand_json_value(r)])
        rows.append(row)
    return rows


COLUMNS = ['scope', 'key', 'state', 'token', 'attempt', 'fingerprint', 'lease_until',
           'checkpoint', 'checkpoint_data', 'response', 'created_at', 'completed_at',
           'expires_at', 'http_status', 'body']


def row_values(row):
    vals = []
    for c in COLUMNS:
        v = row[c]
        if v is None:
            vals.append('NULL')
        elif c == 'fingerprint':
            vals.append("'\\x%s'::bytea" % v)
        else:
            vals.append(sql_literal(v))
    return '(' + ', '.join(vals) + ')'


EXPORT = r"""
SELECT encode(convert_to(e::text, 'UTF8'), 'hex')
FROM idem_keys_export(ARRAY(SELECT DISTINCT k.scope FROM idem.keys k WHERE k.scope LIKE %(like)s)) e;
"""


def keys_part(r, count, c_conn, sql_conn, prefix):
    """Compare the export of rows written alike, and each edition's import
    of the other's export; the number of values compared, the differences"""
    rows = key_rows(r, count, prefix)
    like = sql_literal(prefix.replace('_', '\\_') + '%')
    setup = ("SET client_min_messages = warning; SET TimeZone = 'Asia/Kolkata';\n"
             "DELETE FROM idem.keys WHERE scope LIKE %s;\n" % like)
    if rows:
        setup += ('INSERT INTO idem.keys (%s) VALUES\n%s;\n'
                  % (', '.join(COLUMNS), ',\n'.join(row_values(x) for x in rows)))
    exports = {}
    for name, conn in (('C', c_conn), ('SQL', sql_conn)):
        out = psql(conn, setup + EXPORT % {'like': like})
        exports[name] = [bytes.fromhex(x).decode() for x in out.split()]
    diffs = []
    compared = 0
    if len(exports['C']) != len(exports['SQL']):
        diffs.append(('export', 'row count', '%d rows' % len(exports['C']),
                      '%d rows' % len(exports['SQL'])))
    for a, b in zip(exports['C'], exports['SQL']):
        compared += 1
        if a != b:
            diffs.append(('export', 'the same row', a, b))
    # each edition imports the other's export, then exports again
    for src, dst, conn in (('C', 'SQL', sql_conn), ('SQL', 'C', c_conn)):
        arr = '[' + ','.join(exports[src]) + ']'
        script = ("SET client_min_messages = warning; SET TimeZone = 'Asia/Kolkata';\n"
                  "BEGIN;\nDELETE FROM idem.keys WHERE scope LIKE %s;\n"
                  "SELECT idem_keys_import(convert_from(decode('%s', 'hex'), 'UTF8')::jsonb) \\g /dev/null\n"
                  % (like, arr.encode().hex())
                  + EXPORT % {'like': like} + "ROLLBACK;\n")
        again = [bytes.fromhex(x).decode() for x in psql(conn, script).split()]
        if len(again) != len(exports[src]):
            diffs.append(('import', '%s export into %s' % (src, dst),
                          '%d rows' % len(exports[src]), '%d rows' % len(again)))
        for a, b in zip(exports[src], again):
            compared += 1
            if a != b:
                diffs.append(('import', '%s export imported into %s and exported' % (src, dst), a, b))
    cleanup = "DELETE FROM idem.keys WHERE scope LIKE %s;\n" % like
    psql(c_conn, cleanup)
    psql(sql_conn, cleanup)
    return compared, diffs


def main():
    if len(sys.argv) < 5:
        sys.stderr.write(__doc__)
        sys.exit(2)
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    c_conn, sql_conn = sys.argv[3], sys.argv[4]
    outdir = sys.argv[5] if len(sys.argv) > 5 else '.'
    os.makedirs(outdir, exist_ok=True)
    r = random.Random(seed)

    # in a database that is not UTF-8, strings of characters it can hold:
    # the hashes are still over UTF-8 (others are refused alike by both)
    encoding = psql(c_conn, 'SHOW server_encoding').strip()
    if encoding != 'UTF8':
        codec = {'LATIN1': 'latin-1', 'WIN1252': 'cp1252'}.get(encoding, 'ascii')
        CHARS[:] = [ch for ch in CHARS if ch.encode(codec, 'ignore')]

    total = 0
    all_diffs = []
    cases = json_cases(r, count) + key_cases(r, count) + payment_cases(r, count)
    kinds = ['json'] * count + ['key'] * count + ['payment'] * count
    c_res = evaluate(c_conn, cases, outdir)
    sql_res = evaluate(sql_conn, cases, outdir)
    per_kind = {}
    for n, ((_, p), kind) in enumerate(zip(cases, kinds), 1):
        a, b = c_res.get(n), sql_res.get(n)
        seen, differed = per_kind.get(kind, (0, 0))
        per_kind[kind] = (seen + 1, differed + (a != b))
        total += 1
        if a != b:
            all_diffs.append((kind, p, a, b))
    for kind in ('json', 'key', 'payment'):
        print('%-8s %d compared, %d differed' % (kind, per_kind[kind][0], per_kind[kind][1]))

    compared, diffs = keys_part(r, max(count // 10, 5), c_conn, sql_conn,
                                'diff_%d_' % seed)
    print('%-8s %d compared, %d differed' % ('export', compared, len(diffs)))
    total += compared
    all_diffs += diffs

    with open(os.path.join(outdir, 'differences.txt'), 'w') as f:
        for kind, p, a, b in all_diffs:
            f.write('%s: %s\n  C:   %s\n  SQL: %s\n\n' % (kind, p[:2000], a and a[:2000], b and b[:2000]))
    print('compared %d values, %d differed' % (total, len(all_diffs)))
    sys.exit(1 if all_diffs else 0)


if __name__ == '__main__':
    main()
