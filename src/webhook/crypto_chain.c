/*
 * crypto_chain.c
 *		Crypto layer: certificate chains checked with OpenSSL against the
 *		roots a secret holds, and the common name of a certificate.
 *
 * May call: the wire format (wire.h), the keys and certificates of
 * crypto_key.c, the tracking of crypto_secret.c and OpenSSL's libcrypto.
 * A certificate that does not chain is false or NULL, never an error; only
 * running out of memory (or tracking too many objects) raises one, and
 * never while OpenSSL holds something.
 */
#include "postgres.h"

#include <openssl/x509_vfy.h>

#include "webhook/crypto.h"

/* Release an X509_STORE (for idem_verify_track) */
static void
release_store(void *p)
{
	X509_STORE_free((X509_STORE *) p);
}

/* Release a stack of certificates without the certificates (for idem_verify_track) */
static void
release_stack(void *p)
{
	sk_X509_free((STACK_OF(X509) *) p);
}

/* The out-of-memory error, where a failed OpenSSL allocation is one */
static void
out_of_memory_unless(bool ok)
{
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
}

/*
 * Read the certificates of a secret, PEM, one or several in any order,
 * into *roots: the self-signed ones are the trust anchors, the others
 * intermediates a chain may go through.  The objects are freed when the
 * call ends (or with the key that holds them).  VERIFY_ROOTS_MALFORMED if
 * the text holds anything but well-formed CERTIFICATE blocks (text
 * between them aside), VERIFY_ROOTS_NONE if none is self-signed; the
 * caller raises its scheme's error.
 */
VerifyRootsStatus
idem_verify_roots_read(Slice pem, VerifyRoots *roots)
{
	STACK_OF(X509) *certs = idem_verify_pem_certificates(pem);
	int			nroots = 0;

	if (certs == NULL)
		return VERIFY_ROOTS_MALFORMED;
	roots->store = X509_STORE_new();
	out_of_memory_unless(roots->store != NULL);
	idem_verify_track(roots->store, release_store);
	roots->intermediates = sk_X509_new_null();
	out_of_memory_unless(roots->intermediates != NULL);
	idem_verify_track(roots->intermediates, release_stack);

	for (int i = 0; i < sk_X509_num(certs); i++)
	{
		X509	   *cert = sk_X509_value(certs, i);

		/* the store and the stack share the certificates, freed with certs */
		if (X509_self_signed(cert, 1) == 1)
		{
			out_of_memory_unless(X509_STORE_add_cert(roots->store, cert) == 1);
			nroots++;
		}
		else
			out_of_memory_unless(sk_X509_push(roots->intermediates, cert) > 0);
	}
	return nroots > 0 ? VERIFY_ROOTS_OK : VERIFY_ROOTS_NONE;
}

/*
 * Does leaf chain to a root of roots, through the secret's intermediates
 * and untrusted, every certificate valid at the unix time at?  No purpose
 * or key usage is required; revocation is not checked.
 */
static bool
chain_verifies(const VerifyRoots *roots, X509 *leaf, STACK_OF(X509) *untrusted,
			   int64 at)
{
	STACK_OF(X509) *links = sk_X509_dup(roots->intermediates);
	X509_STORE_CTX *ctx = NULL;
	bool		ok = links != NULL;

	for (int i = 0; ok && i < sk_X509_num(untrusted); i++)
		ok = sk_X509_push(links, sk_X509_value(untrusted, i)) > 0;
	ok = ok && (ctx = X509_STORE_CTX_new()) != NULL;
	ok = ok && X509_STORE_CTX_init(ctx, roots->store, leaf, links) == 1;
	if (ok)
	{
		X509_STORE_CTX_set_time(ctx, 0, (time_t) at);
		ok = X509_verify_cert(ctx) == 1;
	}
	X509_STORE_CTX_free(ctx);
	sk_X509_free(links);
	idem_clear_openssl_errors();
	return ok;
}

/*
 * The first certificate of pem when pem is one to max_certs well-formed
 * certificates (text between blocks aside) and the first chains to a root
 * of roots, through the others and the secret's intermediates, every
 * certificate valid at the unix time at; NULL otherwise.  The certificate
 * is freed when the call ends.
 */
X509 *
idem_verify_chain_pem(const VerifyRoots *roots, Slice pem, int max_certs, int64 at)
{
	STACK_OF(X509) *certs = idem_verify_pem_certificates(pem);
	STACK_OF(X509) *untrusted;
	X509	   *leaf;

	if (certs == NULL || sk_X509_num(certs) > max_certs)
		return NULL;
	leaf = sk_X509_value(certs, 0);
	untrusted = sk_X509_new_null();
	out_of_memory_unless(untrusted != NULL);
	idem_verify_track(untrusted, release_stack);
	for (int i = 1; i < sk_X509_num(certs); i++)
		out_of_memory_unless(sk_X509_push(untrusted, sk_X509_value(certs, i)) > 0);
	return chain_verifies(roots, leaf, untrusted, at) ? leaf : NULL;
}

/*
 * The common name of a certificate's subject, UTF-8, into *cn (palloc'd);
 * false if the subject has none, or more than one, or it does not convert
 */
bool
idem_verify_certificate_cn(X509 *cert, Slice *cn)
{
	X509_NAME  *subject = X509_get_subject_name(cert);
	int			at = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
	unsigned char *utf8 = NULL;
	int			len;
	char	   *copy;

	if (at < 0 || X509_NAME_get_index_by_NID(subject, NID_commonName, at) >= 0)
		return false;
	len = ASN1_STRING_to_UTF8(&utf8,
							  X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, at)));
	idem_clear_openssl_errors();
	if (len < 0)
		return false;
	copy = palloc_extended(len + 1, MCXT_ALLOC_NO_OOM);
	if (copy != NULL)
	{
		memcpy(copy, utf8, len);
		copy[len] = '\0';
	}
	OPENSSL_free(utf8);
	out_of_memory_unless(copy != NULL);
	cn->data = copy;
	cn->len = len;
	return true;
}
