#!/usr/bin/python3
"""Random webhook deliveries of every scheme idem verifies, signed as each
gateway publishes its scheme, and their one-bit mutants; for
test/tap/components/122_webhook_differential.pl.

Everything here is independent of idem's C code: HMACs, RSA and Ed25519
signatures, keys and certificates come from Python's cryptography package,
and the signed strings are built from the gateways' own descriptions:

  stripe     Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">,
             keyed with the whole signing secret (whsec_ included); a v1 per
             active secret while one is rolled, a v0 in test mode.
  standard   Standard Webhooks (standardwebhooks.com): webhook-id,
             webhook-timestamp, webhook-signature: "v1,<base64 HMAC-SHA256>"
             keyed with the base64-decoded whsec_ secret, or "v1a,<base64
             Ed25519>" for a whpk_ public key, over "<id>.<timestamp>.<body>".
  svix       the same under svix-id, svix-timestamp, svix-signature.
  github     X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>.
  shopify    X-Shopify-Hmac-Sha256: <base64 HMAC-SHA256 of the body>.
  razorpay   X-Razorpay-Signature: <hex HMAC-SHA256 of the body>.
  checkout   Cko-Signature: <hex HMAC-SHA256 of the body>.
  paddle     Paddle-Signature: ts=<unix>;h1=<hex HMAC-SHA256 of "<ts>:<body>">.
  adyen      a NotificationRequestItem whose additionalData.hmacSignature is
             the base64 HMAC-SHA256, keyed with the bytes of the hex key, of
             pspReference:originalReference:merchantAccountCode:
             merchantReference:amount.value:amount.currency:eventCode:success.
  adyen_platform  HmacSignature: <base64 HMAC-SHA256 of the body>, keyed with
             the bytes of the hex key; the event id is the body's SHA-256.
  square     x-square-hmacsha256-signature: <base64 HMAC-SHA256 of the
             notification URL followed by the body>; the secret is the URL,
             a space and the signature key.
  paystack   x-paystack-signature: <hex HMAC-SHA512 of the body>; the event
             id is the body's SHA-256.
  airwallex  x-signature: <hex HMAC-SHA256 of x-timestamp (unix
             milliseconds) followed by the body>.
  alipay     an asynchronous notification form: sign is the base64 RSA
             PKCS#1 v1.5 (SHA-256 for sign_type RSA2, SHA-1 for RSA) of every
             parameter but sign, sign_type and the empty ones, decoded, sorted
             by name, "k=v" joined by "&", in the form's charset.
  alipay_v3  alipay-signature: the base64 SHA256withRSA of "<alipay-timestamp>
             \n<alipay-nonce>\n<body>\n", the timestamp in unix milliseconds;
             the event id is the body's notify_id, else its SHA-256.
  antom      signature: algorithm=RSA256,keyVersion=1,signature=<the
             URL-encoded base64 SHA256withRSA of "POST <path>\n<client-id>.
             <request-time>.<body>">; the secret is the path, a line break
             and the public keys; the event id is the body's SHA-256.
  unionpay   a 5.1.0 backend notification form (signMethod 01): signature
             is the base64 SHA256withRSA of the lowercase hex SHA-256 of
             every parameter but signature, sorted and joined so, made with
             the key of signPubKeyCert, which chains to UnionPay's root
             through its intermediate and names 中国银联股份有限公司 in the
             third "@" field of its CN (the official SDK's checks).
  wechatpay  WeChat Pay APIv3: Wechatpay-Signature is the base64
             SHA256withRSA of "<timestamp>\\n<nonce>\\n<body>\\n", by the key
             of the platform certificate whose serial (upper-case hex) or of
             the WeChat Pay public key whose ID is in Wechatpay-Serial.
  paypal     PAYPAL-TRANSMISSION-SIG is the base64 SHA256withRSA of
             "<PAYPAL-TRANSMISSION-ID>|<PAYPAL-TRANSMISSION-TIME>|<webhook
             id>|<zlib CRC-32 of the body, unsigned decimal>" (PayPal's SDKs),
             by the key of the certificate the application passes in
             PAYPAL-CERT-PEM (with its intermediate, or that in the secret),
             which chains to the secret's root; PAYPAL-AUTH-ALGO is
             SHA256withRSA; the secret is JSON (webhook_id, subject, roots).
  mercadopago  x-signature: ts=<unix seconds or milliseconds>,v1=<hex
             HMAC-SHA256 of "id:<data.id>;request-id:<x-request-id>;ts:<ts>;">,
             data.id the body's (a string or a number) lowercased, the
             request-id part left out without x-request-id; the event id is
             the body's id.  The body but data.id is not signed: its other
             bytes are not mutated.

Each genuine delivery comes with mutants, each one bit away from it: in the
body, the signature, the timestamp (where it is signed), a header's name
(so that the header is no longer found) and the other header values the
check reads (the signed webhook-id, WeChat Pay's nonce and serial).  A
mutant is kept only if a verifier written here from the same descriptions
refuses it; one that it accepts (a header name that differs in case only, a
hex digit or a %XX escape in the other case, an unsigned part of an Adyen
item, which are the same delivery) is drawn again.  Two readings follow
idem's documentation where a gateway's own libraries differ and nothing a
sender signs depends on it: hex is read in either case, and base64 must be
canonical (a signature with the unused low bits of its last character set
is refused).

Usage: /usr/bin/python3 test/differential/sign.py SEED COUNT DIR
writes DIR/sources.tsv (source, scheme, secret) and DIR/cases.tsv (id,
source, kind, payload, headers, expect, event_id, what), in COPY's text
format, and prints what it made.  Every case draws from a generator of its
own, seeded from SEED, the scheme and its number: the same seed gives the
same secrets of the HMAC schemes, the same bodies and header names, and
flips the same bits of them.  RSA and Ed25519 keys are made afresh on every
run and timestamps come from the clock, so signatures differ (and with them
which of their bits are flipped), without changing any other case.

JSON strings now and then hold a NUL, written \\u0000 as RFC 8259 says.
"""
import base64
import datetime
import json
import os
import random
import re
import string
import sys
import time
import urllib.parse
import zlib

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, hmac, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa
from cryptography.x509.oid import NameOID

# How old a signed timestamp is, at most, when the cases are made (the
# tolerance is 5 minutes: what is left covers the test's own run)
MAX_AGE = 200

# Attempts at a mutant that the verifier here refuses, before giving up
MUTANT_TRIES = 400

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits

UNIONPAY_COMPANY = '中国银联股份有限公司'

# Header names are folded to lower case in ASCII only, as HTTP does
ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

# A "%" without two hex digits after it
BAD_ESCAPE = re.compile('%(?![0-9A-Fa-f]{2})')


# ---- primitives -------------------------------------------------------------

def hmac_sha256(key, data):
    """HMAC-SHA256 of data keyed with key (bytes)"""
    h = hmac.HMAC(key, hashes.SHA256())
    h.update(data)
    return h.finalize()


def hmac_sha512(key, data):
    """HMAC-SHA512 of data keyed with key (bytes)"""
    h = hmac.HMAC(key, hashes.SHA512())
    h.update(data)
    return h.finalize()


def sha256_hex(data):
    """Lowercase hex SHA-256 of data"""
    h = hashes.Hash(hashes.SHA256())
    h.update(data)
    return h.finalize().hex()


def b64(data):
    """Standard padded base64, as text"""
    return base64.b64encode(data).decode('ascii')


def b64_strict(text):
    """The bytes of canonical padded base64, or None"""
    if not isinstance(text, str) or len(text) % 4 != 0:
        return None
    if any(c not in string.ascii_letters + string.digits + '+/=' for c in text):
        return None
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        return None
    return raw if b64(raw) == text else None


def hex_mac(text, size=32):
    """The size bytes of 2 * size hex digits in either case, or None"""
    if len(text) != 2 * size or any(c not in string.hexdigits for c in text):
        return None
    return bytes.fromhex(text)


def rsa_verify(public_key, signature, data, digest):
    """Does signature verify data (RSA PKCS#1 v1.5 with digest)?"""
    try:
        public_key.verify(signature, data, padding.PKCS1v15(), digest)
        return True
    except InvalidSignature:
        return False


def rsa_key():
    """A new RSA-2048 key"""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_pem(key):
    """The SubjectPublicKeyInfo of key in PEM"""
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode('ascii')


def certificate(key, subject, issuer_key=None, issuer=None, ca=False, serial=None):
    """A certificate of key, valid from a day ago for a year, signed by
    issuer_key (itself when None)"""
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    builder = (x509.CertificateBuilder()
               .subject_name(subject)
               .issuer_name(issuer or subject)
               .public_key(key.public_key())
               .serial_number(serial or x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=365))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                              critical=False))
    if issuer_key is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False)
    return builder.sign(issuer_key or key, hashes.SHA256())


def cert_pem(cert):
    """A certificate in PEM"""
    return cert.public_bytes(serialization.Encoding.PEM).decode('ascii')


def header(headers, name):
    """The value of a header by name in any case (ASCII letters folded, as
    HTTP does); None when absent or given twice"""
    name = name.translate(ASCII_LOWER)
    found = [v for k, v in headers if k.translate(ASCII_LOWER) == name]
    return found[0] if len(found) == 1 else None


def is_digits(text):
    """Plain ASCII decimal digits, at least one"""
    return text is not None and text != '' and all('0' <= c <= '9' for c in text)


def trim_ows(text):
    """Without HTTP's optional whitespace (spaces, tabs) at either end"""
    return text.strip(' \t')


def elements(value, sep, ts_name, mac_name):
    """The values of a signature header's ts_name and mac_name elements
    ("name=value" separated by sep, both sides trimmed; elements without
    "=" or of other names left out), as two lists"""
    found = {ts_name: [], mac_name: []}
    for item in value.split(sep):
        name, eq, v = item.partition('=')
        if eq and trim_ows(name) in found:
            found[trim_ows(name)].append(trim_ows(v))
    return found[ts_name], found[mac_name]


# ---- random content ---------------------------------------------------------

class Random(random.Random):
    """The seeded source of everything random here"""

    def char(self):
        """A character: mostly ASCII, some control characters, Latin,
        CJK, emoji and the rest of Unicode; never NUL nor a surrogate"""
        r = self.random()
        if r < 0.6:
            return chr(self.randint(0x20, 0x7e))
        if r < 0.65:
            return self.choice('\t\n\r')
        if r < 0.67:
            return chr(self.randint(1, 0x1f))
        if r < 0.75:
            return chr(self.randint(0x7f, 0x24f))
        if r < 0.87:
            return chr(self.randint(0x4e00, 0x9fa5))
        if r < 0.92:
            return chr(self.randint(0x1f300, 0x1faff))
        if r < 0.96:
            return chr(self.randint(0x10000, 0x10ffff))
        c = self.randint(0x250, 0xffff)
        return chr(c) if not 0xd800 <= c <= 0xdfff else '\u263a'

    def text(self, lo, hi):
        """Random text of lo to hi characters"""
        return ''.join(self.char() for _ in range(self.randint(lo, hi)))

    def json_text(self, lo, hi):
        """Random text for a JSON string, now and then with a NUL in it
        (written \\u0000, as any JSON encoder writes it)"""
        s = self.text(lo, hi)
        if s and self.random() < 0.01:
            at = self.randrange(len(s))
            s = s[:at] + '\x00' + s[at:]
        return s

    def word(self, lo, hi, alphabet=ALNUM):
        """A random word of the alphabet"""
        return ''.join(self.choice(alphabet) for _ in range(self.randint(lo, hi)))

    def uuid(self):
        """A random UUID, as text"""
        h = '%032x' % self.getrandbits(128)
        return '%s-%s-4%s-%s-%s' % (h[:8], h[8:12], h[13:16], h[16:20], h[20:])

    def body_text(self):
        """A body of random text, usually short, now and then long or empty"""
        r = self.random()
        if r < 0.05:
            return ''
        if r < 0.1:
            return self.text(1000, 4000)
        return self.text(1, 400)


class JsonStyle:
    """How one JSON text is written: which escapes, which whitespace"""

    def __init__(self, rng):
        self.ascii = rng.random() < 0.3          # non-ASCII as \\u escapes
        self.slash = rng.random() < 0.2          # "/" as "\\/"
        self.short = rng.random() < 0.7          # \\n rather than \\u000a
        self.upper = rng.random() < 0.5          # \\u00E9 rather than \\u00e9
        self.space = rng.choice([[''], [' '], ['', ' ', '\n', '\n  ', '\t', '\r\n']])


def json_string(s, style):
    """s as a JSON string literal, in style"""
    short = {0x08: '\\b', 0x09: '\\t', 0x0a: '\\n', 0x0c: '\\f', 0x0d: '\\r'}
    fmt = '\\u%04X' if style.upper else '\\u%04x'
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == '\\':
            out.append('\\\\')
        elif ch == '/' and style.slash:
            out.append('\\/')
        elif o < 0x20:
            out.append(short[o] if o in short and style.short else fmt % o)
        elif o > 0x7e and style.ascii:
            if o > 0xffff:
                o -= 0x10000
                out.append(fmt % (0xd800 + (o >> 10)) + fmt % (0xdc00 + (o & 0x3ff)))
            else:
                out.append(fmt % o)
        else:
            out.append(ch)
    out.append('"')
    return ''.join(out)


class Raw:
    """A JSON value already written (a number as it is to be signed)"""

    def __init__(self, text):
        self.text = text


def json_write(value, rng, style):
    """value (dict, list, str, int, bool, None, Raw) as JSON text in style,
    with whitespace between tokens"""
    def ws():
        return rng.choice(style.space)
    if isinstance(value, Raw):
        return value.text
    if value is None:
        return 'null'
    if value is True:
        return 'true'
    if value is False:
        return 'false'
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return json_string(value, style)
    if isinstance(value, list):
        return '[' + ws() + (',' + ws()).join(json_write(v, rng, style) for v in value) + ws() + ']'
    return '{' + ws() + (',' + ws()).join(
        json_string(k, style) + ws() + ':' + ws() + json_write(v, rng, style)
        for k, v in value.items()) + ws() + '}'


def json_random_value(rng, depth):
    """A random JSON value (Python), nested at most three deep"""
    r = rng.random()
    if depth < 3 and r < 0.12:
        return json_random_object(rng, depth + 1, 0, 5)
    if depth < 3 and r < 0.2:
        return [json_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    if r < 0.6:
        return rng.json_text(0, 30)
    if r < 0.8:
        return rng.randint(-10 ** 12, 10 ** 12)
    if r < 0.9:
        return rng.uniform(-1e6, 1e6) * rng.choice([1, 1e-9, 1e12])
    return rng.choice([True, False, None])


def json_random_object(rng, depth, lo, hi, avoid=()):
    """A random JSON object of lo to hi members, none named as in avoid;
    now and then a nested "id", which is not the root's"""
    obj = {}
    for _ in range(rng.randint(lo, hi)):
        name = rng.choice(['object', 'type', 'data', 'amount', 'currency', 'created',
                           'metadata', 'description', 'livemode', 'id', rng.text(1, 12)])
        if name not in avoid and name not in obj:
            obj[name] = json_random_value(rng, depth)
    return obj


def json_event(rng, id_name, id_value):
    """A random JSON object with id_name: id_value among its root members,
    written in a random style"""
    obj = json_random_object(rng, 1, 0, 8, avoid=(id_name,))
    items = list(obj.items())
    items.insert(rng.randint(0, len(items)), (id_name, id_value))
    return json_write(dict(items), rng, JsonStyle(rng)).encode('utf-8')


def json_pairs(pairs):
    """object_pairs_hook that keeps every pair (json.loads gives lists)"""
    return ('object', pairs)


def not_json(word):
    """parse_constant: NaN and Infinity are not JSON"""
    raise ValueError(word)


def json_parse(payload):
    """The JSON of a body, objects as ('object', pairs), numbers as Raw (as
    written), or None if it is not JSON (RFC 8259, UTF-8)"""
    try:
        text = payload.decode('utf-8')
        value = json.loads(text, object_pairs_hook=json_pairs, parse_int=Raw,
                           parse_float=Raw, parse_constant=not_json)
    except (ValueError, RecursionError):
        return None
    # a lone surrogate escape is not text
    try:
        json.dumps(value, default=lambda r: r.text, ensure_ascii=False).encode('utf-8')
    except UnicodeEncodeError:
        return None
    return value


def json_member_string(payload, name):
    """The string value of a member of the root object, given once; None
    otherwise (not JSON, not an object, absent, twice, not a string)"""
    value = json_parse(payload)
    if not isinstance(value, tuple):
        return None
    found = [v for k, v in value[1] if k == name]
    if len(found) != 1 or not isinstance(found[0], str):
        return None
    return found[0]


# ---- url-encoded forms ----------------------------------------------------

def form_encode(pairs, rng, raw_utf8=False):
    """The body of a form of (name, value bytes) pairs, and where each
    value is in it (start, end); spaces as "+" or "%20", the hex digits of
    escapes in either case; with raw_utf8, the bytes of UTF-8 characters
    now and then left unencoded"""
    plus = rng.random() < 0.5
    lower = rng.random() < 0.3

    def enc(b):
        if raw_utf8 and rng.random() < 0.5:
            # the non-ASCII characters as they are, the rest escaped
            out = []
            for ch in b.decode('utf-8'):
                if ord(ch) > 0x7f:
                    out.append(ch)
                else:
                    out.append(enc_ascii(ch.encode('ascii')))
            return ''.join(out)
        return enc_ascii(b)

    def enc_ascii(b):
        s = (urllib.parse.quote_plus(b, safe='') if plus else urllib.parse.quote(b, safe=''))
        if lower:
            s = ''.join(s[i].lower() if i > 0 and s[i - 1] == '%' or i > 1 and s[i - 2] == '%' else s[i]
                        for i in range(len(s)))
        return s

    body = ''
    spans = {}
    for i, (name, value) in enumerate(pairs):
        if i > 0:
            body += '&'
        body += enc_ascii(name.encode('ascii')) + '='
        start = len(body.encode('utf-8'))
        body += enc(value)
        spans[name] = (start, len(body.encode('utf-8')))
    return body.encode('utf-8'), spans


def form_decode(payload, charset_param):
    """A form body's parameters, decoded ("+" a space, %XX a byte, other
    characters the UTF-8 they arrived in, converted to the form's charset):
    a dict of name to value bytes, or None when malformed (a bad escape, an
    empty name, a name twice, a charset other than UTF-8 and GBK)"""
    def unescape(s):
        if BAD_ESCAPE.search(s):
            return None
        return urllib.parse.unquote_to_bytes(s.replace('+', ' '))

    text = payload.decode('utf-8')
    params = {}
    for piece in text.split('&'):
        if piece == '':
            continue
        name, _, value = piece.partition('=')
        n = unescape(name)
        v = unescape(value)
        if not n or v is None or n in params:
            return None
        params[n] = (v, value)
    charset = params.get(charset_param.encode('ascii'), (b'', ''))[0]
    charset = charset.decode('latin-1').lower()
    if charset in ('', 'utf-8', 'utf8'):
        return {k: v for k, (v, _) in params.items()}
    if charset not in ('gbk', 'gb2312'):
        return None
    # characters sent unencoded arrive as UTF-8 and are signed in GBK
    result = {}
    for k, (v, raw) in params.items():
        if any(ord(c) > 0x7f for c in raw):
            try:
                v = b''.join(unescape(part) if i % 2 == 0 else part.encode('gbk')
                             for i, part in enumerate(_split_non_ascii(raw)))
            except UnicodeEncodeError:
                return None
        result[k] = v
    return result


def _split_non_ascii(raw):
    """raw split into runs: ASCII, non-ASCII, ASCII, ..."""
    runs = ['']
    for c in raw:
        if (ord(c) > 0x7f) != (len(runs) % 2 == 0):
            runs.append('')
        runs[-1] += c
    return runs


def form_signed_string(params, skip, skip_empty):
    """name=value of every parameter but those of skip (and the empty ones
    when skip_empty), sorted by name, joined by "&", as bytes"""
    return b'&'.join(k + b'=' + v for k, v in sorted(params.items())
                     if k.decode('latin-1') not in skip and not (skip_empty and v == b''))


# ---- deliveries and mutants -------------------------------------------------

class Delivery:
    """A delivery: its body (bytes), headers ([name, value] lists, in
    order) and event id; and where a mutation must be refused, per kind:
    ('body', start, end), ('value', header, start, end) or ('name', header)"""

    def __init__(self, payload, headers, event_id):
        self.payload = payload
        self.headers = headers
        self.event_id = event_id
        self.targets = {}

    def target(self, kind, *where):
        """Add a place where a mutation of this kind must be refused (an
        empty place, such as an empty body, is none)"""
        if where[0] == 'name' or where[-1] > where[-2]:
            self.targets.setdefault(kind, []).append(where)

    def header_value_span(self, name, start, end):
        """The place of bytes start..end of header name's value"""
        for i, (k, _) in enumerate(self.headers):
            if k == name:
                return ('value', i, start, end)
        raise KeyError(name)


def flip(data, pos, bit):
    """data (bytes) with one bit flipped, if the result is still UTF-8
    without NUL (what a text argument can hold); else None"""
    b = bytearray(data)
    b[pos] ^= 1 << bit
    if b[pos] == 0:
        return None
    try:
        bytes(b).decode('utf-8')
    except UnicodeDecodeError:
        return None
    return bytes(b)


def mutate(rng, delivery, kind, verifier):
    """A mutant of a delivery, one bit away in a place of the kind, that the
    verifier refuses; (payload, headers, what) or None"""
    places = delivery.targets.get(kind)
    if not places:
        return None
    for _ in range(MUTANT_TRIES):
        place = rng.choice(places)
        payload = delivery.payload
        headers = [list(h) for h in delivery.headers]
        if place[0] == 'body':
            _, start, end = place
            if end <= start:
                continue
            pos = rng.randrange(start, end)
            bit = rng.randrange(8)
            new = flip(payload, pos, bit)
            if new is None:
                continue
            what = 'body byte %d bit %d (0x%02x to 0x%02x)' % (pos, bit, payload[pos], new[pos])
            payload = new
        else:
            i = place[1]
            field = 0 if place[0] == 'name' else 1
            data = headers[i][field].encode('utf-8')
            start, end = (0, len(data)) if place[0] == 'name' else place[2:]
            if end <= start:
                continue
            pos = rng.randrange(start, end)
            bit = rng.randrange(8)
            new = flip(data, pos, bit)
            if new is None:
                continue
            what = '%s of header %s, byte %d bit %d (%r to %r)' % (
                place[0], headers[i][0], pos, bit, chr(data[pos]), chr(new[pos]))
            headers[i][field] = new.decode('utf-8')
        if not verifier(payload, headers):
            return payload, headers, what
    return None


def header_style(rng, names):
    """The names of the headers as one sender writes them: as documented,
    lower case (HTTP/2, Node.js) or each letter in a random case"""
    r = rng.random()
    if r < 0.4:
        return {n: n for n in names}
    if r < 0.8:
        return {n: n.lower() for n in names}
    return {n: ''.join(c.upper() if rng.random() < 0.5 else c.lower() for c in n) for n in names}


def noise_headers(rng, style):
    """Headers that any delivery has and no check reads"""
    out = [['Content-Type', 'application/json; charset=utf-8']]
    if rng.random() < 0.5:
        out.append(['User-Agent', rng.word(5, 20)])
    if rng.random() < 0.3:
        out.append(['X-Forwarded-For', '192.0.2.%d' % rng.randint(1, 254)])
    return [[style.get(k, k), v] for k, v in out]


def unique(seen, make):
    """make() until it gives a value not in seen; the value, now in seen"""
    while True:
        v = make()
        if v not in seen:
            seen.add(v)
            return v


# ---- the schemes ------------------------------------------------------------
#
# Each is a class with the sources it fills (source name -> secret), make(rng,
# source, now) -> Delivery, and verify(source, payload, headers) -> bool.

class Stripe:
    """Stripe: Stripe-Signature, t and v1 elements"""
    scheme = 'stripe'

    def __init__(self, rng):
        self.secret = 'whsec_' + rng.word(32, 32)
        self.old = 'whsec_' + rng.word(32, 32)
        self.sources = {'stripe': self.secret}
        self.ids = set()

    def make(self, rng, source, now):
        st = header_style(rng, ['Stripe-Signature'])
        if rng.random() < 0.9:
            eid = unique(self.ids, lambda: 'evt_' + rng.word(14, 24))
            payload = json_event(rng, 'id', eid)
        else:
            eid, payload = None, rng.body_text().encode('utf-8')
        ts = str(now - rng.randint(0, MAX_AGE))
        mac = hmac_sha256(self.secret.encode(), ts.encode() + b'.' + payload).hex()
        elements = ['t=' + ts, 'v1=' + mac]
        if rng.random() < 0.3:
            old = hmac_sha256(self.old.encode(), ts.encode() + b'.' + payload).hex()
            elements.insert(rng.choice([1, 2]), 'v1=' + old)
        if rng.random() < 0.2:
            elements.append('v0=' + rng.randbytes(32).hex())
        value = ','.join(elements)
        name = st['Stripe-Signature']
        d = Delivery(payload, noise_headers(rng, st) + [[name, value]], eid)
        d.target('body', 'body', 0, len(payload))
        at = value.index('v1=' + mac) + 3
        d.target('signature', *d.header_value_span(name, at, at + 64))
        d.target('timestamp', *d.header_value_span(name, 2, 2 + len(ts)))
        d.target('header', 'name', len(d.headers) - 1)
        return d

    def verify(self, source, payload, headers):
        value = header(headers, 'Stripe-Signature')
        if value is None:
            return False
        ts, macs = elements(value, ',', 't', 'v1')
        if len(ts) != 1 or not is_digits(ts[0]) or not macs:
            return False
        want = hmac_sha256(self.secret.encode(), ts[0].encode() + b'.' + payload)
        return any(hex_mac(m) == want for m in macs)


class Standard:
    """Standard Webhooks (and Svix, under its own header names)"""

    def __init__(self, rng, scheme, prefix, ed25519_too):
        self.scheme = scheme
        self.prefix = prefix
        self.key = rng.randbytes(rng.randint(24, 64))
        self.sources = {scheme: 'whsec_' + b64(self.key)}
        self.ed = None
        if ed25519_too:
            self.ed = ed25519.Ed25519PrivateKey.generate()
            raw = self.ed.public_key().public_bytes(serialization.Encoding.Raw,
                                                    serialization.PublicFormat.Raw)
            self.sources[scheme + '_ed25519'] = 'whpk_' + b64(raw)
        self.ids = set()

    def names(self):
        return ['%s-id' % self.prefix, '%s-timestamp' % self.prefix, '%s-signature' % self.prefix]

    def make(self, rng, source, now):
        id_name, ts_name, sig_name = self.names()
        st = header_style(rng, self.names())
        eid = unique(self.ids, lambda: 'msg_' + rng.word(20, 30))
        payload = (json_write(json_random_object(rng, 1, 0, 8), rng, JsonStyle(rng)).encode()
                   if rng.random() < 0.6 else rng.body_text().encode('utf-8'))
        ts = str(now - rng.randint(0, MAX_AGE))
        signed = eid.encode() + b'.' + ts.encode() + b'.' + payload
        if source.endswith('_ed25519'):
            entry = 'v1a,' + b64(self.ed.sign(signed))
            decoys = ['v1,' + b64(rng.randbytes(32)), 'v1a,' + b64(rng.randbytes(64))]
        else:
            entry = 'v1,' + b64(hmac_sha256(self.key, signed))
            decoys = ['v1,' + b64(rng.randbytes(32)), 'v1a,' + b64(rng.randbytes(64)),
                      'v2,' + rng.word(4, 40)]
        entries = [entry] + [x for x in decoys if rng.random() < 0.2]
        rng.shuffle(entries)
        value = ' '.join(entries)
        headers = noise_headers(rng, st) + [[st[id_name], eid], [st[ts_name], ts], [st[sig_name], value]]
        d = Delivery(payload, headers, eid)
        d.target('body', 'body', 0, len(payload))
        at = value.index(entry) + entry.index(',') + 1
        d.target('signature', *d.header_value_span(st[sig_name], at, value.index(entry) + len(entry)))
        d.target('timestamp', *d.header_value_span(st[ts_name], 0, len(ts)))
        d.target('field', *d.header_value_span(st[id_name], 0, len(eid)))
        for n in self.names():
            d.target('header', 'name', [k for k, _ in d.headers].index(st[n]))
        return d

    def verify(self, source, payload, headers):
        id_name, ts_name, sig_name = self.names()
        eid, ts, sigs = header(headers, id_name), header(headers, ts_name), header(headers, sig_name)
        if not eid or not is_digits(ts) or sigs is None:
            return False
        signed = eid.encode() + b'.' + ts.encode() + b'.' + payload
        asym = source.endswith('_ed25519')
        want = None if asym else hmac_sha256(self.key, signed)
        for item in sigs.split(' '):
            version, comma, sig = item.partition(',')
            if not comma:
                continue
            raw = b64_strict(trim_ows(sig))
            if raw is None:
                continue
            if not asym and trim_ows(version) == 'v1' and raw == want:
                return True
            if asym and trim_ows(version) == 'v1a' and len(raw) == 64:
                try:
                    self.ed.public_key().verify(raw, signed)
                    return True
                except InvalidSignature:
                    pass
        return False


class BodyMac:
    """GitHub, Shopify, Razorpay, Checkout.com, Adyen's platform webhooks,
    Square, Paystack, Airwallex: the MAC of the body in one header, after a
    prefix, in hex or base64; hex_key: the secret is the hex of the key
    (Adyen's), else its text; signed_url: the MAC covers a notification URL
    before the body, which the secret holds before a space and the key
    (Square's); millis_header: the MAC covers that header's value, unix
    milliseconds, before the body (Airwallex's); sha512: an HMAC-SHA512
    (Paystack's); the event id in a header, a member, or (neither) the
    body's SHA-256"""

    def __init__(self, rng, scheme, sig_header, prefix, encoding, id_header=None, id_member=None,
                 extra=(), hex_key=False, signed_url=False, millis_header=None, sha512=False):
        self.scheme = scheme
        self.millis_header = millis_header
        self.mac = hmac_sha512 if sha512 else hmac_sha256
        self.mac_size = 64 if sha512 else 32
        self.sig_header = sig_header
        self.prefix = prefix
        self.encoding = encoding
        self.id_header = id_header
        self.id_member = id_member
        self.extra = extra
        if hex_key:
            # 32 random bytes, in the upper-case hex Adyen's Customer Area shows
            self.secret = bytes(rng.randrange(256) for _ in range(32)).hex().upper()
            self.key = bytes.fromhex(self.secret)
        else:
            # a secret of printable text, now and then beyond ASCII
            self.secret = rng.text(8, 40).replace('\r', '').replace('\n', '').replace('\t', ' ')
            self.key = self.secret.encode('utf-8')
        self.url = b''
        if signed_url:
            # Square's signature keys are base64url text, without spaces
            self.secret = self.secret.replace(' ', '_')
            self.key = self.secret.encode('utf-8')
            self.url = ('https://' + rng.word(4, 12, LOWER_ALNUM) + '.example/webhooks/'
                        + rng.word(4, 12, LOWER_ALNUM)).encode('ascii')
            self.secret = self.url.decode('ascii') + ' ' + self.secret
        self.sources = {scheme: self.secret}
        self.ids = set()

    def make(self, rng, source, now):
        st = header_style(rng, [self.sig_header] + ([self.id_header] if self.id_header else [])
                          + ([self.millis_header] if self.millis_header else []))
        headers = noise_headers(rng, st)
        eid = None
        if self.id_member:
            if rng.random() < 0.9:
                eid = unique(self.ids, lambda: 'evt_' + rng.word(20, 26, LOWER_ALNUM))
                payload = json_event(rng, self.id_member, eid)
            else:
                payload = rng.body_text().encode('utf-8')
        else:
            def body():
                return (json_write(json_random_object(rng, 1, 0, 8), rng, JsonStyle(rng)).encode()
                        if rng.random() < 0.6 else rng.body_text().encode('utf-8'))
            if self.id_header:
                payload = body()
                eid = unique(self.ids, rng.uuid)
                headers.append([st[self.id_header], eid])
            else:
                # the id is the body's digest: a body not sent before
                while True:
                    payload = body()
                    eid = sha256_hex(payload)
                    if eid not in self.ids:
                        self.ids.add(eid)
                        break
        for name, value in self.extra:
            headers.append([name, value])
        signed = self.url
        if self.millis_header:
            ts = str((now - rng.randint(0, MAX_AGE)) * 1000 + rng.randint(0, 999))
            headers.append([st[self.millis_header], ts])
            signed = ts.encode()
        mac = self.mac(self.key, signed + payload)
        value = self.prefix + (mac.hex() if self.encoding == 'hex' else b64(mac))
        headers.append([st[self.sig_header], value])
        d = Delivery(payload, headers, eid)
        d.target('body', 'body', 0, len(payload))
        d.target('signature', 'value', len(headers) - 1, 0, len(value))
        d.target('header', 'name', len(headers) - 1)
        if self.millis_header:
            d.target('timestamp', 'value', len(headers) - 2, 0, len(ts))
            d.target('header', 'name', len(headers) - 2)
        return d

    def verify(self, source, payload, headers):
        value = header(headers, self.sig_header)
        if value is None or not value.startswith(self.prefix):
            return False
        signed = self.url
        if self.millis_header:
            ts = header(headers, self.millis_header)
            if ts is None or len(ts) <= 3 or not is_digits(ts):
                return False
            signed = ts.encode()
        value = value[len(self.prefix):]
        given = hex_mac(value, self.mac_size) if self.encoding == 'hex' else b64_strict(value)
        return given == self.mac(self.key, signed + payload)


class Paddle:
    """Paddle Billing: Paddle-Signature, ts and h1 elements"""
    scheme = 'paddle'

    def __init__(self, rng):
        self.secret = 'pdl_ntfset_' + rng.word(26, 26) + '_' + rng.word(32, 32)
        self.old = 'pdl_ntfset_' + rng.word(26, 26) + '_' + rng.word(32, 32)
        self.sources = {'paddle': self.secret}
        self.ids = set()

    def make(self, rng, source, now):
        st = header_style(rng, ['Paddle-Signature'])
        if rng.random() < 0.9:
            eid = unique(self.ids, lambda: 'evt_' + rng.word(26, 26, LOWER_ALNUM))
            payload = json_event(rng, 'event_id', eid)
        else:
            eid, payload = None, rng.body_text().encode('utf-8')
        ts = str(now - rng.randint(0, MAX_AGE))
        mac = hmac_sha256(self.secret.encode(), ts.encode() + b':' + payload).hex()
        elements = ['ts=' + ts, 'h1=' + mac]
        if rng.random() < 0.3:
            elements.insert(rng.choice([1, 2]),
                            'h1=' + hmac_sha256(self.old.encode(), ts.encode() + b':' + payload).hex())
        value = ';'.join(elements)
        name = st['Paddle-Signature']
        d = Delivery(payload, noise_headers(rng, st) + [[name, value]], eid)
        d.target('body', 'body', 0, len(payload))
        at = value.index('h1=' + mac) + 3
        d.target('signature', *d.header_value_span(name, at, at + 64))
        d.target('timestamp', *d.header_value_span(name, 3, 3 + len(ts)))
        d.target('header', 'name', len(d.headers) - 1)
        return d

    def verify(self, source, payload, headers):
        value = header(headers, 'Paddle-Signature')
        if value is None:
            return False
        ts, macs = elements(value, ';', 'ts', 'h1')
        if len(ts) != 1 or not is_digits(ts[0]) or not macs:
            return False
        want = hmac_sha256(self.secret.encode(), ts[0].encode() + b':' + payload)
        return any(hex_mac(m) == want for m in macs)


ADYEN_SIGNED = [('pspReference',), ('originalReference',), ('merchantAccountCode',),
                ('merchantReference',), ('amount', 'value'), ('amount', 'currency'),
                ('eventCode',), ('success',)]


class Adyen:
    """Adyen: the item's own hmacSignature over eight of its fields"""
    scheme = 'adyen'

    def __init__(self, rng):
        self.key = rng.randbytes(32)
        hexkey = self.key.hex()
        self.sources = {'adyen': hexkey.upper() if rng.random() < 0.7 else hexkey}
        self.ids = set()

    def make(self, rng, source, now):
        psp = unique(self.ids, lambda: rng.word(16, 16, string.ascii_uppercase + string.digits))
        fields = {
            'pspReference': psp,
            'merchantAccountCode': rng.choice(['TestMerchant', 'Shop_EU', rng.text(1, 20)]),
            'merchantReference': rng.choice(['order-%d' % rng.randint(1, 10 ** 6), rng.text(0, 30)]),
            'eventCode': rng.choice(['AUTHORISATION', 'CAPTURE', 'REFUND', 'CANCELLATION',
                                     'CHARGEBACK', 'REPORT_AVAILABLE']),
            'success': rng.choice(['true', 'false']),
        }
        if rng.random() < 0.5:
            fields['originalReference'] = rng.word(16, 16, string.ascii_uppercase + string.digits)
        value = rng.randint(0, 10 ** 9)
        currency = rng.choice(['EUR', 'USD', 'JPY', 'CNY', 'BHD'])
        additional = {'hmacSignature': None}
        for k in rng.sample(['authCode', 'cardSummary', 'expiryDate', 'shopperReference',
                             'paymentMethodVariant', 'recurring.contractTypes'], rng.randint(0, 4)):
            additional[k] = rng.json_text(0, 20)
        # the members in a random order, the unsigned ones among them
        members = list(fields.items()) + [
            ('amount', {'currency': currency, 'value': Raw(str(value))} if rng.random() < 0.5
             else {'value': Raw(str(value)), 'currency': currency}),
            ('additionalData', additional),
            ('eventDate', '2024-%02d-%02dT10:00:00+01:00' % (rng.randint(1, 12), rng.randint(1, 28))),
        ]
        if rng.random() < 0.5:
            members.append(('reason', rng.json_text(0, 30)))
        if rng.random() < 0.3:
            members.append(('operations', ['CANCEL', 'CAPTURE', 'REFUND']))
        if rng.random() < 0.3:
            members.append(('paymentMethod', rng.choice(['visa', 'mc', 'ideal'])))
        rng.shuffle(members)
        item = dict(members)
        texts = [fields.get('pspReference'), fields.get('originalReference', ''),
                 fields['merchantAccountCode'], fields['merchantReference'], str(value), currency,
                 fields['eventCode'], fields['success']]
        sig = b64(hmac_sha256(self.key, ':'.join(texts).encode('utf-8')))
        additional['hmacSignature'] = sig
        style = JsonStyle(rng)
        wrapped = rng.random() < 0.6
        text = json_write({'NotificationRequestItem': item} if wrapped else item, rng, style)
        payload = text.encode('utf-8')
        d = Delivery(payload, [], '%s:%s:%s' % (psp, fields['eventCode'], fields['success']))
        d.target('body', 'body', 0, len(payload))
        token = json_string(sig, style).encode()
        at = payload.index(token)
        d.target('signature', 'body', at + 1, at + len(token) - 1)
        return d

    def verify(self, source, payload, headers):
        root = json_parse(payload)
        if not isinstance(root, tuple):
            return False
        wrappers = [v for k, v in root[1] if k == 'NotificationRequestItem']
        if not wrappers:
            item = root
        elif len(wrappers) == 1 and len(root[1]) == 1 and isinstance(wrappers[0], tuple):
            item = wrappers[0]
        else:
            return False

        def member(obj, name):
            """(count, value) of a member of an object"""
            found = [v for k, v in obj[1] if k == name]
            return len(found), found[-1] if found else None

        def text(v):
            if v is None:
                return ''
            if isinstance(v, Raw):
                return v.text
            if v is True or v is False:
                return 'true' if v else 'false'
            return v

        containers = {}
        for name in ('amount', 'additionalData'):
            n, v = member(item, name)
            if n > 1 or (v is not None and not isinstance(v, tuple)):
                return False
            containers[name] = v
        texts = []
        for path in ADYEN_SIGNED:
            if len(path) == 1:
                n, v = member(item, path[0])
            elif containers[path[0]] is None:
                n, v = 0, None
            else:
                n, v = member(containers[path[0]], path[1])
            if n > 1 or isinstance(v, (tuple, list)):
                return False
            texts.append(text(v))
        if containers['additionalData'] is None:
            return False
        n, sig = member(containers['additionalData'], 'hmacSignature')
        if n != 1 or not isinstance(sig, str):
            return False
        return b64_strict(sig) == hmac_sha256(self.key, ':'.join(texts).encode('utf-8'))


class Alipay:
    """Alipay's asynchronous notification form, RSA2 or RSA"""
    scheme = 'alipay'

    def __init__(self, rng):
        self.keys = {'a': rsa_key(), 'b': rsa_key(), 'c': rsa_key()}
        der = self.keys['c'].public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        bare = b64(der)
        # as copied from the console: lines of 64, or of 76 with spaces
        bare = '\n'.join(bare[i:i + 64] for i in range(0, len(bare), 64))
        self.sources = {'alipay': public_pem(self.keys['a']) + '\n' + public_pem(self.keys['b']),
                        'alipay_bare': bare}
        self.publics = {'alipay': [self.keys['a'].public_key(), self.keys['b'].public_key()],
                        'alipay_bare': [self.keys['c'].public_key()]}
        self.ids = set()

    def make(self, rng, source, now):
        charset = rng.choice(['utf-8', 'utf-8', 'UTF-8', 'gbk', 'GBK', 'gb2312'])
        codec = 'gbk' if charset.lower() in ('gbk', 'gb2312') else 'utf-8'

        def value(lo, hi):
            s = rng.text(lo, hi)
            return s.encode(codec, errors='replace') if codec == 'gbk' else s.encode('utf-8')

        notify_id = unique(self.ids, lambda: rng.word(34, 34, string.ascii_lowercase + string.digits))
        params = [
            ('app_id', b'2021000000000001'), ('charset', charset.encode()),
            ('notify_id', notify_id.encode()), ('notify_type', b'trade_status_sync'),
            ('notify_time', b'2024-01-%02d 12:%02d:00' % (rng.randint(1, 28), rng.randint(0, 59))),
            ('out_trade_no', ('order-%d' % rng.randint(1, 10 ** 9)).encode()),
            ('trade_no', rng.word(28, 28, string.digits).encode()),
            ('trade_status', rng.choice([b'TRADE_SUCCESS', b'TRADE_FINISHED', b'TRADE_CLOSED'])),
            ('total_amount', b'%d.%02d' % (rng.randint(0, 99999), rng.randint(0, 99))),
            ('subject', value(1, 30)), ('version', b'1.0'),
        ]
        if rng.random() < 0.5:
            params.append(('body', value(0, 80)))
        if rng.random() < 0.4:
            params.append(('fund_bill_list', b'[{"amount":"12.30","fundChannel":"ALIPAYACCOUNT"}]'))
        if rng.random() < 0.3:
            params.append(('passback_params', b''))
        for _ in range(rng.randint(0, 4)):
            name = rng.word(1, 12, string.ascii_letters + string.digits + '_')
            if name not in dict(params) and name not in ('sign', 'sign_type', 'charset'):
                params.append((name, value(0, 20)))
        sign_type, digest = rng.choice([('RSA2', hashes.SHA256()), ('RSA2', hashes.SHA256()),
                                        ('RSA', hashes.SHA1())])
        decoded = {k.encode(): v for k, v in params}
        content = form_signed_string(decoded, ('sign', 'sign_type'), True)
        key = rng.choice(['a', 'b']) if source == 'alipay' else 'c'
        sig = b64(self.keys[key].sign(content, padding.PKCS1v15(), digest))
        params += [('sign_type', sign_type.encode()), ('sign', sig.encode())]
        rng.shuffle(params)
        payload, spans = form_encode(params, rng, raw_utf8=(codec == 'utf-8'))
        d = Delivery(payload, [], notify_id)
        s, e = spans['sign']
        d.target('body', 'body', 0, s)
        d.target('body', 'body', e, len(payload))
        d.target('signature', 'body', s, e)
        return d

    def verify(self, source, payload, headers):
        params = form_decode(payload, 'charset')
        if params is None:
            return False
        sign_type = params.get(b'sign_type')
        digest = {b'RSA2': hashes.SHA256(), b'RSA': hashes.SHA1()}.get(sign_type)
        sig = b64_strict(params.get(b'sign', b'').decode('latin-1')) if b'sign' in params else None
        if digest is None or sig is None:
            return False
        content = form_signed_string(params, ('sign', 'sign_type'), True)
        return any(rsa_verify(k, sig, content, digest) for k in self.publics[source])


class AlipayV3:
    """Alipay's API v3 signed messages: alipay-signature, the base64
    SHA256withRSA of "<alipay-timestamp>\n<alipay-nonce>\n<body>\n" by
    either key of the source, the timestamp in unix milliseconds; the event
    id is the body's notify_id, else the body's SHA-256"""
    scheme = 'alipay_v3'

    def __init__(self, rng):
        self.keys = [rsa_key(), rsa_key()]
        self.sources = {'alipay_v3': public_pem(self.keys[0]) + public_pem(self.keys[1])}
        self.ids = set()

    def names(self):
        return ['alipay-signature', 'alipay-timestamp', 'alipay-nonce']

    def make(self, rng, source, now):
        st = header_style(rng, self.names() + ['alipay-sn'])
        while True:
            if rng.random() < 0.7:
                eid = rng.word(20, 32, string.digits)
                payload = json_event(rng, 'notify_id', eid)
            else:
                payload = (json_write(json_random_object(rng, 1, 0, 8, avoid=('notify_id',)), rng,
                                      JsonStyle(rng)).encode()
                           if rng.random() < 0.6 else rng.body_text().encode('utf-8'))
                eid = json_member_string(payload, 'notify_id') or sha256_hex(payload)
            if eid not in self.ids:
                self.ids.add(eid)
                break
        ts = str((now - rng.randint(0, MAX_AGE)) * 1000 + rng.randint(0, 999))
        nonce = rng.word(16, 32, string.ascii_lowercase + string.digits)
        signed = ts.encode() + b'\n' + nonce.encode() + b'\n' + payload + b'\n'
        sig = b64(rng.choice(self.keys).sign(signed, padding.PKCS1v15(), hashes.SHA256()))
        headers = noise_headers(rng, st) + [
            [st['alipay-timestamp'], ts], [st['alipay-nonce'], nonce], [st['alipay-signature'], sig]]
        if rng.random() < 0.5:
            headers.append([st['alipay-sn'], rng.word(32, 32, '0123456789abcdef')])
        d = Delivery(payload, headers, eid)
        d.target('body', 'body', 0, len(payload))
        d.target('signature', *d.header_value_span(st['alipay-signature'], 0, len(sig)))
        d.target('timestamp', *d.header_value_span(st['alipay-timestamp'], 0, len(ts)))
        d.target('field', *d.header_value_span(st['alipay-nonce'], 0, len(nonce)))
        for n in self.names():
            d.target('header', 'name', [k for k, _ in d.headers].index(st[n]))
        return d

    def verify(self, source, payload, headers):
        sig, ts, nonce = (header(headers, n) for n in self.names())
        if None in (sig, ts, nonce) or nonce == '' or '\n' in nonce or '\r' in nonce:
            return False
        if len(ts) <= 3 or not is_digits(ts):
            return False
        raw = b64_strict(sig)
        if raw is None:
            return False
        signed = ts.encode() + b'\n' + nonce.encode() + b'\n' + payload + b'\n'
        return any(rsa_verify(k.public_key(), raw, signed, hashes.SHA256()) for k in self.keys)


class Antom:
    """Antom, Alipay's global gateway: signature: algorithm=RSA256,
    keyVersion=<n>,signature=<URL-encoded base64 SHA256withRSA of
    "POST <path>\n<client-id>.<request-time>.<body>">, by either key of
    the source; the event id is the body's SHA-256"""
    scheme = 'antom'

    def __init__(self, rng):
        self.keys = [rsa_key(), rsa_key()]
        self.path = '/' + rng.word(3, 12, LOWER_ALNUM) + '/notify'
        self.sources = {'antom': self.path + '\n' + public_pem(self.keys[0]) + public_pem(self.keys[1])}
        self.ids = set()

    def make(self, rng, source, now):
        st = header_style(rng, ['signature', 'client-id', 'request-time'])
        headers = noise_headers(rng, st)
        client = 'SANDBOX_' + rng.word(12, 20, string.ascii_uppercase + string.digits)
        rtime = datetime.datetime.fromtimestamp(now - rng.randint(0, MAX_AGE), datetime.timezone.utc) \
            .strftime('%Y-%m-%dT%H:%M:%SZ')
        while True:
            payload = (json_write(json_random_object(rng, 1, 1, 8), rng, JsonStyle(rng)).encode()
                       if rng.random() < 0.8 else rng.body_text().encode('utf-8'))
            eid = sha256_hex(payload)
            if eid not in self.ids:
                self.ids.add(eid)
                break
        content = ('POST %s\n%s.%s.' % (self.path, client, rtime)).encode() + payload
        sig = b64(rng.choice(self.keys).sign(content, padding.PKCS1v15(), hashes.SHA256()))
        prefix = 'algorithm=RSA256,keyVersion=1,signature='
        value = prefix + urllib.parse.quote_plus(sig)
        headers += [[st['client-id'], client], [st['request-time'], rtime], [st['signature'], value]]
        d = Delivery(payload, headers, eid)
        d.target('body', 'body', 0, len(payload))
        d.target('signature', *d.header_value_span(st['signature'], len(prefix), len(value)))
        d.target('field', *d.header_value_span(st['client-id'], 0, len(client)))
        d.target('field', *d.header_value_span(st['request-time'], 0, len(rtime)))
        d.target('header', 'name', len(headers) - 1)
        return d

    def verify(self, source, payload, headers):
        value = header(headers, 'signature')
        client = header(headers, 'client-id')
        rtime = header(headers, 'request-time')
        if value is None or client is None or rtime is None:
            return False
        found = {}
        for item in value.split(','):
            item = trim_ows(item)
            if item == '':
                continue
            name, eq, v = item.partition('=')
            if not eq:
                return False
            name = trim_ows(name)
            if name in ('algorithm', 'keyVersion', 'signature'):
                if name in found:
                    return False
                found[name] = trim_ows(v)
        if found.get('algorithm') != 'RSA256' or 'signature' not in found:
            return False
        if BAD_ESCAPE.search(found['signature']):
            return False
        raw = urllib.parse.unquote_to_bytes(found['signature'].replace('+', ' '))
        try:
            sig = b64_strict(raw.decode('ascii'))
        except UnicodeDecodeError:
            return False
        if sig is None:
            return False
        content = ('POST %s\n' % self.path).encode() + client.encode() + b'.' + rtime.encode() + b'.' + payload
        return any(rsa_verify(k.public_key(), sig, content, hashes.SHA256()) for k in self.keys)


class Unionpay:
    """UnionPay's 5.1.0 backend notification form, signMethod 01"""
    scheme = 'unionpay'

    def __init__(self, rng):
        root_key, middle_key = rsa_key(), rsa_key()
        root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'Differential Test Root')])
        middle_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'Differential Test Middle')])
        self.root = certificate(root_key, root_name, ca=True)
        self.middle = certificate(middle_key, middle_name, root_key, root_name, ca=True)
        self.signers = []
        for n in (1, 2):
            key = rsa_key()
            name = x509.Name([
                x509.NameAttribute(NameOID.COUNTRY_NAME, 'CN'),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, 'idem differential test'),
                x509.NameAttribute(NameOID.COMMON_NAME,
                                   '041@Z%d@%s@0000000%d' % (n, UNIONPAY_COMPANY, n))])
            self.signers.append((key, certificate(key, name, middle_key, middle_name)))
        pems = [cert_pem(self.root), cert_pem(self.middle)]
        rng.shuffle(pems)
        self.sources = {'unionpay': ''.join(pems)}
        self.trusted = {}
        self.ids = set()

    def make(self, rng, source, now):
        encoding = rng.choice(['UTF-8', 'UTF-8', 'utf-8', 'GBK'])
        codec = 'gbk' if encoding == 'GBK' else 'utf-8'
        key, cert = rng.choice(self.signers)
        pem = cert_pem(cert)
        if rng.random() < 0.5:
            pem = pem.replace('\n', '\r\n')
        query_id = unique(self.ids, lambda: rng.word(21, 21, string.digits))
        params = [
            ('accessType', b'0'), ('bizType', b'000201'), ('currencyCode', b'156'),
            ('encoding', encoding.encode()), ('merId', b'777290058110048'),
            ('orderId', rng.word(8, 32, ALNUM).encode()), ('queryId', query_id.encode()),
            ('respCode', rng.choice([b'00', b'A6', b'03'])),
            ('respMsg', ('成功[%07d]' % rng.randint(0, 10 ** 6)).encode(codec)),
            ('settleAmt', str(rng.randint(1, 10 ** 7)).encode()), ('settleCurrencyCode', b'156'),
            ('settleDate', b'%02d%02d' % (rng.randint(1, 12), rng.randint(1, 28))),
            ('signMethod', b'01'), ('signPubKeyCert', pem.encode()),
            ('traceNo', rng.word(6, 6, string.digits).encode()),
            ('traceTime', rng.word(10, 10, string.digits).encode()),
            ('txnAmt', str(rng.randint(1, 10 ** 7)).encode()), ('txnSubType', b'01'),
            ('txnTime', rng.word(14, 14, string.digits).encode()), ('txnType', b'01'),
            ('version', b'5.1.0'),
        ]
        if rng.random() < 0.5:
            params.append(('reqReserved', rng.text(1, 40).encode(codec, errors='replace')))
        decoded = {k.encode(): v for k, v in params}
        content = form_signed_string(decoded, ('signature',), False)
        sig = b64(key.sign(sha256_hex(content).encode('ascii'), padding.PKCS1v15(), hashes.SHA256()))
        params.append(('signature', sig.encode()))
        rng.shuffle(params)
        payload, spans = form_encode(params, rng)
        d = Delivery(payload, [], query_id)
        s, e = spans['signature']
        d.target('body', 'body', 0, s)
        d.target('body', 'body', e, len(payload))
        d.target('signature', 'body', s, e)
        return d

    def chains(self, pem):
        """Is the PEM one certificate that chains to the root through the
        middle, whose CN's third "@" field names UnionPay?"""
        if pem not in self.trusted:
            ok = False
            try:
                text = pem.decode('ascii')
                if text.count('-----BEGIN') == 1:
                    cert = x509.load_pem_x509_certificate(pem)
                    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
                    self.middle.public_key().verify(cert.signature, cert.tbs_certificate_bytes,
                                                    padding.PKCS1v15(), cert.signature_hash_algorithm)
                    ok = (cert.issuer == self.middle.subject and len(cn) == 1 and
                          cn[0].value.split('@')[2:3] == [UNIONPAY_COMPANY])
            except Exception:  # pylint: disable=broad-except
                # whatever a mangled certificate makes the parser raise
                ok = False
            self.trusted[pem] = ok
        return self.trusted[pem]

    def verify(self, source, payload, headers):
        params = form_decode(payload, 'encoding')
        if params is None or params.get(b'version') != b'5.1.0' or params.get(b'signMethod') != b'01':
            return False
        sig = b64_strict(params.get(b'signature', b'').decode('latin-1'))
        pem = params.get(b'signPubKeyCert')
        if sig is None or pem is None or not self.chains(pem):
            return False
        public = x509.load_pem_x509_certificate(pem).public_key()
        content = form_signed_string(params, ('signature',), False)
        return rsa_verify(public, sig, sha256_hex(content).encode('ascii'), hashes.SHA256())


class Wechatpay:
    """WeChat Pay APIv3: platform certificates, or a WeChat Pay public key"""
    scheme = 'wechatpay'

    def __init__(self, rng):
        self.certs = []
        for n in (1, 2):
            key = rsa_key()
            name = x509.Name([
                x509.NameAttribute(NameOID.COUNTRY_NAME, 'CN'),
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, 'Tenpay.com'),
                x509.NameAttribute(NameOID.COMMON_NAME, 'Tenpay.com Root CA %d' % n)])
            serial = x509.random_serial_number() >> (4 * rng.randint(0, 8))
            self.certs.append((key, certificate(key, name, serial=serial)))
        self.pub_key = rsa_key()
        self.pub_id = 'PUB_KEY_ID_0114232134912410' + rng.word(14, 14, string.digits)
        self.sources = {
            'wechatpay': ''.join(cert_pem(c) for _, c in self.certs),
            'wechatpay_pubkey': self.pub_id + '\n' + public_pem(self.pub_key),
        }
        self.ids = set()

    def names(self):
        return ['Wechatpay-Serial', 'Wechatpay-Signature', 'Wechatpay-Timestamp', 'Wechatpay-Nonce']

    def make(self, rng, source, now):
        st = header_style(rng, self.names() + ['Wechatpay-Signature-Type'])
        if source == 'wechatpay':
            key, cert = rng.choice(self.certs)
            serial = '%X' % cert.serial_number
        else:
            key, serial = self.pub_key, self.pub_id
        if rng.random() < 0.95:
            eid = unique(self.ids, rng.uuid)
            resource = {'original_type': 'transaction', 'algorithm': 'AEAD_AES_256_GCM',
                        'ciphertext': b64(rng.randbytes(rng.randint(16, 600))),
                        'associated_data': rng.choice(['', 'transaction']),
                        'nonce': rng.word(12, 12)}
            body = {'create_time': '2024-01-01T12:00:00+08:00', 'resource_type': 'encrypt-resource',
                    'event_type': rng.choice(['TRANSACTION.SUCCESS', 'REFUND.SUCCESS']),
                    'summary': rng.choice(['支付成功', '退款成功', rng.text(0, 20)]),
                    'resource': resource}
            items = list(body.items())
            items.insert(rng.randint(0, len(items)), ('id', eid))
            payload = json_write(dict(items), rng, JsonStyle(rng)).encode('utf-8')
        else:
            eid, payload = None, rng.body_text().encode('utf-8')
        ts = str(now - rng.randint(0, MAX_AGE))
        nonce = rng.word(16, 32, string.ascii_uppercase + string.digits)
        signed = ts.encode() + b'\n' + nonce.encode() + b'\n' + payload + b'\n'
        sig = b64(key.sign(signed, padding.PKCS1v15(), hashes.SHA256()))
        headers = noise_headers(rng, st) + [
            [st['Wechatpay-Serial'], serial], [st['Wechatpay-Timestamp'], ts],
            [st['Wechatpay-Nonce'], nonce], [st['Wechatpay-Signature'], sig]]
        if rng.random() < 0.5:
            headers.append([st['Wechatpay-Signature-Type'], 'WECHATPAY2-SHA256-RSA2048'])
        d = Delivery(payload, headers, eid)
        d.target('body', 'body', 0, len(payload))
        d.target('signature', *d.header_value_span(st['Wechatpay-Signature'], 0, len(sig)))
        d.target('timestamp', *d.header_value_span(st['Wechatpay-Timestamp'], 0, len(ts)))
        d.target('field', *d.header_value_span(st['Wechatpay-Nonce'], 0, len(nonce)))
        d.target('field', *d.header_value_span(st['Wechatpay-Serial'], 0, len(serial)))
        for n in self.names():
            d.target('header', 'name', [k for k, _ in d.headers].index(st[n]))
        return d

    def verify(self, source, payload, headers):
        serial, sig, ts, nonce = (header(headers, n) for n in self.names())
        kind = header(headers, 'Wechatpay-Signature-Type')
        if None in (serial, sig, ts, nonce) or serial == '' or nonce == '' or '\n' in nonce:
            return False
        if kind is not None and kind != 'WECHATPAY2-SHA256-RSA2048':
            return False
        raw = b64_strict(sig)
        if raw is None or not is_digits(ts):
            return False
        if source == 'wechatpay':
            if any(c not in string.hexdigits for c in serial):
                return False
            keys = [k.public_key() for k, c in self.certs if int(serial or '0', 16) == c.serial_number]
        else:
            keys = [self.pub_key.public_key()] if serial == self.pub_id else []
        signed = ts.encode() + b'\n' + nonce.encode() + b'\n' + payload + b'\n'
        return any(rsa_verify(k, raw, signed, hashes.SHA256()) for k in keys)


class Paypal:
    """PayPal: a certificate chain to the secret's root, then the
    signature of the transmission id, time, webhook id and body's CRC-32"""
    scheme = 'paypal'
    subject = 'messageverificationcerts.paypal.com'
    iso = re.compile(r'^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$')

    def __init__(self, rng):
        root_key, middle_key = rsa_key(), rsa_key()
        root_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'Differential PayPal Root')])
        middle_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, 'Differential PayPal CA')])
        root = certificate(root_key, root_name, ca=True)
        middle = certificate(middle_key, middle_name, root_key, root_name, ca=True)
        self.key = rsa_key()
        name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, 'PayPal, Inc.'),
                          x509.NameAttribute(NameOID.COMMON_NAME, self.subject)])
        signer = certificate(self.key, name, middle_key, middle_name)
        self.webhook_id = rng.word(17, 17, string.ascii_uppercase + string.digits)
        # the intermediate kept in the secret, or sent with the certificate
        self.pems = {'paypal': cert_pem(signer),
                     'paypal_chain': cert_pem(signer) + cert_pem(middle)}
        self.sources = {
            'paypal': json.dumps({'webhook_id': self.webhook_id, 'subject': self.subject,
                                  'roots': cert_pem(middle) + cert_pem(root)}),
            'paypal_chain': json.dumps({'roots': cert_pem(root), 'subject': self.subject.upper(),
                                        'webhook_id': self.webhook_id}),
        }
        self.ids = set()

    def names(self):
        return ['PAYPAL-TRANSMISSION-ID', 'PAYPAL-TRANSMISSION-TIME', 'PAYPAL-TRANSMISSION-SIG',
                'PAYPAL-AUTH-ALGO', 'PAYPAL-CERT-PEM']

    def signed(self, tid, when, payload):
        """What PayPal signs"""
        return ('%s|%s|%s|%d' % (tid, when, self.webhook_id, zlib.crc32(payload))).encode('utf-8')

    def make(self, rng, source, now):
        st = header_style(rng, self.names() + ['PAYPAL-CERT-URL'])
        if rng.random() < 0.95:
            eid = unique(self.ids, lambda: 'WH-' + rng.word(17, 17, string.ascii_uppercase + string.digits)
                         + '-' + rng.word(17, 17, string.ascii_uppercase + string.digits))
            payload = json_event(rng, 'id', eid)
        else:
            eid, payload = None, rng.body_text().encode('utf-8')
        t = datetime.datetime.fromtimestamp(now - rng.randint(0, MAX_AGE), datetime.timezone.utc)
        when = t.strftime('%Y-%m-%dT%H:%M:%S') + rng.choice(['Z', 'Z', '.%03dZ' % rng.randint(0, 999)])
        tid = rng.uuid()
        sig = b64(self.key.sign(self.signed(tid, when, payload), padding.PKCS1v15(), hashes.SHA256()))
        headers = noise_headers(rng, st) + [
            [st['PAYPAL-TRANSMISSION-ID'], tid], [st['PAYPAL-TRANSMISSION-TIME'], when],
            [st['PAYPAL-TRANSMISSION-SIG'], sig], [st['PAYPAL-AUTH-ALGO'], 'SHA256withRSA'],
            [st['PAYPAL-CERT-URL'], 'https://api.paypal.com/v1/notifications/certs/CERT-' + rng.uuid()],
            [st['PAYPAL-CERT-PEM'], self.pems[source]]]
        rng.shuffle(headers)
        d = Delivery(payload, headers, eid)
        d.target('body', 'body', 0, len(payload))
        d.target('signature', *d.header_value_span(st['PAYPAL-TRANSMISSION-SIG'], 0, len(sig)))
        d.target('timestamp', *d.header_value_span(st['PAYPAL-TRANSMISSION-TIME'], 0, len(when)))
        d.target('field', *d.header_value_span(st['PAYPAL-TRANSMISSION-ID'], 0, len(tid)))
        for n in self.names():
            d.target('header', 'name', [k for k, _ in d.headers].index(st[n]))
        return d

    def verify(self, source, payload, headers):
        tid, when, sig, algo, pem = (header(headers, n) for n in self.names())
        if None in (tid, when, sig, algo, pem) or tid == '' or '|' in tid or algo != 'SHA256withRSA':
            return False
        m = self.iso.match(when)
        raw = b64_strict(sig)
        if m is None or raw is None or pem != self.pems[source]:
            return False
        try:
            datetime.datetime(*(int(x) for x in m.groups()[:6]))
        except ValueError:
            return False
        return rsa_verify(self.key.public_key(), raw, self.signed(tid, when, payload), hashes.SHA256())


class Mercadopago:
    """Mercado Pago: x-signature's ts and v1, over a manifest of the body's
    data.id, x-request-id and ts; the rest of the body is not signed"""
    scheme = 'mercadopago'
    marker = '@@data.id@@'

    def __init__(self, rng):
        self.secret = rng.word(64, 64, '0123456789abcdef')
        self.sources = {'mercadopago': self.secret}
        self.ids = set()

    def manifest(self, data_id, request_id, ts):
        """What Mercado Pago signs"""
        rid = 'request-id:%s;' % request_id if request_id else ''
        return ('id:%s;%sts:%s;' % (data_id.translate(ASCII_LOWER), rid, ts)).encode('utf-8')

    def make(self, rng, source, now):
        st = header_style(rng, ['x-signature', 'x-request-id'])
        headers = noise_headers(rng, st)
        if rng.random() < 0.6:
            data_id = str(rng.randint(10 ** 8, 10 ** 12))
            literal = data_id if rng.random() < 0.3 else '"%s"' % data_id
        else:
            data_id = rng.word(8, 24)
            literal = '"%s"' % data_id
        eid = unique(self.ids, lambda: str(rng.randint(10 ** 9, 10 ** 13)))
        data = json_random_object(rng, 2, 0, 3, avoid=('id',))
        data['id'] = Raw(self.marker)
        root = json_random_object(rng, 1, 0, 5, avoid=('id', 'data', 'action', 'type'))
        root.update({'action': rng.choice(['payment.updated', 'payment.created']), 'api_version': 'v1',
                     'data': data, 'id': Raw(eid) if rng.random() < 0.5 else eid, 'type': 'payment',
                     'user_id': Raw(str(rng.randint(10 ** 6, 10 ** 9)))})
        items = list(root.items())
        rng.shuffle(items)
        text = json_write(dict(items), rng, JsonStyle(rng))
        at = text.index(self.marker)
        payload = (text[:at] + literal + text[at + len(self.marker):]).encode('utf-8')
        start = len(text[:at].encode('utf-8')) + (1 if literal.startswith('"') else 0)
        ts = now - rng.randint(0, MAX_AGE)
        ts = str(ts * 1000 + rng.randint(0, 999)) if rng.random() < 0.3 else str(ts)
        request_id = rng.uuid() if rng.random() < 0.95 else None
        mac = hmac_sha256(self.secret.encode(), self.manifest(data_id, request_id, ts)).hex()
        sep = rng.choice([',', ', ', ' , '])
        if rng.random() < 0.8:
            value = 'ts=' + ts + sep + 'v1=' + mac
        else:
            value = 'v1=' + mac + sep + 'ts=' + ts
        if request_id:
            headers.append([st['x-request-id'], request_id])
        headers.append([st['x-signature'], value])
        d = Delivery(payload, headers, eid)
        d.target('body', 'body', start, start + len(data_id))
        d.target('signature', *d.header_value_span(st['x-signature'], value.index(mac), value.index(mac) + 64))
        at = value.index('ts=') + 3
        d.target('timestamp', *d.header_value_span(st['x-signature'], at, at + len(ts)))
        d.target('header', 'name', len(headers) - 1)
        if request_id:
            d.target('field', *d.header_value_span(st['x-request-id'], 0, len(request_id)))
            d.target('header', 'name', len(headers) - 2)
        return d

    def data_id(self, payload):
        """The body's data.id, a string or a number's text, each member
        once; None otherwise"""
        value = json_parse(payload)
        for name in ('data', 'id'):
            if not isinstance(value, tuple):
                return None
            found = [v for k, v in value[1] if k == name]
            if len(found) != 1:
                return None
            value = found[0]
        if isinstance(value, Raw):
            return value.text
        return value if isinstance(value, str) and value != '' and '\x00' not in value else None

    def verify(self, source, payload, headers):
        value = header(headers, 'x-signature')
        data_id = self.data_id(payload)
        if value is None or data_id is None:
            return False
        ts, macs = elements(value, ',', 'ts', 'v1')
        if len(ts) != 1 or len(macs) != 1 or not is_digits(ts[0]):
            return False
        secs = ts[0][:-3] if len(ts[0].lstrip('0')) >= 12 else ts[0]
        if not is_digits(secs) or int(secs) > 253402300799:
            return False
        want = hmac_sha256(self.secret.encode(), self.manifest(data_id, header(headers, 'x-request-id'), ts[0]))
        return hex_mac(macs[0]) == want


# ---- output -----------------------------------------------------------------

def copy_field(value):
    """A value in COPY's text format (None is NULL)"""
    if value is None:
        return '\\N'
    return (value.replace('\\', '\\\\').replace('\n', '\\n').replace('\r', '\\r')
            .replace('\t', '\\t'))


def main():
    if len(sys.argv) != 4:
        sys.exit('usage: sign.py SEED COUNT DIR')
    seed, count, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    rng = Random(seed)
    schemes = [
        Stripe(rng),
        Standard(rng, 'standard', 'webhook', True),
        Standard(rng, 'svix', 'svix', False),
        BodyMac(rng, 'github', 'X-Hub-Signature-256', 'sha256=', 'hex', id_header='X-GitHub-Delivery',
                extra=[('X-GitHub-Event', 'push'), ('X-GitHub-Hook-ID', '292430182')]),
        BodyMac(rng, 'shopify', 'X-Shopify-Hmac-Sha256', '', 'base64', id_header='X-Shopify-Webhook-Id',
                extra=[('X-Shopify-Topic', 'orders/paid')]),
        BodyMac(rng, 'razorpay', 'X-Razorpay-Signature', '', 'hex', id_header='X-Razorpay-Event-Id'),
        BodyMac(rng, 'checkout', 'Cko-Signature', '', 'hex', id_member='id'),
        Paddle(rng),
        Adyen(rng),
        BodyMac(rng, 'adyen_platform', 'HmacSignature', '', 'base64', hex_key=True),
        BodyMac(rng, 'square', 'x-square-hmacsha256-signature', '', 'base64', id_member='event_id',
                signed_url=True),
        BodyMac(rng, 'paystack', 'x-paystack-signature', '', 'hex', sha512=True),
        BodyMac(rng, 'airwallex', 'x-signature', '', 'hex', id_member='id', millis_header='x-timestamp'),
        Alipay(rng),
        AlipayV3(rng),
        Antom(rng),
        Unionpay(rng),
        Wechatpay(rng),
        Paypal(rng),
        Mercadopago(rng),
    ]
    kinds = ['genuine', 'body', 'signature', 'timestamp', 'header', 'field']
    now = int(time.time())
    n = 0
    with open(os.path.join(out, 'sources.tsv'), 'w', encoding='utf-8', newline='') as f:
        for s in schemes:
            for source, secret in s.sources.items():
                f.write('\t'.join(copy_field(x) for x in (source, s.scheme, secret)) + '\n')
    with open(os.path.join(out, 'cases.tsv'), 'w', encoding='utf-8', newline='') as f:
        for s in schemes:
            counts = dict.fromkeys(kinds, 0)
            missed = 0
            sources = list(s.sources)
            for i in range(count):
                source = sources[i % len(sources)]
                # each case draws from its own generator, so that a key made
                # afresh (and so the signatures) changes no other case
                d = s.make(Random('%d:%s:%d' % (seed, s.scheme, i)), source, now)
                if not s.verify(source, d.payload, d.headers):
                    sys.exit('%s: a genuine delivery does not verify here: %r %r'
                             % (source, d.payload, d.headers))
                want_id = d.event_id
                if s.scheme in ('stripe', 'checkout', 'wechatpay', 'paddle', 'paypal'):
                    want_id = json_member_string(d.payload, 'event_id' if s.scheme == 'paddle' else 'id')
                    if want_id != d.event_id:
                        sys.exit('%s: the event id %r reads back as %r' % (source, d.event_id, want_id))
                what = 'genuine'
                if b'\\u0000' in d.payload:
                    what += ', a \\u0000 escape in its JSON'
                cases = [('genuine', d.payload, d.headers, True, want_id, what)]
                for kind in kinds[1:]:
                    if kind not in d.targets:
                        continue
                    m = mutate(Random('%d:%s:%d:%s' % (seed, s.scheme, i, kind)), d, kind,
                               lambda p, h: s.verify(source, p, h))
                    if m is None:
                        missed += 1
                        continue
                    cases.append((kind, m[0], m[1], False, None, m[2]))
                for kind, payload, headers, expect, eid, what in cases:
                    n += 1
                    counts[kind] += 1
                    f.write('\t'.join(copy_field(x) for x in (
                        str(n), source, kind, payload.decode('utf-8'),
                        json.dumps(dict((k, v) for k, v in headers)), 't' if expect else 'f',
                        eid, '%s %d: %s' % (source, i, what))) + '\n')
            print('%-10s %s%s' % (s.scheme, ' '.join('%s %d' % (k, v) for k, v in counts.items() if v),
                                  ', %d mutants not found' % missed if missed else ''))


if __name__ == '__main__':
    main()
