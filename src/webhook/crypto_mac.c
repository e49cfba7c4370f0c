/*
 * crypto_mac.c
 *		Crypto layer: HMAC-SHA256 keys and MACs, from OpenSSL's libcrypto, and
 *		their comparison in constant time.
 *
 * May call: the secrets of crypto_secret.c and OpenSSL.  An HMAC that
 * OpenSSL cannot compute is an internal error (XX000), never the request's.
 */
#include "postgres.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>

#include "webhook/crypto.h"

/* An HMAC-SHA256 key, set up in OpenSSL (idem_verify_mac_key) */
struct VerifyMacKey
{
	EVP_MAC_CTX *ctx;			/* holds the key's state; reset for each MAC */
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
			 errmsg("could not compute HMAC-SHA256")));
}

/*
 * An HMAC-SHA256 key set up from its bytes, freed and wiped when the call
 * ends.  OpenSSL hashes the key's pads once, here; each MAC then starts
 * from that state (idem_verify_mac), which costs half of setting up a new one.
 * HMAC is fetched from its provider once per backend.
 */
VerifyMacKey *
idem_verify_mac_key(const uint8 *key, size_t len)
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
	idem_verify_track(mk->ctx, release_mac);
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	/* a NULL key would mean "the key set before" */
	if (EVP_MAC_init(mk->ctx, len > 0 ? key : (const uint8 *) "", len, params) != 1)
		mac_failed();
	return mk;
}

/* HMAC-SHA256 of the concatenated parts under key, into mac */
void
idem_verify_mac(const VerifyMacKey *key, const Slice *parts, int nparts,
				uint8 *mac)
{
	size_t		len = 0;
	bool		ok = EVP_MAC_init(key->ctx, NULL, 0, NULL) == 1;

	for (int i = 0; ok && i < nparts; i++)
		ok = EVP_MAC_update(key->ctx, (const unsigned char *) parts[i].data, parts[i].len) == 1;
	ok = ok && EVP_MAC_final(key->ctx, mac, &len, VERIFY_MAC_LEN) == 1;
	if (!ok || len != VERIFY_MAC_LEN)
		mac_failed();
}

/* Compare two MACs in time independent of where they differ */
bool
idem_mac_equal(const uint8 *a, const uint8 *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}
