/*
 * crypto_key.c
 *		Crypto layer: public keys and certificates read from DER and PEM
 *		with OpenSSL, and the per-backend caches of them.
 *
 * May call: the wire format (wire.h), the tracking of crypto_secret.c and
 * OpenSSL's libcrypto.  A key or block that does not read is NULL or
 * VERIFY_PEM_MALFORMED, never an error; only running out of memory (or
 * tracking too many objects) raises one.
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "utils/memutils.h"

#include <openssl/asn1t.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "webhook/crypto.h"

/* Release an EVP_PKEY (for idem_verify_track) */
static void
release_pkey(void *p)
{
	EVP_PKEY_free((EVP_PKEY *) p);
}

/* Free a public key when the call ends */
void
idem_verify_track_pkey(EVP_PKEY *key)
{
	idem_verify_track(key, release_pkey);
}

/*
 * A SubjectPublicKeyInfo read as its two parts, the key's bytes left as
 * they are (RFC 5280, 4.1): what OpenSSL's own X509_PUBKEY reads, without
 * turning the key into an EVP_PKEY.
 */
typedef struct SpkiParts
{
	X509_ALGOR *algorithm;
	ASN1_BIT_STRING *key;
} SpkiParts;

ASN1_SEQUENCE(SpkiParts) = {
	ASN1_SIMPLE(SpkiParts, algorithm, X509_ALGOR),
	ASN1_SIMPLE(SpkiParts, key, ASN1_BIT_STRING)
} static_ASN1_SEQUENCE_END(SpkiParts)

/*
 * d2i_PUBKEY, the common case first: an RSA key (rsaEncryption, parameters
 * NULL or absent, the key a PKCS#1 RSAPublicKey and nothing after it) is
 * read by OpenSSL's RSA key reader directly.  OpenSSL 3.0's d2i_PUBKEY
 * sets up its whole decoder chain for every key, which costs several
 * times the RSA verification itself; the reader here accepts nothing
 * d2i_PUBKEY refuses.  Anything else (another type, odd parameters) goes
 * to d2i_PUBKEY, which decides.  Advances *pp past the SubjectPublicKeyInfo
 * as d2i_PUBKEY does; the key is the caller's to free.
 */
static EVP_PKEY *
read_pubkey(const unsigned char **pp, long len)
{
	const unsigned char *p = *pp;
	SpkiParts  *parts = (SpkiParts *) ASN1_item_d2i(NULL, &p, len,
												ASN1_ITEM_rptr(SpkiParts));
	EVP_PKEY   *key = NULL;

	if (parts != NULL)
	{
		const ASN1_OBJECT *oid;
		int			ptype;
		const void *pval;

		X509_ALGOR_get0(&oid, &ptype, &pval, parts->algorithm);
		if (OBJ_obj2nid(oid) == NID_rsaEncryption &&
			(ptype == V_ASN1_UNDEF || ptype == V_ASN1_NULL) &&
			(parts->key->flags & 0x07) == 0)
		{
			const unsigned char *q = parts->key->data;

			key = d2i_PublicKey(EVP_PKEY_RSA, NULL, &q, parts->key->length);
			if (key != NULL && q != parts->key->data + parts->key->length)
			{
				EVP_PKEY_free(key);
				key = NULL;
			}
		}
		ASN1_item_free((ASN1_VALUE *) parts, ASN1_ITEM_rptr(SpkiParts));
	}
	ERR_clear_error();
	if (key != NULL)
	{
		*pp = p;
		return key;
	}
	return d2i_PUBKEY(NULL, pp, len);
}

/*
 * Public keys and certificates made in earlier calls, kept in two tables
 * of the same kind: by their DER bytes (der_cache) and by the text of the
 * PEM block they were read from (pem_cache, below).  OpenSSL 3.0 reads a
 * certificate, and a public key of another type than RSA, through a chain
 * of decoders that costs several times a signature check, and a fresh RSA
 * key computes its Montgomery constants on first use: a backend that
 * verifies a gateway's notifications all day keeps its few keys here
 * instead.  Only public material is kept, never a secret (a certificate in
 * a form is public too, and each table has a fixed number of entries: a
 * sender can only make the cache forget).  Each entry holds one reference
 * to its object; a call that uses it takes another, which the call's end
 * releases like any object the call made.
 */
#define VERIFY_CACHE_ENTRIES	32

typedef enum DerKind
{
	DER_SPKI,					/* SubjectPublicKeyInfo */
	DER_RSA_PUBLIC,				/* PKCS#1 RSAPublicKey */
	DER_X509					/* a certificate */
} DerKind;

typedef struct CachedObject
{
	void	   *object;			/* EVP_PKEY or X509; NULL: a free entry */
	DerKind		kind;
	uint32		hash;			/* of bytes (0 in pem_cache, which compares them) */
	size_t		len;
	char	   *bytes;			/* what it was read from, in TopMemoryContext */
	uint64		used;			/* when it was last used, to evict the oldest */
	EVP_PKEY_CTX *verifier;		/* set up to verify with the RSA key and ... */
	int			verifier_md;	/* ... this digest, for idem_verify_signature */
} CachedObject;

static CachedObject der_cache[VERIFY_CACHE_ENTRIES];
static uint64 cache_clock = 0;

/* Drop one reference to a cached object of that kind */
static void
der_object_free(DerKind kind, void *object)
{
	if (kind == DER_X509)
		X509_free((X509 *) object);
	else
		EVP_PKEY_free((EVP_PKEY *) object);
}

/* Take one more reference to a cached object of that kind */
static void
der_object_ref(DerKind kind, void *object)
{
	if (kind == DER_X509)
		X509_up_ref((X509 *) object);
	else
		EVP_PKEY_up_ref((EVP_PKEY *) object);
}

/*
 * The entry of a table of n that holds the object read from exactly these
 * bytes, marked as used; NULL if there is none
 */
static CachedObject *
cache_find(CachedObject *cache, int n, const char *bytes, size_t len, uint32 hash)
{
	for (int i = 0; i < n; i++)
	{
		CachedObject *e = &cache[i];

		if (e->object != NULL && e->hash == hash && e->len == len &&
			memcmp(e->bytes, bytes, len) == 0)
		{
			e->used = ++cache_clock;
			return e;
		}
	}
	return NULL;
}

/*
 * Keep a reference to object, read from these bytes, in a table of n, in
 * place of its free or least recently used entry; if memory allows (a
 * failure only skips the cache)
 */
static void
cache_add(CachedObject *cache, int n, const char *bytes, size_t len,
		  uint32 hash, DerKind kind, void *object)
{
	CachedObject *victim = &cache[0];
	char	   *copy;

	for (int i = 0; i < n; i++)
	{
		CachedObject *e = &cache[i];

		if (e->object == NULL || (victim->object != NULL && e->used < victim->used))
			victim = e;
	}
	copy = MemoryContextAllocExtended(TopMemoryContext, len, MCXT_ALLOC_NO_OOM);
	if (copy == NULL)
		return;
	if (victim->object != NULL)
	{
		der_object_free(victim->kind, victim->object);
		pfree(victim->bytes);
		EVP_PKEY_CTX_free(victim->verifier);
		victim->verifier = NULL;
	}
	memcpy(copy, bytes, len);
	der_object_ref(kind, object);
	victim->object = object;
	victim->kind = kind;
	victim->hash = hash;
	victim->len = len;
	victim->bytes = copy;
	victim->used = ++cache_clock;
}

/* Parse DER of that kind, all of it; a new object, or NULL */
static void *
der_parse(DerKind kind, const unsigned char *der, long len)
{
	const unsigned char *p = der;
	void	   *object;

	if (kind == DER_X509)
		object = d2i_X509(NULL, &p, len);
	else if (kind == DER_SPKI)
		object = read_pubkey(&p, len);
	else
		object = d2i_PublicKey(EVP_PKEY_RSA, NULL, &p, len);
	ERR_clear_error();
	if (object != NULL && p != der + len)
	{
		/* trailing bytes after the object */
		der_object_free(kind, object);
		object = NULL;
	}
	return object;
}

/*
 * The object of exactly these DER bytes, from the cache or parsed now and
 * cached: a reference that is the caller's; NULL if the bytes are not one.
 * The same bytes read as another kind are another entry: the hash covers
 * the kind too.
 */
static void *
der_object(DerKind kind, const unsigned char *der, long len)
{
	uint32		hash = hash_combine(hash_bytes(der, (int) len), (uint32) kind);
	CachedObject *hit = cache_find(der_cache, VERIFY_CACHE_ENTRIES,
								   (const char *) der, len, hash);
	void	   *object;

	if (hit != NULL && hit->kind == kind)
	{
		der_object_ref(kind, hit->object);
		return hit->object;
	}
	object = der_parse(kind, der, len);
	if (object != NULL)
		cache_add(der_cache, VERIFY_CACHE_ENTRIES, (const char *) der, len,
				  hash, kind, object);
	return object;
}

/*
 * The public key of DER SubjectPublicKeyInfo bytes, freed when the call
 * ends; NULL if they are not exactly one
 */
EVP_PKEY *
idem_verify_public_key(Slice der)
{
	EVP_PKEY   *key;

	if (der.len == 0 || der.len > PG_INT32_MAX)
		return NULL;
	key = der_object(DER_SPKI, (const unsigned char *) der.data, (long) der.len);
	if (key != NULL)
		idem_verify_track_pkey(key);
	return key;
}

/* Release an X509 (for idem_verify_track) */
static void
release_x509(void *p)
{
	X509_free((X509 *) p);
}

/* Where the first line of s that starts with prefix begins, or NULL */
static const char *
find_line_start(Slice s, const char *prefix)
{
	size_t		plen = strlen(prefix);
	size_t		i = 0;

	while (i + plen <= s.len)
	{
		const char *nl;

		if (memcmp(s.data + i, prefix, plen) == 0)
			return s.data + i;
		nl = memchr(s.data + i, '\n', s.len - i);
		if (nl == NULL)
			break;
		i = nl - s.data + 1;
	}
	return NULL;
}

/*
 * PEM blocks read in earlier calls: the exact text of each, from its BEGIN
 * line through its END line, and the object it holds.  A gateway's keys
 * come as PEM in every call (the secret, or UnionPay's signer certificate
 * in the form); decoding the base64 of a block costs more than everything
 * else the call does but the RSA check.  Only blocks of public material
 * are kept, at most PEM_CACHE_ENTRIES, each entry with one reference to
 * its object; a block is kept only when OpenSSL's reader stopped exactly
 * at the end of its END line, so the same text read again gives the same
 * block and stops at the same place.
 */
#define PEM_CACHE_ENTRIES	16

static CachedObject pem_cache[PEM_CACHE_ENTRIES];

/* The label of the blocks of a kind of object */
static const char *
kind_label(DerKind kind)
{
	switch (kind)
	{
		case DER_X509:
			return PEM_STRING_X509;
		case DER_SPKI:
			return PEM_STRING_PUBLIC;
		case DER_RSA_PUBLIC:
			return PEM_STRING_RSA_PUBLIC;
	}
	return NULL;
}

/* The kind of object a block's label names; false for any other label */
static bool
label_kind(const char *label, DerKind *kind)
{
	if (strcmp(label, PEM_STRING_X509) == 0)
		*kind = DER_X509;
	else if (strcmp(label, PEM_STRING_PUBLIC) == 0)
		*kind = DER_SPKI;
	else if (strcmp(label, PEM_STRING_RSA_PUBLIC) == 0)
		*kind = DER_RSA_PUBLIC;
	else
		return false;
	return true;
}

/*
 * The length of the text of the block whose BEGIN line starts at begin,
 * through the end of its first END line (its newline included): where
 * OpenSSL's reader stops when it reads the block.  0 if there is no END
 * line.
 */
static size_t
pem_block_extent(const char *begin, size_t len)
{
	const char *nl = memchr(begin, '\n', len);
	Slice		after;
	const char *end_line;

	if (nl == NULL)
		return 0;
	after.data = nl + 1;
	after.len = len - (after.data - begin);
	end_line = find_line_start(after, "-----END ");
	if (end_line == NULL)
		return 0;
	nl = memchr(end_line, '\n', len - (end_line - begin));
	return nl != NULL ? (size_t) (nl + 1 - begin) : len;
}

/*
 * Read the next PEM block of *rest and advance *rest past its END line.
 * block->before is the text between the start of *rest and the block's
 * BEGIN line (callers decide what may stand there), block->label the
 * block's label ("CERTIFICATE", "PUBLIC KEY"...); a CERTIFICATE block's
 * certificate goes to block->cert, a PUBLIC KEY (SubjectPublicKeyInfo) or
 * RSA PUBLIC KEY (PKCS#1) block's key to block->key, each NULL when the
 * block's DER is not exactly one; they are the caller's to track or free.
 * VERIFY_PEM_NONE when no line of *rest begins a block (block->before is
 * then all of it); VERIFY_PEM_MALFORMED when a BEGIN line starts no
 * readable block: no matching END line, bad base64, or headers (an
 * encrypted block).  Nothing here raises an error but running out of
 * memory.
 */
VerifyPemStatus
idem_verify_pem_next(Slice *rest, VerifyPemBlock *block)
{
	const char *begin = find_line_start(*rest, "-----BEGIN ");
	size_t		len;
	size_t		extent;
	CachedObject *hit;
	BIO		   *bio;
	char	   *name = NULL;
	char	   *header = NULL;
	unsigned char *data = NULL;
	long		datalen = 0;
	bool		ok;
	bool		known = false;
	bool		oom = false;
	DerKind		kind = DER_X509;
	void	   *object = NULL;
	size_t		consumed;

	block->before.data = rest->data;
	block->before.len = begin != NULL ? (size_t) (begin - rest->data) : rest->len;
	block->label = NULL;
	block->cert = NULL;
	block->key = NULL;
	if (begin == NULL)
		return VERIFY_PEM_NONE;
	len = rest->len - block->before.len;
	if (len > PG_INT32_MAX)
		return VERIFY_PEM_MALFORMED;

	extent = pem_block_extent(begin, len);
	if (extent > 0 &&
		(hit = cache_find(pem_cache, PEM_CACHE_ENTRIES, begin, extent, 0)) != NULL)
	{
		kind = hit->kind;
		object = hit->object;
		der_object_ref(kind, object);
		block->label = kind_label(kind);
		consumed = extent;
	}
	else
	{
		bio = BIO_new_mem_buf(begin, (int) len);
		if (bio == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		ok = PEM_read_bio(bio, &name, &header, &data, &datalen) == 1;
		consumed = len - BIO_pending(bio);
		BIO_free(bio);
		ERR_clear_error();

		/* nothing below raises an error while OpenSSL's buffers are held */
		ok = ok && header[0] == '\0' && datalen > 0;
		if (ok)
		{
			known = label_kind(name, &kind);
			if (known)
			{
				block->label = kind_label(kind);
				object = der_object(kind, data, datalen);
			}
			else
			{
				char	   *copy = palloc_extended(strlen(name) + 1, MCXT_ALLOC_NO_OOM);

				if (copy != NULL)
					strcpy(copy, name);
				oom = (copy == NULL);
				block->label = copy;
			}
		}
		OPENSSL_free(name);
		OPENSSL_free(header);
		OPENSSL_free(data);
		if (oom)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		if (!ok)
			return VERIFY_PEM_MALFORMED;
		if (object != NULL && consumed == extent)
			cache_add(pem_cache, PEM_CACHE_ENTRIES, begin, extent, 0, kind, object);
	}

	if (object != NULL && kind == DER_X509)
		block->cert = (X509 *) object;
	else if (object != NULL)
		block->key = (EVP_PKEY *) object;
	rest->data = begin + consumed;
	rest->len = len - consumed;
	return VERIFY_PEM_BLOCK;
}

/* The entry of a table of n whose object is, or holds, key; or NULL */
static CachedObject *
cache_entry_of_key(CachedObject *cache, int n, EVP_PKEY *key)
{
	for (int i = 0; i < n; i++)
	{
		CachedObject *e = &cache[i];

		if (e->object != NULL &&
			(e->kind == DER_X509 ? X509_get0_pubkey((X509 *) e->object) : (EVP_PKEY *) e->object) == key)
			return e;
	}
	return NULL;
}

/*
 * A key context set up to verify RSA PKCS#1 v1.5 signatures over digests of
 * md with key: a new one (new_ctx set), or one kept with the key in either
 * table of the cache, made on first use.  NULL when OpenSSL cannot set one up.  Setting
 * one up fetches the signature algorithm and hands the key to its provider;
 * a kept one is used again as it is, as openssl speed does.
 */
EVP_PKEY_CTX *
idem_verify_rsa_verifier(EVP_PKEY *key, const EVP_MD *md, bool *new_ctx)
{
	CachedObject *entry = cache_entry_of_key(der_cache, VERIFY_CACHE_ENTRIES, key);
	EVP_PKEY_CTX *ctx;

	if (entry == NULL)
		entry = cache_entry_of_key(pem_cache, PEM_CACHE_ENTRIES, key);
	if (entry != NULL && entry->verifier != NULL &&
		entry->verifier_md == EVP_MD_get_type(md))
	{
		*new_ctx = false;
		return entry->verifier;
	}

	ctx = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
	if (ctx != NULL &&
		(EVP_PKEY_verify_init(ctx) != 1 ||
		 EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) != 1 ||
		 EVP_PKEY_CTX_set_signature_md(ctx, md) != 1))
	{
		EVP_PKEY_CTX_free(ctx);
		ctx = NULL;
	}
	*new_ctx = (entry == NULL);
	if (entry != NULL && ctx != NULL)
	{
		EVP_PKEY_CTX_free(entry->verifier);
		entry->verifier = ctx;
		entry->verifier_md = EVP_MD_get_type(md);
	}
	return ctx;
}

/* Release a stack of certificates and the certificates (for idem_verify_track) */
static void
release_certificates(void *p)
{
	sk_X509_pop_free((STACK_OF(X509) *) p, X509_free);
}

/*
 * The certificates of a PEM text, in order, freed when the call ends; NULL
 * if it has none, or a block that is not a well-formed certificate.  Text
 * outside the blocks is ignored, as RFC 7468 says.
 */
STACK_OF(X509) *
idem_verify_pem_certificates(Slice text)
{
	STACK_OF(X509) *certs = sk_X509_new_null();
	Slice		rest = text;
	VerifyPemBlock block;
	VerifyPemStatus status;

	if (certs == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	idem_verify_track(certs, release_certificates);
	while ((status = idem_verify_pem_next(&rest, &block)) == VERIFY_PEM_BLOCK)
	{
		if (block.key != NULL)
			EVP_PKEY_free(block.key);
		if (block.cert == NULL)
			return NULL;
		if (!sk_X509_push(certs, block.cert))
		{
			X509_free(block.cert);
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory")));
		}
	}
	if (status != VERIFY_PEM_NONE || sk_X509_num(certs) == 0)
		return NULL;
	return certs;
}

/* Free a certificate when the call ends */
void
idem_verify_track_certificate(X509 *cert)
{
	idem_verify_track(cert, release_x509);
}
