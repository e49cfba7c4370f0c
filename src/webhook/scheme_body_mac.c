/*
 * scheme_body_mac.c
 *		Schemes: GitHub, Shopify, Razorpay, Checkout.com, Adyen's platform
 *		webhooks, Square, Paystack and Airwallex, which put the HMAC of the
 *		body (Square: of its notification URL and the body; Airwallex: of a
 *		timestamp header and the body), under a shared secret, in one
 *		header.  Paystack's is an HMAC-SHA512, the others' HMAC-SHA256.
 *
 * May call: the wire format (wire.h), the crypto (crypto.h) and the Adyen
 * scheme's key (scheme_adyen.c).  The MAC is compared in constant time
 * (idem_mac_equal); anything wrong with the request is false, never an
 * error.
 */
#include "postgres.h"

#include "webhook/scheme.h"

/* How a MAC is written in its header */
typedef enum MacEncoding
{
	MAC_HEX,					/* 64 hex digits, either case */
	MAC_BASE64					/* canonical padded standard base64 */
} MacEncoding;

/*
 * One header holding the MAC of the body, after a fixed prefix; and the
 * header, if any, whose value (unix milliseconds) is signed before the body
 */
typedef struct BodyMacFormat
{
	const char *header;
	const char *prefix;
	MacEncoding encoding;
	const char *millis_header;
} BodyMacFormat;

/*
 * The key of a body-MAC scheme: the HMAC key, where the MAC is, and what
 * the sender signs before the body (Square: the notification URL; others:
 * nothing)
 */
typedef struct BodyMacKey
{
	VerifyMacKey *mac;
	const BodyMacFormat *format;
	Slice		signed_prefix;
} BodyMacKey;

/* GitHub: X-Hub-Signature-256: sha256=<hex> (the SHA-1 header is not read) */
static const BodyMacFormat github_format = {"x-hub-signature-256", "sha256=", MAC_HEX};

/* Shopify: X-Shopify-Hmac-Sha256: <base64> */
static const BodyMacFormat shopify_format = {"x-shopify-hmac-sha256", "", MAC_BASE64};

/* Razorpay: X-Razorpay-Signature: <hex> */
static const BodyMacFormat razorpay_format = {"x-razorpay-signature", "", MAC_HEX};

/* Checkout.com: Cko-Signature: <hex> */
static const BodyMacFormat checkout_format = {"cko-signature", "", MAC_HEX};

/*
 * Adyen's platform webhooks (Balance Platform, Management API and the
 * others that sign the raw body): HmacSignature: <base64>
 */
static const BodyMacFormat adyen_platform_format = {"hmacsignature", "", MAC_BASE64};

/*
 * Square: x-square-hmacsha256-signature: <base64>, over the subscription's
 * notification URL followed by the body (the legacy HMAC-SHA1 header
 * x-square-signature is not read)
 */
static const BodyMacFormat square_format = {"x-square-hmacsha256-signature", "", MAC_BASE64};

/* Paystack: x-paystack-signature: <hex HMAC-SHA512> */
static const BodyMacFormat paystack_format = {"x-paystack-signature", "", MAC_HEX};

/*
 * Airwallex: x-signature: <hex>, over x-timestamp (unix milliseconds)
 * followed by the body
 */
static const BodyMacFormat airwallex_format = {"x-signature", "", MAC_HEX, "x-timestamp"};

/* A body-MAC key of mac, format and the text signed before the body */
static BodyMacKey *
body_mac_key_of(VerifyMacKey *mac, const BodyMacFormat *format, Slice signed_prefix)
{
	BodyMacKey *key = palloc(sizeof(BodyMacKey));

	key->mac = mac;
	key->format = format;
	key->signed_prefix = signed_prefix;
	return key;
}

/*
 * The key of a body-MAC scheme: each of these senders keys its HMAC with
 * the secret's text as given, so any non-empty secret is a key; nothing
 * is signed before the body.
 */
static void *
body_mac_key(Slice secret, const BodyMacFormat *format)
{
	Slice		nothing = {"", 0};

	return body_mac_key_of(idem_verify_mac_key((const uint8 *) secret.data, secret.len),
						   format, nothing);
}

/* GitHub's webhook secret */
void *
idem_github_prepare(Slice secret)
{
	return body_mac_key(secret, &github_format);
}

/* Shopify's app client secret */
void *
idem_shopify_prepare(Slice secret)
{
	return body_mac_key(secret, &shopify_format);
}

/* Razorpay's webhook secret */
void *
idem_razorpay_prepare(Slice secret)
{
	return body_mac_key(secret, &razorpay_format);
}

/* Checkout.com's signature key */
void *
idem_checkout_prepare(Slice secret)
{
	return body_mac_key(secret, &checkout_format);
}

/* Airwallex's webhook secret */
void *
idem_airwallex_prepare(Slice secret)
{
	return body_mac_key(secret, &airwallex_format);
}

/* Paystack's secret key (sk_live_... or sk_test_...), which keys an HMAC-SHA512 */
void *
idem_paystack_prepare(Slice secret)
{
	Slice		nothing = {"", 0};

	return body_mac_key_of(idem_verify_mac512_key((const uint8 *) secret.data, secret.len),
						   &paystack_format, nothing);
}

/*
 * The HMAC key of an Adyen webhook, hexadecimal as Adyen shows it (22023
 * otherwise, as for the "adyen" scheme)
 */
void *
idem_adyen_platform_prepare(Slice secret)
{
	Slice		nothing = {"", 0};

	return body_mac_key_of(idem_adyen_hex_key(secret, "adyen_platform"),
						   &adyen_platform_format, nothing);
}

/* Does s begin with the text of prefix? */
static bool
starts_with(Slice s, const char *prefix)
{
	size_t		len = strlen(prefix);

	return s.len >= len && memcmp(s.data, prefix, len) == 0;
}

/*
 * Square's secret: the subscription's notification URL exactly as set in
 * the Developer Console (http:// or https://), a space, and its signature
 * key, whose text keys the HMAC (22023 for anything else)
 */
void *
idem_square_prepare(Slice secret)
{
	size_t		space = secret.len;
	Slice		url;
	Slice		signature_key;

	while (space > 0 && secret.data[space - 1] != ' ')
		space--;
	url.data = secret.data;
	url.len = space > 0 ? space - 1 : 0;
	signature_key.data = secret.data + space;
	signature_key.len = secret.len - space;
	if (space == 0 || signature_key.len == 0 ||
		!(starts_with(url, "https://") || starts_with(url, "http://")) ||
		memchr(url.data, ' ', url.len) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook secret is not a notification URL and a signature key"),
				 errdetail("A secret of the \"square\" scheme is the subscription's notification URL, exactly as set in Square's Developer Console, a space, then its signature key."),
				 errhint("Square signs the URL with the body: a URL that differs in any character fails every delivery.")));
	url.data = pnstrdup(url.data, url.len);
	return body_mac_key_of(idem_verify_mac_key((const uint8 *) signature_key.data, signature_key.len),
						   &square_format, url);
}

/*
 * The timestamp a body-MAC scheme signs before the body (Airwallex's), if
 * its format has one: its header's value, unix milliseconds in plain
 * digits, within the tolerance.  False if missing, malformed or stale.
 */
static bool
body_mac_timestamp(const BodyMacFormat *format, const VerifyRequest *req, Slice *value)
{
	value->data = "";
	value->len = 0;
	if (format->millis_header == NULL)
		return true;
	return idem_find_unix_millis(req->headers, format->millis_header, req->tolerance_usecs, value);
}

/*
 * A body-MAC scheme: the header, taken as it is, must be the prefix exactly
 * (case and all, nothing around it) followed by the MAC of the raw body,
 * after the key's signed prefix (Square's URL; empty for the others) or
 * the signed timestamp (Airwallex's), in the scheme's encoding.  One
 * header, one MAC: these senders have no list.
 */
bool
idem_body_mac_verify(void *k, const VerifyRequest *req)
{
	BodyMacKey *key = k;
	size_t		prefix_len = strlen(key->format->prefix);
	size_t		mac_len = idem_verify_mac_len(key->mac);
	Slice		value;
	Slice		parts[3];
	uint8		expected[VERIFY_MAC512_LEN];
	uint8		given[VERIFY_MAC512_LEN];
	bool		decoded;
	bool		matched;

	if (!body_mac_timestamp(key->format, req, &parts[1]))
		return false;
	if (!idem_find_header(req->headers, key->format->header, &value))
		return false;
	if (value.len < prefix_len ||
		memcmp(value.data, key->format->prefix, prefix_len) != 0)
		return false;
	value.data += prefix_len;
	value.len -= prefix_len;
	if (key->format->encoding == MAC_HEX)
		decoded = idem_decode_hex(value, given, mac_len);
	else
		decoded = mac_len == VERIFY_MAC_LEN && idem_decode_b64_mac(value, given);
	if (!decoded)
		return false;

	parts[0] = key->signed_prefix;
	parts[2] = req->payload;
	idem_verify_mac(key->mac, parts, 3, expected);
	matched = idem_mac_equal(expected, given, mac_len);
	explicit_bzero(expected, sizeof(expected));
	return matched;
}
