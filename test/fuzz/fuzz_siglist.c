/*
 * fuzz_siglist.c
 *		Fuzz target: the signature lists of signature headers, Stripe's shape
 *		("t=..,v1=..", and Paddle's "ts=..;h1=..") and Standard Webhooks'
 *		("v1,<base64> v1a,<base64>", Svix's too), read and checked by the
 *		schemes (scheme_stripe.c, scheme_paddle.c) under fixed keys.
 *
 * Input: a first byte of options (bits 0-1: Stripe, Paddle, Standard
 * Webhooks with an HMAC secret, or with an Ed25519 key; bit 2: a five-minute
 * tolerance instead of none; bit 3: Svix's header names), then lines:
 * Stripe and Paddle: the signature header, then the body; Standard
 * Webhooks: the id, the timestamp, the signature header, then the body.
 * Every "{mac}" in the signature header is replaced with the signature
 * computed here (OpenSSL, not idem), so that the fuzzer can mix the right
 * signature into any list.  Checked: when idem says the request verifies,
 * the right signature is in the header.
 */
#include "fuzz.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/base64.h"

#include "webhook/scheme.h"

/* The formats, by the low bits of the first byte */
enum
{
	FORMAT_STRIPE, FORMAT_PADDLE, FORMAT_STANDARD, FORMAT_STANDARD_ED25519
};

/* The placeholder of the right signature */
#define PLACEHOLDER		"{mac}"

/* The private half of the fixed Ed25519 key (a test key of these targets) */
static const uint8 ed25519_seed[32] = {
	0x69, 0x64, 0x65, 0x6d, 0x20, 0x66, 0x75, 0x7a, 0x7a, 0x20, 0x45, 0x64,
	0x32, 0x35, 0x35, 0x31, 0x39, 0x20, 0x74, 0x65, 0x73, 0x74, 0x20, 0x6b,
	0x65, 0x79, 0x20, 0x30, 0x30, 0x30, 0x30, 0x31
};
static EVP_PKEY *ed25519_key;
static char ed25519_secret[64];

/* The Ed25519 key, and its public half as a "whpk_" secret */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	uint8		pub[32];
	size_t		publen = sizeof(pub);
	int			n;

	ed25519_key = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL,
											   ed25519_seed, sizeof(ed25519_seed));
	if (ed25519_key == NULL ||
		EVP_PKEY_get_raw_public_key(ed25519_key, pub, &publen) != 1)
		fuzz_fail("cannot make the Ed25519 key");
	memcpy(ed25519_secret, "whpk_", 5);
	n = pg_b64_encode((const char *) pub, (int) publen, ed25519_secret + 5,
					  sizeof(ed25519_secret) - 6);
	ed25519_secret[5 + n] = '\0';
	return 0;
}

/* HMAC-SHA256 of parts under key, by OpenSSL's one-shot HMAC */
static void
hmac(Slice key, const Slice *parts, int nparts, uint8 *mac)
{
	StringInfoData msg;
	unsigned int len = 0;

	initStringInfo(&msg);
	for (int i = 0; i < nparts; i++)
		appendBinaryStringInfo(&msg, parts[i].data, parts[i].len);
	if (HMAC(EVP_sha256(), key.len > 0 ? key.data : "", (int) key.len,
			 (const uint8 *) msg.data, msg.len, mac, &len) == NULL || len != 32)
		fuzz_fail("HMAC failed");
}

/* The Ed25519 signature of parts, in base64 */
static char *
ed25519_sign(const Slice *parts, int nparts)
{
	StringInfoData msg;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8		sig[64];
	size_t		siglen = sizeof(sig);
	char	   *b64 = palloc(pg_b64_enc_len(64) + 1);
	int			n;

	initStringInfo(&msg);
	for (int i = 0; i < nparts; i++)
		appendBinaryStringInfo(&msg, parts[i].data, parts[i].len);
	if (ctx == NULL || EVP_DigestSignInit(ctx, NULL, NULL, NULL, ed25519_key) != 1 ||
		EVP_DigestSign(ctx, sig, &siglen, (const uint8 *) msg.data, msg.len) != 1)
		fuzz_fail("Ed25519 signing failed");
	EVP_MD_CTX_free(ctx);
	n = pg_b64_encode((const char *) sig, (int) siglen, b64, pg_b64_enc_len(64));
	b64[n] = '\0';
	return b64;
}

/* Lowercase hex of a MAC */
static char *
to_hex(const uint8 *mac)
{
	char	   *hex = palloc(65);

	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
	return hex;
}

/* Base64 of a MAC */
static char *
to_base64(const uint8 *mac)
{
	char	   *b64 = palloc(pg_b64_enc_len(32) + 1);
	int			n = pg_b64_encode((const char *) mac, 32, b64, pg_b64_enc_len(32));

	b64[n] = '\0';
	return b64;
}

/* s with every placeholder replaced by sig */
static Slice
substitute(Slice s, const char *sig)
{
	StringInfoData buf;
	size_t		plen = strlen(PLACEHOLDER);
	Slice		result;

	initStringInfo(&buf);
	for (size_t i = 0; i < s.len;)
	{
		if (s.len - i >= plen && memcmp(s.data + i, PLACEHOLDER, plen) == 0)
		{
			appendStringInfoString(&buf, sig);
			i += plen;
		}
		else
			appendStringInfoChar(&buf, s.data[i++]);
	}
	result.data = buf.data;
	result.len = buf.len;
	return result;
}

/* Does hay hold needle, in any case if fold? */
static bool
contains(Slice hay, const char *needle, bool fold)
{
	size_t		n = strlen(needle);

	for (size_t i = 0; i + n <= hay.len; i++)
		if (fold ? pg_strncasecmp(hay.data + i, needle, n) == 0 :
			memcmp(hay.data + i, needle, n) == 0)
			return true;
	return false;
}

/*
 * The timestamp of a Stripe-shaped header as read here: the value of the
 * first element named ts_name, trimmed
 */
static Slice
timestamp_of(Slice header, char sep, const char *ts_name)
{
	Slice		none = {"", 0};
	size_t		start = 0;

	while (start <= header.len)
	{
		const char *end = memchr(header.data + start, sep, header.len - start);
		size_t		stop = end ? (size_t) (end - header.data) : header.len;
		Slice		item = {header.data + start, stop - start};
		const char *eq = memchr(item.data, '=', item.len);

		if (eq != NULL)
		{
			Slice		name = {item.data, eq - item.data};
			Slice		value = {eq + 1, item.len - name.len - 1};

			while (name.len > 0 && (name.data[0] == ' ' || name.data[0] == '\t'))
				name.data++, name.len--;
			while (name.len > 0 && (name.data[name.len - 1] == ' ' || name.data[name.len - 1] == '\t'))
				name.len--;
			while (value.len > 0 && (value.data[0] == ' ' || value.data[0] == '\t'))
				value.data++, value.len--;
			while (value.len > 0 && (value.data[value.len - 1] == ' ' || value.data[value.len - 1] == '\t'))
				value.len--;
			if (idem_slice_is(name, ts_name))
				return value;
		}
		start = stop + 1;
	}
	return none;
}

/* One input */
int
LLVMFuzzerTestOneInput(const uint8 *data, size_t size)
{
	int			format;
	bool		svix;
	Slice		rest;
	Slice		lines[3];
	int			nlines;
	Slice		names[3];
	Slice		values[3];
	VerifyRequest req;
	void	   *key;
	char	   *expected_sig;
	Slice		sigs;
	bool		verified;
	uint8		mac[32];

	if (size < 1)
		return 0;
	format = data[0] & 3;
	svix = (data[0] & 8) != 0;
	rest.data = (const char *) data + 1;
	rest.len = size - 1;
	nlines = format >= FORMAT_STANDARD ? 3 : 1;
	for (int i = 0; i < nlines; i++)
		if (!fuzz_next_line(&rest, &lines[i]) || rest.data == NULL)
			return 0;
	fuzz_begin(PG_UTF8);
	req.payload = rest;
	req.tolerance_usecs = (data[0] & 4) ? 300e6 : -1;

	if (format == FORMAT_STRIPE || format == FORMAT_PADDLE)
	{
		bool		stripe = format == FORMAT_STRIPE;
		Slice		secret = fuzz_key(stripe ? "stripe" : "paddle");
		Slice		parts[3];

		parts[0] = timestamp_of(lines[0], stripe ? ',' : ';', stripe ? "t" : "ts");
		parts[1].data = stripe ? "." : ":";
		parts[1].len = 1;
		parts[2] = req.payload;
		hmac(secret, parts, 3, mac);
		expected_sig = to_hex(mac);
		sigs = substitute(lines[0], expected_sig);
		names[0].data = stripe ? "Stripe-Signature" : "Paddle-Signature";
		names[0].len = strlen(names[0].data);
		values[0] = sigs;
		req.headers = fuzz_jsonb_object(1, names, values);
		key = stripe ? idem_stripe_prepare(secret) : idem_paddle_prepare(secret);
	}
	else
	{
		const char *prefix = svix ? "svix" : "webhook";
		Slice		parts[5] = {lines[0], {".", 1}, lines[1], {".", 1}, req.payload};

		if (format == FORMAT_STANDARD)
		{
			Slice		secret = fuzz_key("standard");
			size_t		keylen;
			uint8	   *keybytes;
			Slice		b64 = {secret.data + 6, secret.len - 6};

			/* the key is the base64 after whsec_ */
			keybytes = idem_decode_base64(b64, &keylen);
			if (keybytes == NULL)
				fuzz_fail("the standard key is not whsec_ and base64");
			hmac((Slice) {(const char *) keybytes, keylen}, parts, 5, mac);
			expected_sig = to_base64(mac);
			key = svix ? idem_svix_prepare(secret) : idem_standard_prepare(secret);
		}
		else
		{
			Slice		secret = {ed25519_secret, strlen(ed25519_secret)};

			expected_sig = ed25519_sign(parts, 5);
			key = svix ? idem_svix_prepare(secret) : idem_standard_prepare(secret);
		}
		sigs = substitute(lines[2], expected_sig);
		names[0].data = psprintf("%s-id", prefix);
		names[1].data = psprintf("%s-timestamp", prefix);
		names[2].data = psprintf("%s-signature", prefix);
		for (int i = 0; i < 3; i++)
			names[i].len = strlen(names[i].data);
		values[0] = lines[0];
		values[1] = lines[1];
		values[2] = sigs;
		req.headers = fuzz_jsonb_object(3, names, values);
	}
	if (req.headers == NULL || !fuzz_valid_text(req.payload.data, req.payload.len, PG_UTF8))
	{
		fuzz_end();
		return 0;
	}

	verified = (format == FORMAT_STRIPE) ? idem_stripe_verify(key, &req) :
		(format == FORMAT_PADDLE) ? idem_paddle_verify(key, &req) :
		idem_standard_verify(key, &req);
	if (verified && !contains(sigs, expected_sig, format < FORMAT_STANDARD))
		fuzz_fail("verified without the right signature in the header");
	fuzz_end();
	return 0;
}
