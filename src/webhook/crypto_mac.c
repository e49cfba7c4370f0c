/*
 * crypto_mac.c
 *		Crypto layer: HMAC-SHA256 (and HMAC-SHA512) keys and MACs, from
 *		OpenSSL's libcrypto, and their comparison in constant time.
 *
 * May call: the secrets of crypto_secret.c and OpenSSL.  An HMAC that
 * OpenSSL cannot compute is an internal error (XX000), never the request's.
 */
#include "postgres.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>

#include "webhook/crypto.h"

/* An HMAC key, set up in OpenSSL (idem_verify_mac_key) */
struct VerifyMacKey
{
	EVP_MAC_CTX *ctx;			/* holds the key's state; reset for each MAC */
	size_t		len;			/* of its MACs: VERIFY_MAC_LEN or VERIFY_MAC512_LEN */
};

/* Free an EVP_MAC_CTX, which wipes its key (for idem_verify_track) */
static void
release_mac(void *p)
{
	EVP_MAC_CTX_free((EVP_MAC_CTX *) p);
}

/* The error of an HMAC that OpenSSL could not set up or compute */
static void
mac_failed(void)
{
	ERR_clear_error();
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("could not compute HMAC")));
}

/*
 * An HMAC key of digest (SHA256 or SHA512) set up from its bytes, freed
 * and wiped when the call ends.  OpenSSL hashes the key's pads once, here;
 * each MAC then starts from that state (idem_verify_mac), which costs half
 * of setting up a new one.  HMAC is fetched from its provider once per
 * backend.
 */
static VerifyMacKey *
mac_key_of(const uint8 *key, size_t len, const char *digest, size_t mac_len)
{
	static EVP_MAC *hmac = NULL;
	VerifyMacKey *mk = palloc(sizeof(VerifyMacKey));
	OSSL_PARAM	params[2];

	if (hmac == NULL && (hmac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL)
		mac_failed();
	mk->ctx = EVP_MAC_CTX_new(hmac);
	if (mk->ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	mk->len = mac_len;
	idem_verify_track(mk->ctx, release_mac);
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *) digest, 0);
	params[1] = OSSL_PARAM_construct_end();
	/* a NULL key would mean "the key set before" */
	if (EVP_MAC_init(mk->ctx, len > 0 ? key : (const uint8 *) "", len, params) != 1)
		mac_failed();
	return mk;
}

/* An HMAC-SHA256 key of these bytes */
VerifyMacKey *
idem_verify_mac_key(const uint8 *key, size_t len)
{
	return mac_key_of(key, len, "SHA256", VERIFY_MAC_LEN);
}

/* An HMAC-SHA512 key of these bytes */
VerifyMacKey *
idem_verify_mac512_key(const uint8 *key, size_t len)
{
	return mac_key_of(key, len, "SHA512", VERIFY_MAC512_LEN);
}

/* The length of key's MACs */
size_t
idem_verify_mac_len(const VerifyMacKey *key)
{
	return key->len;
}

/* The HMAC of the concatenated parts under key, into mac (of key's length) */
void
idem_verify_mac(const VerifyMacKey *key, const Slice *parts, int nparts,
				uint8 *mac)
{
	size_t		len = 0;
	bool		ok = EVP_MAC_init(key->ctx, NULL, 0, NULL) == 1;

	for (int i = 0; ok && i < nparts; i++)
		ok = EVP_MAC_update(key->ctx, (const unsigned char *) parts[i].data, parts[i].len) == 1;
	ok = ok && EVP_MAC_final(key->ctx, mac, &len, key->len) == 1;
	if (!ok || len != key->len)
		mac_failed();
}

/* Compare two MACs in time independent of where they differ */
bool
idem_mac_equal(const uint8 *a, const uint8 *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}
