/*
 * scheme_wechatpay.c
 *		Scheme: "wechatpay", WeChat Pay APIv3 notifications, signed
 *		SHA256withRSA.
 *
 * WeChat Pay signs "<Wechatpay-Timestamp>\n<Wechatpay-Nonce>\n<body>\n" with
 * the private key of a platform certificate or, for merchants set up since
 * late 2024, of a "WeChat Pay public key", and names the key in
 * Wechatpay-Serial: the certificate's serial number in hex, or the public
 * key's ID (PUB_KEY_ID_...).  The secret is one or more PEM blocks:
 * certificates (their serial is read from them) and public keys, each on
 * the line after its ID, which a bare public key does not hold.  Only the
 * keys that Wechatpay-Serial names are tried, as the official SDKs do.
 *
 * WeChat Pay now and then sends a probe whose signature starts with
 * "WECHATPAY/SIGNTEST/", to check that the merchant verifies: it is false
 * like any other bad signature (the handler answers 4xx and WeChat Pay
 * sends the notification again, properly signed).
 *
 * May call: the wire format (wire.h) and the crypto (crypto.h).
 */
#include "postgres.h"

#include "nodes/pg_list.h"

#include <openssl/evp.h>
#include <openssl/x509.h>

#include "webhook/scheme.h"

/* Keys one secret may hold (each is one tracked OpenSSL object) */
#define WECHATPAY_MAX_KEYS	32

/* What WeChat Pay puts before a public key's ID */
#define WECHATPAY_KEY_ID_PREFIX "PUB_KEY_ID_"

/* The only signature type of APIv3, and the prefix of its probes */
#define WECHATPAY_SIGNATURE_TYPE "WECHATPAY2-SHA256-RSA2048"
#define WECHATPAY_PROBE_PREFIX "WECHATPAY/SIGNTEST/"

/* The format of the secret, for error details */
#define WECHATPAY_SECRET_FORMAT \
	"A secret of the \"wechatpay\" scheme is one or more PEM blocks: WeChat Pay platform certificates (BEGIN CERTIFICATE), or WeChat Pay public keys (BEGIN PUBLIC KEY), each on the line after its ID (PUB_KEY_ID_...)."

/* One key of the secret, and how Wechatpay-Serial names it */
typedef struct WechatpayKey
{
	EVP_PKEY   *pkey;			/* RSA */
	const char *serial;			/* certificate: upper-case hex, no leading
								 * zeros; NULL for a public key */
	Slice		key_id;			/* public key: its ID, a copy */
} WechatpayKey;

/* Is c a space, a tab or a line end? */
static bool
is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* s without the spaces, tabs and line ends at either end */
static Slice
trim_space(Slice s)
{
	while (s.len > 0 && is_space(s.data[0]))
	{
		s.data++;
		s.len--;
	}
	while (s.len > 0 && is_space(s.data[s.len - 1]))
		s.len--;
	return s;
}

/*
 * The text before a PEM block: nothing (blank), or a public key's ID,
 * PUB_KEY_ID_ and then letters, digits, '_' or '-', alone on its lines.
 * *id is left empty for blank text; false for anything else.
 */
static bool
key_id_before(Slice before, Slice *id)
{
	size_t		plen = strlen(WECHATPAY_KEY_ID_PREFIX);

	id->data = NULL;
	id->len = 0;
	before = trim_space(before);
	if (before.len == 0)
		return true;
	if (before.len <= plen ||
		memcmp(before.data, WECHATPAY_KEY_ID_PREFIX, plen) != 0)
		return false;
	for (size_t i = plen; i < before.len; i++)
	{
		char		c = before.data[i];

		if (!((c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
			  (c >= 'a' && c <= 'z') || c == '_' || c == '-'))
			return false;
	}
	*id = before;
	return true;
}

/*
 * A certificate's serial number as WeChat Pay writes it in Wechatpay-Serial
 * (the official Go SDK: fmt.Sprintf("%X", serial.Bytes())), upper-case hex,
 * with its leading zeros dropped so that either spelling compares equal
 */
static const char *
certificate_serial(X509 *cert)
{
	const ASN1_INTEGER *serial = X509_get0_serialNumber(cert);
	const unsigned char *bytes = ASN1_STRING_get0_data(serial);
	int			len = ASN1_STRING_length(serial);
	char	   *hex = palloc(2 * len + 1);
	char	   *p = hex;

	if (ASN1_STRING_type(serial) == V_ASN1_NEG_INTEGER)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook certificate has a negative serial number"),
				 errdetail("WeChat Pay's certificates have positive serial numbers, which Wechatpay-Serial names.")));
	for (int i = 0; i < len; i++)
	{
		static const char digits[] = "0123456789ABCDEF";

		if (p == hex && bytes[i] == 0)
			continue;
		if (p == hex && bytes[i] < 0x10)
			*p++ = digits[bytes[i]];
		else
		{
			*p++ = digits[bytes[i] >> 4];
			*p++ = digits[bytes[i] & 0xF];
		}
	}
	*p = '\0';
	return hex;
}

pg_noreturn static void text_outside_blocks(void);

/* The error for a secret with text that is neither a block nor a key ID */
static void
text_outside_blocks(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("webhook secret holds text outside its PEM blocks"),
			 errdetail(WECHATPAY_SECRET_FORMAT),
			 errhint("Only a public key's ID may stand outside the blocks, on the line before its key.")));
}

/*
 * Turn the secret (WeChat Pay's certificates and public keys, PEM) into
 * the list of keys; 22023 if it is anything else, or holds a key that is not
 * RSA.  Certificates are not checked further (issuer, validity dates), as
 * the official SDKs do not when they verify a notification: the secret
 * lists the keys to trust, and a key is no longer trusted once it is
 * dropped from it.
 */
void *
idem_wechatpay_prepare(Slice secret)
{
	List	   *keys = NIL;
	Slice		rest = secret;
	VerifyPemBlock block;
	VerifyPemStatus status;

	while ((status = idem_verify_pem_next(&rest, &block)) == VERIFY_PEM_BLOCK)
	{
		WechatpayKey *key = palloc0(sizeof(WechatpayKey));
		Slice		id;

		/* the objects are freed when the call ends, whatever happens next */
		if (block.cert != NULL)
			idem_verify_track_certificate(block.cert);
		if (block.key != NULL)
			idem_verify_track_pkey(block.key);
		if (list_length(keys) >= WECHATPAY_MAX_KEYS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("webhook secret holds too many keys"),
					 errdetail("A secret of the \"wechatpay\" scheme holds at most %d certificates and public keys.",
							   WECHATPAY_MAX_KEYS)));
		if (!key_id_before(block.before, &id))
			text_outside_blocks();

		if (strcmp(block.label, "CERTIFICATE") == 0)
		{
			if (id.len > 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("webhook key ID is followed by a certificate"),
						 errdetail("A key ID names the WeChat Pay public key on the lines after it; a certificate carries its own serial number.")));
			if (block.cert == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("webhook certificate is not a valid X.509 certificate"),
						 errdetail("A CERTIFICATE block holds one DER-encoded X.509 certificate.")));
			key->serial = certificate_serial(block.cert);
			/* owned by the certificate */
			key->pkey = X509_get0_pubkey(block.cert);
		}
		else if (strcmp(block.label, "PUBLIC KEY") == 0)
		{
			if (id.len == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("webhook public key has no key ID"),
						 errdetail("WeChat Pay names its public key by an ID (PUB_KEY_ID_...) in Wechatpay-Serial, which the key itself does not hold."),
						 errhint("Put the ID that the merchant platform shows with the key on the line before \"-----BEGIN PUBLIC KEY-----\".")));
			/* a copy: the source cache wipes the secret's text once prepared */
			key->key_id.data = pnstrdup(id.data, id.len);
			key->key_id.len = id.len;
			key->pkey = block.key;
			if (key->pkey == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("webhook public key is not a valid public key"),
						 errdetail("A PUBLIC KEY block holds one DER-encoded SubjectPublicKeyInfo.")));
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("webhook secret holds a PEM block that is neither a certificate nor a public key"),
					 errdetail(WECHATPAY_SECRET_FORMAT),
					 errhint("WeChat Pay's signatures are checked with WeChat Pay's certificates or public keys, never with a private key.")));
		if (key->pkey == NULL || EVP_PKEY_get_base_id(key->pkey) != EVP_PKEY_RSA)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("webhook key is not an RSA key"),
					 errdetail("WeChat Pay signs its notifications SHA256withRSA.")));
		keys = lappend(keys, key);
	}
	if (status == VERIFY_PEM_MALFORMED)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook secret is not valid PEM"),
				 errdetail(WECHATPAY_SECRET_FORMAT),
				 errhint("Check for a truncated block, a missing END line or stray characters in the base64.")));
	if (trim_space(block.before).len > 0)
		text_outside_blocks();
	if (keys == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("webhook secret holds no certificate or public key"),
				 errdetail(WECHATPAY_SECRET_FORMAT)));
	return keys;
}

/* Is c a hex digit? */
static bool
is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') ||
		(c >= 'a' && c <= 'f');
}

/*
 * Does Wechatpay-Serial name this key?  A public key: its ID, exactly.  A
 * certificate: its serial number in hex, in either case, leading zeros or
 * not.
 */
static bool
names_key(Slice serial, const WechatpayKey *key)
{
	size_t		len;

	if (key->serial == NULL)
		return serial.len == key->key_id.len &&
			memcmp(serial.data, key->key_id.data, serial.len) == 0;

	for (size_t i = 0; i < serial.len; i++)
		if (!is_hex(serial.data[i]))
			return false;
	while (serial.len > 0 && serial.data[0] == '0')
	{
		serial.data++;
		serial.len--;
	}
	len = strlen(key->serial);
	return serial.len == len && pg_strncasecmp(serial.data, key->serial, len) == 0;
}

/*
 * Check a notification: Wechatpay-Serial, -Signature, -Timestamp and -Nonce
 * present, the timestamp fresh, and the signature (canonical base64) made
 * by a key that Wechatpay-Serial names over "<timestamp>\n<nonce>\n<body>\n".
 * A Wechatpay-Signature-Type, when sent, must be WECHATPAY2-SHA256-RSA2048.
 * A nonce holding a line end is false: it could move bytes between the
 * nonce and the body without changing what was signed.
 */
bool
idem_wechatpay_verify(void *k, const VerifyRequest *req)
{
	List	   *keys = k;
	Slice		serial;
	Slice		signature;
	Slice		timestamp;
	Slice		nonce;
	Slice		type;
	Slice		newline = {"\n", 1};
	Slice		parts[6];
	int64		secs;
	uint8	   *sig;
	size_t		siglen;
	bool		matched = false;
	ListCell   *lc;

	if (!idem_find_header(req->headers, "wechatpay-serial", &serial) ||
		!idem_find_header(req->headers, "wechatpay-signature", &signature) ||
		!idem_find_header(req->headers, "wechatpay-timestamp", &timestamp) ||
		!idem_find_header(req->headers, "wechatpay-nonce", &nonce))
		return false;
	if (idem_find_header(req->headers, "wechatpay-signature-type", &type) &&
		!idem_slice_is(type, WECHATPAY_SIGNATURE_TYPE))
		return false;
	if (signature.len >= strlen(WECHATPAY_PROBE_PREFIX) &&
		memcmp(signature.data, WECHATPAY_PROBE_PREFIX,
			   strlen(WECHATPAY_PROBE_PREFIX)) == 0)
		return false;
	if (serial.len == 0 || nonce.len == 0 ||
		memchr(nonce.data, '\n', nonce.len) != NULL)
		return false;
	if (!idem_parse_unix_seconds(timestamp, &secs) ||
		!idem_timestamp_acceptable(secs, req->tolerance_usecs))
		return false;
	sig = idem_decode_base64(signature, &siglen);
	if (sig == NULL)
		return false;

	parts[0] = timestamp;
	parts[1] = newline;
	parts[2] = nonce;
	parts[3] = newline;
	parts[4] = req->payload;
	parts[5] = newline;
	foreach(lc, keys)
	{
		WechatpayKey *key = lfirst(lc);

		if (names_key(serial, key))
			matched |= idem_verify_signature(key->pkey, EVP_sha256(), parts, 6,
											 sig, siglen);
	}
	return matched;
}
