/*
 * crypto_sign.c
 *		Crypto layer: digests, and RSA and Ed25519 signatures checked with
 *		OpenSSL's libcrypto.
 *
 * May call: the wire format (wire.h), the keys of crypto_key.c and
 * OpenSSL.  A signature that does not verify, or that OpenSSL cannot check,
 * is false, never an error; only running out of memory raises one.
 */
#include "postgres.h"

#include <openssl/rsa.h>

#include "webhook/crypto.h"

/*
 * The digest of the concatenated parts into out (EVP_MAX_MD_SIZE bytes);
 * its length, or 0 if OpenSSL fails.  One digest context serves the whole
 * backend, and each digest is fetched from its provider once: a context
 * made, or a digest fetched, for every call costs a tenth of an RSA check.
 */
unsigned int
idem_verify_digest(const EVP_MD *md, const Slice *parts, int nparts,
				   unsigned char *out)
{
	static EVP_MD_CTX *ctx = NULL;
	static EVP_MD *fetched[2] = {NULL, NULL};
	int			slot = EVP_MD_get_type(md) == NID_sha256 ? 0 :
		EVP_MD_get_type(md) == NID_sha1 ? 1 : -1;
	const EVP_MD *use = md;
	unsigned int len = 0;
	bool		ok;

	if (ctx == NULL && (ctx = EVP_MD_CTX_new()) == NULL)
		return 0;
	if (slot >= 0)
	{
		if (fetched[slot] == NULL)
			fetched[slot] = EVP_MD_fetch(NULL, EVP_MD_get0_name(md), NULL);
		if (fetched[slot] != NULL)
			use = fetched[slot];
	}
	ok = EVP_DigestInit_ex2(ctx, use, NULL) == 1;
	for (int i = 0; ok && i < nparts; i++)
		ok = EVP_DigestUpdate(ctx, parts[i].data, parts[i].len) == 1;
	ok = ok && EVP_DigestFinal_ex(ctx, out, &len) == 1;
	return ok ? len : 0;
}

/*
 * Does sig sign the concatenated parts under key?  md is the digest of an
 * RSA (PKCS#1 v1.5) signature, or NULL for Ed25519, which signs the message
 * itself.  An RSA signature is checked as EVP_DigestVerify would (digest,
 * then the RSA check of the DigestInfo), in two steps so that the key's
 * context is made once.
 */
bool
idem_verify_signature(EVP_PKEY *key, const EVP_MD *md, const Slice *parts,
					  int nparts, const uint8 *sig, size_t siglen)
{
	char	   *msg = NULL;
	size_t		len = 0;
	EVP_MD_CTX *ctx;
	bool		ok;

	if (md != NULL && EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA)
	{
		unsigned char dgst[EVP_MAX_MD_SIZE];
		unsigned int dlen = idem_verify_digest(md, parts, nparts, dgst);
		bool		new_ctx;
		EVP_PKEY_CTX *pctx = dlen > 0 ? idem_verify_rsa_verifier(key, md, &new_ctx) : NULL;

		ok = pctx != NULL && EVP_PKEY_verify(pctx, sig, siglen, dgst, dlen) == 1;
		if (pctx != NULL && new_ctx)
			EVP_PKEY_CTX_free(pctx);
		idem_clear_openssl_errors();
		return ok;
	}

	/* Ed25519 takes the whole message at once: join it before OpenSSL holds anything */
	if (md == NULL)
	{
		char	   *p;

		for (int i = 0; i < nparts; i++)
			len += parts[i].len;
		p = msg = palloc(len + 1);
		for (int i = 0; i < nparts; i++)
		{
			memcpy(p, parts[i].data, parts[i].len);
			p += parts[i].len;
		}
	}
	ctx = EVP_MD_CTX_new();
	if (ctx == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	ok = EVP_DigestVerifyInit(ctx, NULL, md, NULL, key) == 1;
	if (md == NULL)
		ok = ok && EVP_DigestVerify(ctx, sig, siglen, (const unsigned char *) msg, len) == 1;
	else
	{
		for (int i = 0; ok && i < nparts; i++)
			ok = EVP_DigestVerifyUpdate(ctx, parts[i].data, parts[i].len) == 1;
		ok = ok && EVP_DigestVerifyFinal(ctx, sig, siglen) == 1;
	}
	EVP_MD_CTX_free(ctx);
	idem_clear_openssl_errors();
	if (msg != NULL)
		pfree(msg);
	return ok;
}
