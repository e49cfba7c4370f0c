/*
 * scheme_stripe.c
 *		Schemes: Stripe, and Standard Webhooks with Svix (Standard Webhooks
 *		under its own header names); and the reader of Stripe's signature
 *		header shape, which Paddle's shares.
 *
 * May call: the wire format (wire.h) and the crypto (crypto.h).  A secret
 * that cannot be a key is an error (22023), raised by prepare before the
 * request is looked at; anything wrong with the request is false.
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "webhook/scheme.h"

/* Bytes of an Ed25519 public key and signature */
#define ED25519_KEY_LEN		32
#define ED25519_SIG_LEN		64
/* Characters of a signature in padded base64 */
#define ED25519_SIG_B64_LEN	88

/*
 * Check a header of Stripe's shape (TimestampedMacs) with a secret used as
 * given.  Any MAC element may match (the sender lists one per active secret
 * while a secret is rolled); unknown elements and elements without "=" are
 * ignored; no timestamp, two of them, or no MAC element at all is false,
 * and so is a timestamp outside the request's tolerance.
 */
bool
idem_verify_timestamped_macs(const TimestampedMacs *format,
							 const VerifyMacKey *key, const VerifyRequest *req)
{
	Slice		header;
	Slice		rest;
	Slice		item;
	Slice		name;
	Slice		value;
	Slice		ts = {NULL, 0};
	int			nts = 0;
	int			nmacs = 0;
	int64		secs;
	uint8		expected[VERIFY_MAC_LEN];
	uint8		given[VERIFY_MAC_LEN];
	bool		matched = false;
	Slice		parts[3];

	if (!idem_find_header(req->headers, format->header, &header))
		return false;

	/* first pass: the timestamp, and whether there is any MAC */
	rest = header;
	while (idem_next_element(&rest, format->sep, &item))
	{
		if (!idem_split_pair(item, '=', &name, &value))
			continue;
		if (idem_slice_is(name, format->ts_name))
		{
			ts = value;
			nts++;
		}
		else if (idem_slice_is(name, format->mac_name))
			nmacs++;
	}
	if (nts != 1 || nmacs == 0 || !idem_parse_unix_seconds(ts, &secs))
		return false;
	if (!idem_timestamp_acceptable(secs, req->tolerance_usecs))
		return false;

	parts[0] = ts;
	parts[1].data = format->joiner;
	parts[1].len = strlen(format->joiner);
	parts[2] = req->payload;
	idem_verify_mac(key, parts, 3, expected);

	/* second pass: every MAC, without stopping at the first match */
	rest = header;
	while (idem_next_element(&rest, format->sep, &item))
	{
		if (!idem_split_pair(item, '=', &name, &value) ||
			!idem_slice_is(name, format->mac_name))
			continue;
		if (idem_decode_hex(value, given, VERIFY_MAC_LEN))
			matched |= idem_mac_equal(expected, given, VERIFY_MAC_LEN);
	}
	explicit_bzero(expected, sizeof(expected));
	return matched;
}

/* Stripe keys its HMAC with the secret string as given, whsec_ included */
void *
idem_stripe_prepare(Slice secret)
{
	return idem_verify_mac_key((const uint8 *) secret.data, secret.len);
}

/*
 * Stripe: Stripe-Signature is "t=<unix>,v1=<hex>[,v1=<hex>...][,v0=...]",
 * the MAC is over "<t>.<payload>"; v0 (test mode) is ignored.
 */
bool
idem_stripe_verify(void *key, const VerifyRequest *req)
{
	static const TimestampedMacs format = {"stripe-signature", ',', "t", "v1", "."};

	return idem_verify_timestamped_macs(&format, key, req);
}

/*
 * The key of a Standard Webhooks (or Svix) endpoint: a symmetric secret
 * ("whsec_" + base64, v1 signatures) or an Ed25519 public key ("whpk_" +
 * base64, v1a signatures), and the names of the three headers.
 */
typedef struct StandardKey
{
	VerifyMacKey *mac_key;		/* v1: HMAC-SHA256 key */
	EVP_PKEY   *public_key;		/* v1a: Ed25519 */
	const char *id_header;
	const char *timestamp_header;
	const char *signature_header;
} StandardKey;

/*
 * Decode a Standard Webhooks secret: "whsec_" (optional) then base64, or
 * "whpk_" then the base64 of a 32-byte Ed25519 public key.  A secret that
 * does not decode is the application's configuration error, not the
 * request's fault, so it is an error rather than false.  The headers are
 * <header_prefix>-id, -timestamp and -signature.
 */
static StandardKey *
standard_key(Slice secret, const char *scheme, const char *header_prefix)
{
	StandardKey *key = palloc0(sizeof(StandardKey));
	bool		asymmetric = false;
	uint8	   *bytes;
	size_t		len = 0;

	key->id_header = psprintf("%s-id", header_prefix);
	key->timestamp_header = psprintf("%s-timestamp", header_prefix);
	key->signature_header = psprintf("%s-signature", header_prefix);

	if (secret.len >= 6 && memcmp(secret.data, "whsec_", 6) == 0)
	{
		secret.data += 6;
		secret.len -= 6;
	}
	else if (secret.len >= 5 && memcmp(secret.data, "whpk_", 5) == 0)
	{
		secret.data += 5;
		secret.len -= 5;
		asymmetric = true;
	}
	bytes = idem_decode_base64(secret, &len);
	if (bytes == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook secret is not valid base64"),
				 errdetail("A secret of the \"%s\" scheme is \"whsec_\" followed by the standard base64 (with padding) of the key, or \"whpk_\" followed by that of an Ed25519 public key.",
						   scheme),
				 errhint("Check for stray whitespace or a truncated secret.")));
	if (!asymmetric)
	{
		key->mac_key = idem_verify_mac_key(bytes, len);
		return key;
	}
	if (len == ED25519_KEY_LEN)
		key->public_key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL,
													  bytes, len);
	if (key->public_key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook public key is not an Ed25519 key"),
				 errdetail("A \"whpk_\" secret of the \"%s\" scheme is the base64 of the %d bytes of an Ed25519 public key; this one has %zu.",
						   scheme, ED25519_KEY_LEN, len)));
	idem_verify_track_pkey(key->public_key);
	return key;
}

/* Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature */
void *
idem_standard_prepare(Slice secret)
{
	return standard_key(secret, "standard", "webhook");
}

/* Svix: Standard Webhooks under svix-id, svix-timestamp, svix-signature */
void *
idem_svix_prepare(Slice secret)
{
	return standard_key(secret, "svix", "svix");
}

/*
 * Standard Webhooks: the signature header is a space-separated list of
 * "v1,<base64 HMAC-SHA256>" and "v1a,<base64 Ed25519>", over
 * "<id>.<timestamp>.<payload>".  Any entry of the key's kind may match; the
 * other kind and unknown versions are ignored.
 */
bool
idem_standard_verify(void *k, const VerifyRequest *req)
{
	StandardKey *key = k;
	const char *version_name = key->public_key != NULL ? "v1a" : "v1";
	Slice		id;
	Slice		ts;
	Slice		sigs;
	Slice		rest;
	Slice		item;
	Slice		version;
	Slice		sig;
	int64		secs;
	uint8		expected[VERIFY_MAC_LEN];
	uint8		given[VERIFY_MAC_LEN];
	bool		any = false;
	bool		matched = false;
	Slice		parts[5];

	if (!idem_find_header(req->headers, key->id_header, &id) || id.len == 0 ||
		!idem_find_header(req->headers, key->timestamp_header, &ts) ||
		!idem_find_header(req->headers, key->signature_header, &sigs))
		return false;
	if (!idem_parse_unix_seconds(ts, &secs))
		return false;

	rest = sigs;
	while (idem_next_element(&rest, ' ', &item))
	{
		if (idem_split_pair(item, ',', &version, &sig) && idem_slice_is(version, version_name))
			any = true;
	}
	if (!any || !idem_timestamp_acceptable(secs, req->tolerance_usecs))
		return false;

	parts[0] = id;
	parts[1].data = ".";
	parts[1].len = 1;
	parts[2] = ts;
	parts[3] = parts[1];
	parts[4] = req->payload;
	if (key->public_key == NULL)
		idem_verify_mac(key->mac_key, parts, 5, expected);

	rest = sigs;
	while (idem_next_element(&rest, ' ', &item))
	{
		if (!idem_split_pair(item, ',', &version, &sig) || !idem_slice_is(version, version_name))
			continue;
		if (key->public_key == NULL)
		{
			if (idem_decode_b64_mac(sig, given))
				matched |= idem_mac_equal(expected, given, VERIFY_MAC_LEN);
		}
		else
		{
			/*
			 * A signature is no secret: decoded on the stack, not tracked,
			 * so that a header listing many cannot reach the call's limit
			 * of tracked objects and raise an error
			 */
			uint8		raw[ED25519_SIG_B64_LEN / 4 * 3];

			if (sig.len == ED25519_SIG_B64_LEN &&
				idem_base64_decode_canonical(sig, raw) == ED25519_SIG_LEN)
				matched |= idem_verify_signature(key->public_key, NULL, parts, 5,
												 raw, ED25519_SIG_LEN);
		}
	}
	explicit_bzero(expected, sizeof(expected));
	return matched;
}
