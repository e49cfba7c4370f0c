/*
 * webhook_verify.c
 *		idem_webhook_verify: checks the HMAC-SHA256 signature of an incoming
 *		webhook, in the Stripe scheme or the Standard Webhooks scheme.
 *
 * Headers and payload come from whoever can reach the application's
 * endpoint, so any defect in them (missing, malformed, forged, stale) is a
 * plain false and never an error: an error would let a stranger decide
 * whether the caller's transaction aborts.  Only what the application
 * configures (scheme, secret, tolerance) raises errors, and those are raised
 * before the request is looked at, so a misconfiguration shows up on the
 * first call whatever the request holds.  Error messages never quote the
 * secret.  Nothing is written.
 *
 * The MAC is computed with PostgreSQL's own HMAC (common/hmac.h) and
 * compared with every candidate signature in constant time.
 */
#include "postgres.h"

#include "common/base64.h"
#if PG_VERSION_NUM >= 140000
#include "common/hmac.h"
#endif
#include "common/sha2.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "idem.h"

#define MAC_LEN			PG_SHA256_DIGEST_LENGTH
#define MAC_HEX_LEN		(MAC_LEN * 2)
#define MAC_B64_LEN		44		/* 32 bytes in padded base64 */

/* Latest accepted unix timestamp: 9999-12-31 23:59:59 UTC */
#define MAX_UNIX_SECS	INT64CONST(253402300799)

#define STANDARD_SECRET_PREFIX "whsec_"

/* A slice of a header value or of the secret; not NUL-terminated */
typedef struct Slice
{
	const char *data;
	size_t		len;
} Slice;

/* Is the slice exactly the given ASCII word? */
static bool
slice_is(Slice s, const char *word)
{
	size_t		len = strlen(word);

	return s.len == len && memcmp(s.data, word, len) == 0;
}

/* Header names are ASCII tokens: fold only A-Z, whatever the locale */
static bool
header_name_equal(const char *a, size_t alen, const char *b)
{
	size_t		blen = strlen(b);

	if (alen != blen)
		return false;
	for (size_t i = 0; i < alen; i++)
	{
		char		ca = a[i];
		char		cb = b[i];

		if (ca >= 'A' && ca <= 'Z')
			ca += 'a' - 'A';
		if (cb >= 'A' && cb <= 'Z')
			cb += 'a' - 'A';
		if (ca != cb)
			return false;
	}
	return true;
}

/* Drop HTTP optional whitespace (spaces, tabs) at both ends */
static Slice
trim_ows(Slice s)
{
	while (s.len > 0 && (s.data[0] == ' ' || s.data[0] == '\t'))
	{
		s.data++;
		s.len--;
	}
	while (s.len > 0 && (s.data[s.len - 1] == ' ' || s.data[s.len - 1] == '\t'))
		s.len--;
	return s;
}

/*
 * Take the next sep-separated element of *rest, trimmed, into *item; false
 * when the list is used up.  Empty elements come back empty: callers skip
 * them, so doubled separators are harmless.
 */
static bool
next_element(Slice *rest, char sep, Slice *item)
{
	const char *p;

	if (rest->data == NULL)
		return false;
	p = memchr(rest->data, sep, rest->len);
	if (p == NULL)
	{
		item->data = rest->data;
		item->len = rest->len;
		rest->data = NULL;
		rest->len = 0;
	}
	else
	{
		item->data = rest->data;
		item->len = p - rest->data;
		rest->len -= item->len + 1;
		rest->data = p + 1;
	}
	*item = trim_ows(*item);
	return true;
}

/* Split "name<sep>value" at the first sep, both sides trimmed; false without sep */
static bool
split_pair(Slice item, char sep, Slice *name, Slice *value)
{
	const char *p = memchr(item.data, sep, item.len);

	if (p == NULL)
		return false;
	name->data = item.data;
	name->len = p - item.data;
	value->data = p + 1;
	value->len = item.len - name->len - 1;
	*name = trim_ows(*name);
	*value = trim_ows(*value);
	return true;
}

/*
 * Find a header by case-insensitive name in a jsonb object of
 * name -> string.  A non-object, a missing name, a non-string value or a
 * name present twice (in different cases) all count as missing: a request
 * whose headers are ambiguous is not one to trust.  The value is taken as
 * it is, not trimmed: webhook-id and webhook-timestamp are signed as sent,
 * and the id the caller dedups on must be the very one that was signed (a
 * padded copy of a captured delivery would otherwise verify under a new
 * dedup key).  The signature lists trim their own entries.
 */
static bool
find_header(Jsonb *headers, const char *name, Slice *value)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			found = 0;
	bool		is_string = false;

	if (!JB_ROOT_IS_OBJECT(headers))
		return false;

	it = JsonbIteratorInit(&headers->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		match;

		if (tok != WJB_KEY)
			continue;
		match = header_name_equal(v.val.string.val, v.val.string.len, name);
		/* the key's value; nested containers come back whole */
		tok = JsonbIteratorNext(&it, &v, true);
		if (!match || tok != WJB_VALUE)
			continue;
		found++;
		is_string = (v.type == jbvString);
		if (is_string)
		{
			value->data = v.val.string.val;
			value->len = v.val.string.len;
		}
	}
	if (found != 1 || !is_string)
		return false;
	return true;
}

/* Unix seconds written as plain decimal digits, up to year 9999 */
static bool
parse_unix_seconds(Slice s, int64 *secs)
{
	int64		result = 0;

	if (s.len == 0)
		return false;
	for (size_t i = 0; i < s.len; i++)
	{
		if (s.data[i] < '0' || s.data[i] > '9')
			return false;
		result = result * 10 + (s.data[i] - '0');
		if (result > MAX_UNIX_SECS)
			return false;
	}
	*secs = result;
	return true;
}

/*
 * Is the timestamp within tolerance of the wall clock, in either direction?
 * A negative tolerance_usecs means no check.  Both sides stay far from
 * int64 overflow: secs is bounded by year 9999 and the clock by the
 * timestamp range.
 */
static bool
timestamp_acceptable(int64 secs, double tolerance_usecs)
{
	int64		now_unix_usecs;
	int64		diff;

	if (tolerance_usecs < 0)
		return true;
	now_unix_usecs = GetCurrentTimestamp() +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
	diff = now_unix_usecs - secs * USECS_PER_SEC;
	if (diff < 0)
		diff = -diff;
	return (double) diff <= tolerance_usecs;
}

/* Value of one hex digit, or -1 */
static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Exactly 64 hex digits into a MAC; anything else is no signature at all */
static bool
decode_hex_mac(Slice s, uint8 *mac)
{
	if (s.len != MAC_HEX_LEN)
		return false;
	for (int i = 0; i < MAC_LEN; i++)
	{
		int			hi = hex_value(s.data[2 * i]);
		int			lo = hex_value(s.data[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		mac[i] = (uint8) ((hi << 4) | lo);
	}
	return true;
}

/*
 * Is text exactly the padded standard base64 of the bytes it decoded to?
 * pg_b64_decode accepts more than that (data after the padding, stray low
 * bits in the last character): a signature has one accepted spelling, and
 * a secret mangled that way fails on the first call instead of making every
 * delivery's signature mismatch.
 */
static bool
base64_is_canonical(const char *bytes, int len, Slice text)
{
	int			encmax = pg_b64_enc_len(len);
	char	   *again = palloc(encmax);
	int			enclen = pg_b64_encode(bytes, len, again, encmax);
	bool		same = (enclen >= 0 && (size_t) enclen == text.len &&
						memcmp(again, text.data, text.len) == 0);

	/* the text may be a secret */
	explicit_bzero(again, encmax);
	pfree(again);
	return same;
}

/*
 * Exactly the canonical padded base64 of 32 bytes into a MAC.  Base64 lets
 * the unused low bits of the last character vary; re-encoding rejects such
 * variants, so one MAC has one accepted spelling, as with the string
 * comparison of the reference libraries.
 */
static bool
decode_b64_mac(Slice s, uint8 *mac)
{
	char		buf[MAC_LEN + 3];

	if (s.len != MAC_B64_LEN)
		return false;
	if (pg_b64_decode(s.data, (int) s.len, buf, sizeof(buf)) != MAC_LEN ||
		!base64_is_canonical(buf, MAC_LEN, s))
		return false;
	memcpy(mac, buf, MAC_LEN);
	return true;
}

/* Compare two MACs in time independent of where they differ */
static bool
mac_equal(const uint8 *a, const uint8 *b)
{
	volatile uint8 diff = 0;

	for (int i = 0; i < MAC_LEN; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

#if PG_VERSION_NUM >= 140000

/* HMAC-SHA256 of the concatenated parts */
static void
hmac_sha256(const uint8 *key, size_t keylen, const Slice *parts, int nparts,
			uint8 *mac)
{
	pg_hmac_ctx *ctx = pg_hmac_create(PG_SHA256);
	bool		ok;

	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	ok = pg_hmac_init(ctx, key, keylen) == 0;
	for (int i = 0; ok && i < nparts; i++)
		ok = pg_hmac_update(ctx, (const uint8 *) parts[i].data, parts[i].len) == 0;
	ok = ok && pg_hmac_final(ctx, mac, MAC_LEN) == 0;
	if (!ok)
	{
#if PG_VERSION_NUM >= 150000
		const char *reason = pg_hmac_error(ctx);
#else
		const char *reason = "unknown";
#endif

		pg_hmac_free(ctx);
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not compute HMAC-SHA256: %s", reason)));
	}
	pg_hmac_free(ctx);
}

#else							/* PostgreSQL 13 has no common/hmac.h */

/* HMAC-SHA256 of the concatenated parts (RFC 2104 over the core SHA-256) */
static void
hmac_sha256(const uint8 *key, size_t keylen, const Slice *parts, int nparts,
			uint8 *mac)
{
	uint8		k[PG_SHA256_BLOCK_LENGTH];
	uint8		pad[PG_SHA256_BLOCK_LENGTH];
	uint8		inner[MAC_LEN];
	pg_sha256_ctx ctx;

	memset(k, 0, sizeof(k));
	if (keylen > PG_SHA256_BLOCK_LENGTH)
	{
		pg_sha256_init(&ctx);
		pg_sha256_update(&ctx, key, keylen);
		pg_sha256_final(&ctx, k);
	}
	else
		memcpy(k, key, keylen);

	for (int i = 0; i < PG_SHA256_BLOCK_LENGTH; i++)
		pad[i] = k[i] ^ 0x36;
	pg_sha256_init(&ctx);
	pg_sha256_update(&ctx, pad, sizeof(pad));
	for (int i = 0; i < nparts; i++)
		pg_sha256_update(&ctx, (const uint8 *) parts[i].data, parts[i].len);
	pg_sha256_final(&ctx, inner);

	for (int i = 0; i < PG_SHA256_BLOCK_LENGTH; i++)
		pad[i] = k[i] ^ 0x5c;
	pg_sha256_init(&ctx);
	pg_sha256_update(&ctx, pad, sizeof(pad));
	pg_sha256_update(&ctx, inner, sizeof(inner));
	pg_sha256_final(&ctx, mac);

	explicit_bzero(k, sizeof(k));
	explicit_bzero(pad, sizeof(pad));
	explicit_bzero(inner, sizeof(inner));
	explicit_bzero(&ctx, sizeof(ctx));
}

#endif

/*
 * Stripe: Stripe-Signature is "t=<unix>,v1=<hex>[,v1=<hex>...][,v0=...]",
 * the MAC is over "<t>.<payload>" keyed with the secret string exactly as
 * given (whsec_ prefix included).  Any v1 may match (Stripe sends one per
 * active secret while a secret is rolled); v0 and unknown elements are
 * ignored; no t, two t, or no v1 at all is false.
 */
static bool
verify_stripe(Slice secret, Slice payload, Jsonb *headers,
			  double tolerance_usecs)
{
	Slice		header;
	Slice		rest;
	Slice		item;
	Slice		name;
	Slice		value;
	Slice		t = {NULL, 0};
	int			nt = 0;
	int			nv1 = 0;
	int64		secs;
	uint8		expected[MAC_LEN];
	uint8		given[MAC_LEN];
	bool		matched = false;
	Slice		parts[3];

	if (!find_header(headers, "stripe-signature", &header))
		return false;

	/* first pass: the timestamp, and whether there is any v1 */
	rest = header;
	while (next_element(&rest, ',', &item))
	{
		if (!split_pair(item, '=', &name, &value))
			continue;
		if (slice_is(name, "t"))
		{
			t = value;
			nt++;
		}
		else if (slice_is(name, "v1"))
			nv1++;
	}
	if (nt != 1 || nv1 == 0 || !parse_unix_seconds(t, &secs))
		return false;
	if (!timestamp_acceptable(secs, tolerance_usecs))
		return false;

	parts[0] = t;
	parts[1].data = ".";
	parts[1].len = 1;
	parts[2] = payload;
	hmac_sha256((const uint8 *) secret.data, secret.len, parts, 3, expected);

	/* second pass: every v1, without stopping at the first match */
	rest = header;
	while (next_element(&rest, ',', &item))
	{
		if (!split_pair(item, '=', &name, &value) || !slice_is(name, "v1"))
			continue;
		if (decode_hex_mac(value, given))
			matched |= mac_equal(expected, given);
	}
	explicit_bzero(expected, sizeof(expected));
	return matched;
}

/*
 * Standard Webhooks: webhook-id, webhook-timestamp and webhook-signature
 * ("v1,<base64> v1,<base64> ..."); the MAC is over "<id>.<timestamp>.<payload>"
 * keyed with the decoded secret.  Any v1 may match; other versions (v1a,
 * the asymmetric one) are ignored.
 */
static bool
verify_standard(const uint8 *key, size_t keylen, Slice payload,
				Jsonb *headers, double tolerance_usecs)
{
	Slice		id;
	Slice		ts;
	Slice		sigs;
	Slice		rest;
	Slice		item;
	Slice		version;
	Slice		sig;
	int64		secs;
	uint8		expected[MAC_LEN];
	uint8		given[MAC_LEN];
	bool		any_v1 = false;
	bool		matched = false;
	Slice		parts[5];

	if (!find_header(headers, "webhook-id", &id) || id.len == 0 ||
		!find_header(headers, "webhook-timestamp", &ts) ||
		!find_header(headers, "webhook-signature", &sigs))
		return false;
	if (!parse_unix_seconds(ts, &secs))
		return false;

	rest = sigs;
	while (next_element(&rest, ' ', &item))
	{
		if (split_pair(item, ',', &version, &sig) && slice_is(version, "v1"))
			any_v1 = true;
	}
	if (!any_v1)
		return false;
	if (!timestamp_acceptable(secs, tolerance_usecs))
		return false;

	parts[0] = id;
	parts[1].data = ".";
	parts[1].len = 1;
	parts[2] = ts;
	parts[3] = parts[1];
	parts[4] = payload;
	hmac_sha256(key, keylen, parts, 5, expected);

	rest = sigs;
	while (next_element(&rest, ' ', &item))
	{
		if (!split_pair(item, ',', &version, &sig) || !slice_is(version, "v1"))
			continue;
		if (decode_b64_mac(sig, given))
			matched |= mac_equal(expected, given);
	}
	explicit_bzero(expected, sizeof(expected));
	return matched;
}

/*
 * The key of a Standard Webhooks secret: "whsec_" (optional) then base64.
 * A secret that does not decode is the application's configuration error,
 * not the request's fault, so it is an error rather than false.  Returns a
 * palloc'd key; the caller wipes it.
 */
static uint8 *
standard_secret_key(Slice secret, size_t *keylen)
{
	size_t		plen = strlen(STANDARD_SECRET_PREFIX);
	uint8	   *key = NULL;
	int			keymax = 0;
	int			len = -1;

	if (secret.len >= plen && memcmp(secret.data, STANDARD_SECRET_PREFIX, plen) == 0)
	{
		secret.data += plen;
		secret.len -= plen;
	}
	/* pg_b64_dec_len computes len * 3 in an int */
	if (secret.len > 0 && secret.len <= PG_INT32_MAX / 3)
	{
		keymax = pg_b64_dec_len((int) secret.len);
		key = palloc(keymax);
		len = pg_b64_decode(secret.data, (int) secret.len, (char *) key, keymax);
	}
	if (len > 0 && !base64_is_canonical((char *) key, len, secret))
		len = -1;
	if (len <= 0)
	{
		/* a partial decode may have left key bytes behind */
		if (key != NULL)
			explicit_bzero(key, keymax);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook secret is not valid base64"),
				 errdetail("A secret of the \"standard\" scheme is \"whsec_\" followed by the standard base64 (with padding) of the key."),
				 errhint("Check for stray whitespace or a truncated secret.")));
	}
	*keylen = (size_t) len;
	return key;
}

/*
 * Tolerance in microseconds, a month counting as 30 days; -1 for NULL (no
 * check).  Done in double: a huge interval must not overflow.
 */
static double
tolerance_usecs_arg(FunctionCallInfo fcinfo, int argno)
{
	Interval   *iv;
	double		usecs;

	if (PG_ARGISNULL(argno))
		return -1;
	iv = PG_GETARG_INTERVAL_P(argno);
	usecs = (double) iv->month * DAYS_PER_MONTH * USECS_PER_DAY +
		(double) iv->day * USECS_PER_DAY + (double) iv->time;
	if (usecs < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tolerance must not be negative"),
				 errhint("Use NULL to skip the timestamp check.")));
	return usecs;
}

PG_FUNCTION_INFO_V1(idem_webhook_verify);

/*
 * idem_webhook_verify(scheme, secret, payload, headers, tolerance): true when
 * the headers carry a valid, fresh signature of payload under secret.
 */
Datum
idem_webhook_verify(PG_FUNCTION_ARGS)
{
	text	   *scheme_t;
	text	   *secret_t;
	text	   *payload_t;
	Slice		scheme;
	Slice		secret;
	Slice		payload;
	Jsonb	   *headers;
	double		tolerance_usecs;
	bool		result;

	/* configuration first: these errors must not depend on the request */
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("webhook signature scheme must not be null")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("webhook secret must not be null")));

	scheme_t = PG_GETARG_TEXT_PP(0);
	scheme.data = VARDATA_ANY(scheme_t);
	scheme.len = VARSIZE_ANY_EXHDR(scheme_t);
	if (!slice_is(scheme, "stripe") && !slice_is(scheme, "standard"))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown webhook signature scheme \"%s\"",
						text_to_cstring(scheme_t)),
				 errhint("The schemes are \"stripe\" and \"standard\".")));

	secret_t = PG_GETARG_TEXT_PP(1);
	secret.data = VARDATA_ANY(secret_t);
	secret.len = VARSIZE_ANY_EXHDR(secret_t);
	if (secret.len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook secret must not be empty")));

	tolerance_usecs = tolerance_usecs_arg(fcinfo, 4);

	if (slice_is(scheme, "stripe"))
	{
		if (PG_ARGISNULL(2) || PG_ARGISNULL(3))
			PG_RETURN_BOOL(false);
		payload_t = PG_GETARG_TEXT_PP(2);
		payload.data = VARDATA_ANY(payload_t);
		payload.len = VARSIZE_ANY_EXHDR(payload_t);
		headers = PG_GETARG_JSONB_P(3);
		result = verify_stripe(secret, payload, headers, tolerance_usecs);
	}
	else
	{
		size_t		keylen;
		uint8	   *key = standard_secret_key(secret, &keylen);

		if (PG_ARGISNULL(2) || PG_ARGISNULL(3))
			result = false;
		else
		{
			payload_t = PG_GETARG_TEXT_PP(2);
			payload.data = VARDATA_ANY(payload_t);
			payload.len = VARSIZE_ANY_EXHDR(payload_t);
			headers = PG_GETARG_JSONB_P(3);
			result = verify_standard(key, keylen, payload, headers,
									 tolerance_usecs);
		}
		explicit_bzero(key, keylen);
		pfree(key);
	}
	PG_RETURN_BOOL(result);
}
