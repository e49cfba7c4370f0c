/*
 * crypto.h
 *		The crypto of the webhook code: the secrets and OpenSSL objects of a
 *		call, MACs, keys and their cache, certificate chains, signatures.
 *
 * The second layer (crypto_*.c), all over OpenSSL's libcrypto, never
 * hand-written: it may call the wire format (wire.h), never a scheme
 * (scheme.h) or an entry point (entry.h).  Whatever a scheme makes from
 * the secret or the request is handed over to the tracking here; the entry
 * point wipes and frees all of it when the call ends, error or not.
 */
#ifndef IDEM_WEBHOOK_CRYPTO_H
#define IDEM_WEBHOOK_CRYPTO_H

#include "webhook/wire.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

/* Clear OpenSSL's error queue, if anything is on it */
static inline void
idem_clear_openssl_errors(void)
{
	if (ERR_peek_error() != 0)
		ERR_clear_error();
}

/* Secrets and OpenSSL objects of one call (crypto_secret.c) */
extern void *idem_verify_secret_alloc(size_t len);
extern void idem_verify_track(void *object, void (*release) (void *));
extern void idem_verify_release_all(void);
extern uint8 *idem_decode_base64(Slice s, size_t *len);

/*
 * A key prepared to be kept past the call (a webhook source's): what its
 * preparation tracked is taken over, and released when the key is dropped.
 */
typedef struct VerifyHeld VerifyHeld;
extern int	idem_verify_tracked_mark(void);
extern VerifyHeld *idem_verify_hold(int mark);
extern void idem_verify_held_release(VerifyHeld *held);

/* HMAC-SHA256 and HMAC-SHA512 (crypto_mac.c) */
typedef struct VerifyMacKey VerifyMacKey;
extern VerifyMacKey *idem_verify_mac_key(const uint8 *key, size_t len);
extern VerifyMacKey *idem_verify_mac512_key(const uint8 *key, size_t len);
extern size_t idem_verify_mac_len(const VerifyMacKey *key);
extern void idem_verify_mac(const VerifyMacKey *key, const Slice *parts,
							int nparts, uint8 *mac);
extern bool idem_mac_equal(const uint8 *a, const uint8 *b, size_t len);

/*
 * Public keys, certificates and PEM (crypto_key.c), read with OpenSSL; a
 * key, certificate or block read in an earlier call is not decoded again.
 */
typedef enum VerifyPemStatus
{
	VERIFY_PEM_BLOCK,			/* a block was read */
	VERIFY_PEM_NONE,			/* no block is left */
	VERIFY_PEM_MALFORMED		/* a BEGIN line starts something unreadable */
} VerifyPemStatus;

typedef struct VerifyPemBlock
{
	Slice		before;			/* the text before the BEGIN line */
	const char *label;			/* "CERTIFICATE", "PUBLIC KEY"... */
	X509	   *cert;			/* a CERTIFICATE block's certificate */
	EVP_PKEY   *key;			/* a PUBLIC KEY or RSA PUBLIC KEY block's key */
} VerifyPemBlock;

extern void idem_verify_track_pkey(EVP_PKEY *key);
extern EVP_PKEY *idem_verify_public_key(Slice der);
extern VerifyPemStatus idem_verify_pem_next(Slice *rest,
											VerifyPemBlock *block);
extern STACK_OF(X509) *idem_verify_pem_certificates(Slice text);
extern void idem_verify_track_certificate(X509 *cert);
extern EVP_PKEY_CTX *idem_verify_rsa_verifier(EVP_PKEY *key, const EVP_MD *md,
											  bool *new_ctx);

/*
 * Certificate chains (crypto_chain.c): the roots of a secret, and chains
 * checked against them at a given time, kept per backend once verified
 */
typedef struct VerifyRoots
{
	X509_STORE *store;			/* the self-signed certificates: trust anchors */
	STACK_OF(X509) *intermediates;	/* the others: links a chain may use */
	uint8		digest[VERIFY_MAC_LEN]; /* SHA-256 of their text, for the cache */
} VerifyRoots;

typedef enum VerifyRootsStatus
{
	VERIFY_ROOTS_OK,
	VERIFY_ROOTS_MALFORMED,		/* not only well-formed certificates */
	VERIFY_ROOTS_NONE			/* none is self-signed */
} VerifyRootsStatus;

extern VerifyRootsStatus idem_verify_roots_read(Slice pem, VerifyRoots *roots);
extern X509 *idem_verify_chain_pem(const VerifyRoots *roots, Slice pem,
								   int max_certs, int64 at);
extern bool idem_verify_certificate_cn(X509 *cert, Slice *cn);

/* Digests and signatures (crypto_sign.c) */
extern unsigned int idem_verify_digest(const EVP_MD *md, const Slice *parts,
									   int nparts, unsigned char *out);
extern bool idem_verify_signature(EVP_PKEY *key, const EVP_MD *md,
								  const Slice *parts, int nparts,
								  const uint8 *sig, size_t siglen);

#endif							/* IDEM_WEBHOOK_CRYPTO_H */
