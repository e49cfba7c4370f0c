/*
 * scheme_alipay_v3.c
 *		Scheme: messages Alipay signs under its API v3 protocol, with an RSA
 *		signature (SHA256withRSA) in alipay-signature over alipay-timestamp,
 *		alipay-nonce and the body, as Alipay's SDKs check them.
 *
 * May call: the wire format (wire.h) and the Alipay scheme's keys
 * (scheme_form.c): v3 signs with the same Alipay public key.  Anything
 * wrong with the request is false, never an error.
 */
#include "postgres.h"

#include "webhook/scheme.h"

/*
 * A v3 message: alipay-timestamp fresh, alipay-nonce present and on one
 * line, and alipay-signature (base64) made by one of the keys over
 * "<timestamp>\n<nonce>\n<body>\n".  A nonce holding a line end is false:
 * it could move bytes between the nonce and the body without changing what
 * was signed.  alipay-sn, the serial of a certificate-mode key, is not
 * compared: every key of the secret is tried.
 */
bool
idem_alipay_v3_verify(void *key, const VerifyRequest *req)
{
	Slice		signature;
	Slice		newline = {"\n", 1};
	Slice		parts[6];
	uint8	   *sig;
	size_t		siglen;

	if (!idem_find_unix_millis(req->headers, "alipay-timestamp", req->tolerance_usecs, &parts[0]) ||
		!idem_find_header(req->headers, "alipay-nonce", &parts[2]) ||
		!idem_find_header(req->headers, "alipay-signature", &signature))
		return false;
	if (parts[2].len == 0 || memchr(parts[2].data, '\n', parts[2].len) != NULL ||
		memchr(parts[2].data, '\r', parts[2].len) != NULL)
		return false;
	sig = idem_decode_base64(signature, &siglen);
	if (sig == NULL)
		return false;
	parts[1] = newline;
	parts[3] = newline;
	parts[4] = req->payload;
	parts[5] = newline;
	return idem_alipay_keys_verify(key, EVP_sha256(), parts, lengthof(parts), sig, siglen);
}
