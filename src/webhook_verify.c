/*
 * webhook_verify.c
 *		idem_webhook_verify: checks the signature of an incoming webhook in
 *		one of the schemes of the table below.
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
 * Each scheme turns the secret into its key (prepare) and then checks the
 * request (verify); the secrets and OpenSSL objects both make are wiped and
 * freed when the call ends, on every path (verify_util.c).  This file holds
 * the table and the schemes of Stripe and Standard Webhooks (and Svix, which
 * is Standard Webhooks under its own header names).
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/timestamp.h"

#include "verify.h"

/* Bytes of an Ed25519 public key and signature */
#define ED25519_KEY_LEN		32
#define ED25519_SIG_LEN		64

static void *stripe_prepare(Slice secret);
static bool stripe_verify(void *key, const VerifyRequest *req);
static void *standard_prepare(Slice secret);
static void *svix_prepare(Slice secret);
static bool standard_verify(void *key, const VerifyRequest *req);

static const VerifyScheme schemes[] = {
	{"stripe", stripe_prepare, stripe_verify},
	{"standard", standard_prepare, standard_verify},
	{"svix", svix_prepare, standard_verify},
	/* HMAC schemes (verify_hmac.c) */
	{"github", idem_github_prepare, idem_body_mac_verify},
	{"shopify", idem_shopify_prepare, idem_body_mac_verify},
	{"razorpay", idem_razorpay_prepare, idem_body_mac_verify},
	{"checkout", idem_checkout_prepare, idem_body_mac_verify},
	{"paddle", idem_paddle_prepare, idem_paddle_verify},
	{"adyen", idem_adyen_prepare, idem_adyen_verify},
	/* form-based gateways (verify_form.c) */
	{"alipay", idem_alipay_prepare, idem_alipay_verify},
	{"unionpay", idem_unionpay_prepare, idem_unionpay_verify},
	/* WeChat Pay (verify_wechatpay.c) */
	{"wechatpay", idem_wechatpay_prepare, idem_wechatpay_verify},
};

/* The scheme of that name, or NULL */
const VerifyScheme *
idem_verify_scheme(Slice name)
{
	for (int i = 0; i < lengthof(schemes); i++)
		if (idem_slice_is(name, schemes[i].name))
			return &schemes[i];
	return NULL;
}

/* The scheme names, quoted and comma-separated, for messages */
const char *
idem_verify_scheme_names(void)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < lengthof(schemes); i++)
		appendStringInfo(&buf, "%s\"%s\"", i > 0 ? ", " : "", schemes[i].name);
	return buf.data;
}

/* Stripe keys its HMAC with the secret string as given, whsec_ included */
static void *
stripe_prepare(Slice secret)
{
	return idem_verify_mac_key((const uint8 *) secret.data, secret.len);
}

/*
 * Stripe: Stripe-Signature is "t=<unix>,v1=<hex>[,v1=<hex>...][,v0=...]",
 * the MAC is over "<t>.<payload>"; v0 (test mode) is ignored.
 */
static bool
stripe_verify(void *key, const VerifyRequest *req)
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
static void *
standard_prepare(Slice secret)
{
	return standard_key(secret, "standard", "webhook");
}

/* Svix: Standard Webhooks under svix-id, svix-timestamp, svix-signature */
static void *
svix_prepare(Slice secret)
{
	return standard_key(secret, "svix", "svix");
}

/*
 * Standard Webhooks: the signature header is a space-separated list of
 * "v1,<base64 HMAC-SHA256>" and "v1a,<base64 Ed25519>", over
 * "<id>.<timestamp>.<payload>".  Any entry of the key's kind may match; the
 * other kind and unknown versions are ignored.
 */
static bool
standard_verify(void *k, const VerifyRequest *req)
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
			size_t		siglen;
			uint8	   *raw = idem_decode_base64(sig, &siglen);

			if (raw != NULL && siglen == ED25519_SIG_LEN)
				matched |= idem_verify_signature(key->public_key, NULL, parts, 5,
												 raw, siglen);
		}
	}
	explicit_bzero(expected, sizeof(expected));
	return matched;
}

/*
 * A tolerance in microseconds, a month counting as 30 days; an error if it
 * is negative (whose hint says NULL skips the check if null_skips).  Done
 * in double: a huge interval must not overflow.
 */
double
idem_verify_tolerance_usecs(const Interval *iv, bool null_skips)
{
	double		usecs;

	usecs = (double) iv->month * DAYS_PER_MONTH * USECS_PER_DAY +
		(double) iv->day * USECS_PER_DAY + (double) iv->time;
	if (usecs < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("tolerance must not be negative"),
				 null_skips ? errhint("Use NULL to skip the timestamp check.") : 0));
	return usecs;
}

/* The tolerance argument in microseconds; -1 for NULL (no check) */
static double
tolerance_usecs_arg(FunctionCallInfo fcinfo, int argno)
{
	if (PG_ARGISNULL(argno))
		return -1;
	return idem_verify_tolerance_usecs(PG_GETARG_INTERVAL_P(argno), true);
}

/*
 * The scheme named by a text argument, or an error: NULL is 22004, an
 * unknown name 22023
 */
const VerifyScheme *
idem_verify_scheme_arg(FunctionCallInfo fcinfo, int argno)
{
	text	   *name;
	const VerifyScheme *scheme;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("webhook signature scheme must not be null")));
	name = PG_GETARG_TEXT_PP(argno);
	scheme = idem_verify_scheme(idem_slice_of_text(name));
	if (scheme == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown webhook signature scheme \"%s\"",
						text_to_cstring(name)),
				 errhint("The schemes are %s.", idem_verify_scheme_names())));
	return scheme;
}

/*
 * The secret argument, checked to be present and not empty (22004, 22023);
 * what it must be beyond that is the scheme's prepare's to say.
 */
Slice
idem_verify_secret_arg(FunctionCallInfo fcinfo, int argno)
{
	Slice		secret;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("webhook secret must not be null")));
	secret = idem_slice_of_text(PG_GETARG_TEXT_PP(argno));
	if (secret.len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook secret must not be empty")));
	return secret;
}

PG_FUNCTION_INFO_V1(idem_webhook_verify);

/*
 * idem_webhook_verify(scheme, secret, payload, headers, tolerance): true when
 * the headers carry a valid, fresh signature of payload under secret.
 */
Datum
idem_webhook_verify(PG_FUNCTION_ARGS)
{
	/* configuration first: these errors must not depend on the request */
	const VerifyScheme *scheme = idem_verify_scheme_arg(fcinfo, 0);
	Slice		secret = idem_verify_secret_arg(fcinfo, 1);
	VerifyRequest req;
	volatile bool result = false;

	req.tolerance_usecs = tolerance_usecs_arg(fcinfo, 4);
	PG_TRY();
	{
		void	   *key = scheme->prepare(secret);

		if (!PG_ARGISNULL(2) && !PG_ARGISNULL(3))
		{
			req.payload = idem_slice_of_text(PG_GETARG_TEXT_PP(2));
			req.headers = PG_GETARG_JSONB_P(3);
			result = scheme->verify(key, &req);
		}
	}
	PG_FINALLY();
	{
		idem_verify_release_all();
	}
	PG_END_TRY();
	PG_RETURN_BOOL(result);
}
