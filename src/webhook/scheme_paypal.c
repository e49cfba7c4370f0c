/*
 * scheme_paypal.c
 *		Scheme: "paypal", PayPal's REST webhooks, signed SHA256withRSA by a
 *		certificate that the notification points to.
 *
 * PayPal signs "<transmission id>|<transmission time>|<webhook id>|<CRC-32
 * of the body, unsigned decimal>" with the key of a certificate whose URL
 * it sends in PAYPAL-CERT-URL.  idem fetches nothing: the application
 * downloads that certificate (after checking the URL is PayPal's) and
 * passes the PEM it got, the signer's certificate first and any
 * intermediates after it, in the header PAYPAL-CERT-PEM.  The secret
 * holds what the application trusts: the webhook's id (part of what is
 * signed), the root certificates the signer's must chain to, and the
 * common name its subject must have.  As everywhere in
 * idem_webhook_verify, only the secret can raise an error; anything in
 * the request is a plain false.
 *
 * May call: the wire format (wire.h) and the crypto (crypto.h).
 */
#include "postgres.h"

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "webhook/scheme.h"

/* The only signature algorithm PayPal names in PAYPAL-AUTH-ALGO */
#define PAYPAL_AUTH_ALGO		"SHA256withRSA"

/* Certificates PAYPAL-CERT-PEM may hold: the signer's and its intermediates */
#define PAYPAL_MAX_CERTS		4

/* The format of the secret, for error details */
#define PAYPAL_SECRET_FORMAT \
	"A \"paypal\" secret is a JSON object of three strings: \"webhook_id\", the webhook's ID; \"subject\", the common name of PayPal's signing certificate; \"roots\", the certificates it must chain to, PEM."

/* A prepared secret */
typedef struct PaypalKey
{
	Slice		webhook_id;		/* copies: the secret's text is wiped */
	Slice		subject;
	VerifyRoots roots;
} PaypalKey;

pg_noreturn static void paypal_bad_secret(const char *msg, const char *hint);

/* The configuration error of a secret that is not a PayPal configuration */
static void
paypal_bad_secret(const char *msg, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s", msg),
			 errdetail(PAYPAL_SECRET_FORMAT),
			 hint ? errhint("%s", hint) : 0));
}

/* Is s not empty and made only of ASCII letters, digits and the characters of chars? */
static bool
slice_is_word(Slice s, const char *chars)
{
	if (s.len == 0)
		return false;
	for (size_t i = 0; i < s.len; i++)
	{
		char		c = s.data[i];

		if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
			  (c >= 'a' && c <= 'z') || (c != '\0' && strchr(chars, c) != NULL)))
			return false;
	}
	return true;
}

/*
 * A PayPal secret: {"webhook_id": ..., "subject": ..., "roots": ...}, all
 * three, nothing else.  The webhook ID is letters, digits, "_" and "-"
 * (PayPal's are 17 upper-case letters and digits; WEBHOOK_ID for the
 * simulator's events); the subject a host name; the roots PEM
 * certificates, at least one self-signed, as for "unionpay".
 */
void *
idem_paypal_prepare(Slice secret)
{
	static const char *const names[] = {"webhook_id", "subject", "roots", NULL};
	Slice		values[3];
	PaypalKey  *key = palloc0(sizeof(PaypalKey));

	if (!idem_json_object_strings(secret, names, values))
		paypal_bad_secret("webhook secret is not a PayPal configuration",
						  "Check for a misspelt or missing member, or a PEM whose line breaks are not written \\n.");
	for (int i = 0; i < 3; i++)
		if (values[i].data == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("webhook secret has no \"%s\"", names[i]),
					 errdetail(PAYPAL_SECRET_FORMAT)));
	if (!slice_is_word(values[0], "_-"))
		paypal_bad_secret("webhook secret's \"webhook_id\" is not a webhook ID",
						  "Copy the webhook ID from the app's page in PayPal's developer dashboard.");
	if (!slice_is_word(values[1], ".-"))
		paypal_bad_secret("webhook secret's \"subject\" is not a host name",
						  "Give the common name alone, such as messageverificationcerts.paypal.com.");
	key->webhook_id = values[0];
	key->subject = values[1];
	switch (idem_verify_roots_read(values[2], &key->roots))
	{
		case VERIFY_ROOTS_OK:
			break;
		case VERIFY_ROOTS_MALFORMED:
			paypal_bad_secret("webhook secret's \"roots\" are not certificates",
							  "\"roots\" holds \"CERTIFICATE\" blocks in PEM, well formed, and nothing else.");
			break;
		case VERIFY_ROOTS_NONE:
			paypal_bad_secret("webhook secret holds no root certificate",
							  "\"roots\" holds at least one self-signed certificate, where chains end, and may add intermediates.");
			break;
	}
	return key;
}

/*
 * Check a notification: PAYPAL-TRANSMISSION-ID (not empty, no "|"),
 * PAYPAL-TRANSMISSION-TIME (ISO 8601, within the tolerance),
 * PAYPAL-AUTH-ALGO (SHA256withRSA), PAYPAL-TRANSMISSION-SIG (canonical
 * base64) and PAYPAL-CERT-PEM present; the first certificate of
 * PAYPAL-CERT-PEM chains to the secret's roots, through the others,
 * every certificate valid at the transmission time; its subject has one
 * CN, the secret's (ASCII case aside); and it signed
 * "<id>|<time>|<webhook id>|<crc32>" with RSA PKCS#1 v1.5 and SHA-256.
 */
bool
idem_paypal_verify(void *k, const VerifyRequest *req)
{
	PaypalKey  *key = k;
	Slice		id;
	Slice		when;
	Slice		algo;
	Slice		signature;
	Slice		pem;
	Slice		cn;
	Slice		bar = {"|", 1};
	Slice		parts[7];
	char		crc[11];
	int64		secs;
	uint8	   *sig;
	size_t		siglen;
	X509	   *cert;
	EVP_PKEY   *pkey;

	if (!idem_find_header(req->headers, "paypal-transmission-id", &id) ||
		!idem_find_header(req->headers, "paypal-transmission-time", &when) ||
		!idem_find_header(req->headers, "paypal-auth-algo", &algo) ||
		!idem_find_header(req->headers, "paypal-transmission-sig", &signature) ||
		!idem_find_header(req->headers, "paypal-cert-pem", &pem))
		return false;
	if (id.len == 0 || memchr(id.data, '|', id.len) != NULL ||
		!idem_slice_is(algo, PAYPAL_AUTH_ALGO))
		return false;
	if (!idem_parse_iso8601(when, &secs) ||
		!idem_timestamp_acceptable(secs, req->tolerance_usecs))
		return false;
	sig = idem_decode_base64(signature, &siglen);
	if (sig == NULL)
		return false;

	cert = idem_verify_chain_pem(&key->roots, pem, PAYPAL_MAX_CERTS, secs);
	if (cert == NULL || !idem_verify_certificate_cn(cert, &cn) ||
		cn.len != key->subject.len ||
		pg_strncasecmp(cn.data, key->subject.data, cn.len) != 0)
		return false;
	pkey = X509_get0_pubkey(cert);
	if (pkey == NULL || !EVP_PKEY_is_a(pkey, "RSA"))
		return false;

	parts[0] = id;
	parts[1] = bar;
	parts[2] = when;
	parts[3] = bar;
	parts[4] = key->webhook_id;
	parts[5] = bar;
	parts[6].data = crc;
	parts[6].len = snprintf(crc, sizeof(crc), "%u", idem_crc32(req->payload));
	return idem_verify_signature(pkey, EVP_sha256(), parts, 7, sig, siglen);
}
