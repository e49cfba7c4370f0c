/*
 * crypto_chain.c
 *		Crypto layer: certificate chains checked with OpenSSL against the
 *		roots a secret holds, the per-backend cache of the chains checked,
 *		and the common name of a certificate.
 *
 * May call: the wire format (wire.h), the keys and certificates of
 * crypto_key.c, the digests of crypto_sign.c, the tracking of
 * crypto_secret.c and OpenSSL's libcrypto.  A certificate that does not
 * chain is false or NULL, never an error; only running out of memory (or
 * tracking too many objects) raises one, and never while OpenSSL holds
 * something.
 */
#include "postgres.h"

#include "datatype/timestamp.h"

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
	/* names them in the cache of chains: the same text, the same roots */
	if (idem_verify_digest(EVP_sha256(), &pem, 1, roots->digest) != VERIFY_MAC_LEN)
		memset(roots->digest, 0, VERIFY_MAC_LEN);

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
 * Chains checked in earlier calls: the SHA-256 of the roots, of how many
 * certificates the text could hold and of the text, the first
 * certificate, and the times between which every certificate of its chain
 * is valid.  A gateway that sends its certificate with every notification
 * sends the same one all day; building and checking its chain costs an
 * RSA check a link.  The dates are checked at each call against the times
 * kept; a time outside them is checked again in full.  Only chains that
 * verified are kept, at most CHAIN_CACHE_ENTRIES, each entry with one
 * reference to its certificate: a sender can only make the cache forget.
 */
#define CHAIN_CACHE_ENTRIES	16

typedef struct CachedChain
{
	X509	   *leaf;			/* NULL: a free entry */
	uint8		digest[VERIFY_MAC_LEN];
	int64		not_before;		/* unix seconds: valid from ... */
	int64		not_after;		/* ... until just before this */
	uint64		used;			/* when it was last used, to evict the oldest */
} CachedChain;

static CachedChain chain_cache[CHAIN_CACHE_ENTRIES];
static uint64 chain_clock = 0;

/* An ASN1_TIME in unix seconds; false if OpenSSL cannot read it */
static bool
asn1_time_secs(const ASN1_TIME *t, int64 *secs)
{
	struct tm	tm;

	if (ASN1_TIME_to_tm(t, &tm) != 1)
		return false;
	*secs = idem_days_since_epoch(tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday) * SECS_PER_DAY +
		tm.tm_hour * SECS_PER_HOUR + tm.tm_min * SECS_PER_MINUTE + tm.tm_sec;
	return true;
}

/*
 * The times between which every certificate of the chain is valid, as
 * X509_verify_cert checks them (valid from notBefore, expired at
 * notAfter); false if a date does not read
 */
static bool
chain_validity(STACK_OF(X509) *chain, int64 *not_before, int64 *not_after)
{
	*not_before = PG_INT64_MIN;
	*not_after = PG_INT64_MAX;
	for (int i = 0; i < sk_X509_num(chain); i++)
	{
		X509	   *cert = sk_X509_value(chain, i);
		int64		from;
		int64		until;

		if (!asn1_time_secs(X509_get0_notBefore(cert), &from) ||
			!asn1_time_secs(X509_get0_notAfter(cert), &until))
			return false;
		*not_before = Max(*not_before, from);
		*not_after = Min(*not_after, until);
	}
	return true;
}

/*
 * Does leaf chain to a root of roots, through the secret's intermediates
 * and untrusted, every certificate valid at the unix time at (and the
 * validity of the whole chain into *not_before and *not_after)?  No
 * purpose or key usage is required; revocation is not checked.
 */
static bool
chain_verifies(const VerifyRoots *roots, X509 *leaf, STACK_OF(X509) *untrusted,
			   int64 at, int64 *not_before, int64 *not_after)
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
		ok = X509_verify_cert(ctx) == 1 &&
			chain_validity(X509_STORE_CTX_get0_chain(ctx), not_before, not_after);
	}
	X509_STORE_CTX_free(ctx);
	sk_X509_free(links);
	idem_clear_openssl_errors();
	return ok;
}

/* Keep a chain that verified, in place of a free or the oldest entry */
static void
chain_cache_add(const uint8 *digest, X509 *leaf, int64 not_before, int64 not_after)
{
	CachedChain *victim = &chain_cache[0];

	for (int i = 0; i < CHAIN_CACHE_ENTRIES; i++)
	{
		CachedChain *e = &chain_cache[i];

		if (e->leaf == NULL || (victim->leaf != NULL && e->used < victim->used))
			victim = e;
	}
	if (victim->leaf != NULL)
		X509_free(victim->leaf);
	X509_up_ref(leaf);
	victim->leaf = leaf;
	memcpy(victim->digest, digest, VERIFY_MAC_LEN);
	victim->not_before = not_before;
	victim->not_after = not_after;
	victim->used = ++chain_clock;
}

/*
 * The first certificate of pem when pem is one to max_certs well-formed
 * certificates (text between blocks aside) and the first chains to a root
 * of roots, through the others and the secret's intermediates, every
 * certificate valid at the unix time at; NULL otherwise.  The certificate
 * is freed when the call ends.  A chain that verified is kept (see
 * chain_cache) and only its dates are checked when the same text comes
 * again with the same roots.
 */
X509 *
idem_verify_chain_pem(const VerifyRoots *roots, Slice pem, int max_certs, int64 at)
{
	Slice		parts[3];
	uint8		digest[EVP_MAX_MD_SIZE];
	STACK_OF(X509) *certs;
	STACK_OF(X509) *untrusted;
	X509	   *leaf;
	int64		not_before;
	int64		not_after;
	bool		ok;

	parts[0].data = (const char *) roots->digest;
	parts[0].len = VERIFY_MAC_LEN;
	parts[1].data = (const char *) &max_certs;
	parts[1].len = sizeof(max_certs);
	parts[2] = pem;
	if (idem_verify_digest(EVP_sha256(), parts, 3, digest) != VERIFY_MAC_LEN)
		return NULL;
	for (int i = 0; i < CHAIN_CACHE_ENTRIES; i++)
	{
		CachedChain *e = &chain_cache[i];

		if (e->leaf != NULL && memcmp(e->digest, digest, VERIFY_MAC_LEN) == 0 &&
			at >= e->not_before && at < e->not_after)
		{
			e->used = ++chain_clock;
			X509_up_ref(e->leaf);
			idem_verify_track_certificate(e->leaf);
			return e->leaf;
		}
	}

	certs = idem_verify_pem_certificates(pem);
	if (certs == NULL || sk_X509_num(certs) > max_certs)
		return NULL;
	leaf = sk_X509_value(certs, 0);
	untrusted = sk_X509_new_null();
	out_of_memory_unless(untrusted != NULL);
	idem_verify_track(untrusted, release_stack);
	for (int i = 1; i < sk_X509_num(certs); i++)
		out_of_memory_unless(sk_X509_push(untrusted, sk_X509_value(certs, i)) > 0);
	ok = chain_verifies(roots, leaf, untrusted, at, &not_before, &not_after);
	if (!ok)
		return NULL;
	chain_cache_add(digest, leaf, not_before, not_after);
	return leaf;
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
