/*
 * verify_util.c
 *		What the webhook signature schemes share: reading headers, lists,
 *		timestamps, hex and base64 out of the request; the secrets and OpenSSL
 *		objects of one call; PEM blocks, public keys and certificates; and
 *		the cryptography, from OpenSSL's libcrypto.
 *
 * The request comes from whoever can reach the application's endpoint, so
 * every reader here answers false (or NULL) on anything malformed and never
 * raises an error; only running out of memory does.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "common/hashfn.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include <openssl/asn1t.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include "verify.h"

/* Latest accepted unix timestamp: 9999-12-31 23:59:59 UTC */
#define MAX_UNIX_SECS	INT64CONST(253402300799)

/* Secrets and OpenSSL objects one call may hold at once */
#define VERIFY_MAX_TRACKED	64

/*
 * Most parameters a form may have: a gateway's notification has a few
 * dozen, and a cap keeps a hostile body from costing more than its size.
 */
#define FORM_MAX_PARAMS		100000

/* Bytes of literal text a form decoder converts at once */
#define FORM_CONVERT_CHUNK	65536

/* A secret to wipe, or an OpenSSL object to free, when the call ends */
typedef struct Tracked
{
	void	   *object;
	void		(*release) (void *);	/* NULL: a secret, wipe and pfree */
	size_t		wipe_len;
} Tracked;

static Tracked tracked[VERIFY_MAX_TRACKED];
static int	ntracked = 0;

/* Clear OpenSSL's error queue, if anything is on it */
static inline void
clear_openssl_errors(void)
{
	if (ERR_peek_error() != 0)
		ERR_clear_error();
}

/* The bytes of a text datum */
Slice
idem_slice_of_text(text *t)
{
	Slice		s;

	s.data = VARDATA_ANY(t);
	s.len = VARSIZE_ANY_EXHDR(t);
	return s;
}

/* Is the slice exactly the given ASCII word? */
bool
idem_slice_is(Slice s, const char *word)
{
	size_t		len = strlen(word);

	return s.len == len && memcmp(s.data, word, len) == 0;
}

/* Header names are ASCII tokens: fold only A-Z, whatever the locale */
static bool
header_name_equal(const char *a, size_t alen, const char *b)
{
	size_t		blen = strlen(b);

	if (alen != blen)
		return false;
	for (size_t i = 0; i < alen; i++)
	{
		char		ca = a[i];
		char		cb = b[i];

		if (ca >= 'A' && ca <= 'Z')
			ca += 'a' - 'A';
		if (cb >= 'A' && cb <= 'Z')
			cb += 'a' - 'A';
		if (ca != cb)
			return false;
	}
	return true;
}

/* Drop HTTP optional whitespace (spaces, tabs) at both ends */
static Slice
trim_ows(Slice s)
{
	while (s.len > 0 && (s.data[0] == ' ' || s.data[0] == '\t'))
	{
		s.data++;
		s.len--;
	}
	while (s.len > 0 && (s.data[s.len - 1] == ' ' || s.data[s.len - 1] == '\t'))
		s.len--;
	return s;
}

/*
 * Take the next sep-separated element of *rest, trimmed, into *item; false
 * when the list is used up.  Empty elements come back empty: callers skip
 * them, so doubled separators are harmless.
 */
bool
idem_next_element(Slice *rest, char sep, Slice *item)
{
	const char *p;

	if (rest->data == NULL)
		return false;
	p = memchr(rest->data, sep, rest->len);
	if (p == NULL)
	{
		item->data = rest->data;
		item->len = rest->len;
		rest->data = NULL;
		rest->len = 0;
	}
	else
	{
		item->data = rest->data;
		item->len = p - rest->data;
		rest->len -= item->len + 1;
		rest->data = p + 1;
	}
	*item = trim_ows(*item);
	return true;
}

/* Split "name<sep>value" at the first sep, both sides trimmed; false without sep */
bool
idem_split_pair(Slice item, char sep, Slice *name, Slice *value)
{
	const char *p = memchr(item.data, sep, item.len);

	if (p == NULL)
		return false;
	name->data = item.data;
	name->len = p - item.data;
	value->data = p + 1;
	value->len = item.len - name->len - 1;
	*name = trim_ows(*name);
	*value = trim_ows(*value);
	return true;
}

/*
 * Find a header by case-insensitive name in a jsonb object of
 * name -> string.  A non-object, a missing name, a non-string value or a
 * name present twice (in different cases) all count as missing: a request
 * whose headers are ambiguous is not one to trust.  The value is taken as
 * it is, not trimmed: ids and timestamps are signed as sent, and the id the
 * caller dedups on must be the very one that was signed (a padded copy of a
 * captured delivery would otherwise verify under a new dedup key).  The
 * signature lists trim their own entries.
 */
bool
idem_find_header(Jsonb *headers, const char *name, Slice *value)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			found = 0;
	bool		is_string = false;

	if (!JB_ROOT_IS_OBJECT(headers))
		return false;

	it = JsonbIteratorInit(&headers->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		bool		match;

		if (tok != WJB_KEY)
			continue;
		match = header_name_equal(v.val.string.val, v.val.string.len, name);
		/* the key's value; nested containers come back whole */
		tok = JsonbIteratorNext(&it, &v, true);
		if (!match || tok != WJB_VALUE)
			continue;
		found++;
		is_string = (v.type == jbvString);
		if (is_string)
		{
			value->data = v.val.string.val;
			value->len = v.val.string.len;
		}
	}
	return found == 1 && is_string;
}

/* Unix seconds written as plain decimal digits, up to year 9999 */
bool
idem_parse_unix_seconds(Slice s, int64 *secs)
{
	int64		result = 0;

	if (s.len == 0)
		return false;
	for (size_t i = 0; i < s.len; i++)
	{
		if (s.data[i] < '0' || s.data[i] > '9')
			return false;
		result = result * 10 + (s.data[i] - '0');
		if (result > MAX_UNIX_SECS)
			return false;
	}
	*secs = result;
	return true;
}

/*
 * Is the timestamp within tolerance of the wall clock, in either direction?
 * A negative tolerance_usecs means no check.  Both sides stay far from
 * int64 overflow: secs is bounded by year 9999 and the clock by the
 * timestamp range.
 */
bool
idem_timestamp_acceptable(int64 secs, double tolerance_usecs)
{
	int64		now_unix_usecs;
	int64		diff;

	if (tolerance_usecs < 0)
		return true;
	now_unix_usecs = GetCurrentTimestamp() +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
	diff = now_unix_usecs - secs * USECS_PER_SEC;
	if (diff < 0)
		diff = -diff;
	return (double) diff <= tolerance_usecs;
}

/* Value of one hex digit, or -1 */
static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Exactly 2 * outlen hex digits into out; anything else is false */
bool
idem_decode_hex(Slice s, uint8 *out, size_t outlen)
{
	if (s.len != outlen * 2)
		return false;
	for (size_t i = 0; i < outlen; i++)
	{
		int			hi = hex_value(s.data[2 * i]);
		int			lo = hex_value(s.data[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		out[i] = (uint8) ((hi << 4) | lo);
	}
	return true;
}

/*
 * Decode canonical padded standard base64 into out, which has room for
 * the bytes (3 for every 4 characters, less the padding); their number, or
 * -1 if text is not exactly that: a length not a multiple of 4, a
 * character outside the alphabet, "=" anywhere but one or two at the end,
 * or stray low bits in the last character before the padding.  A signature
 * has one accepted spelling, and a secret mangled that way fails on the
 * first call instead of making every delivery's signature mismatch.
 * (pg_b64_decode accepts all of these, and whitespace.)
 */
static ssize_t
base64_decode_canonical(Slice text, uint8 *out)
{
	/* the value of each character of the alphabet; -1 for any other byte */
	static int8 value[256];
	static bool ready = false;
	const unsigned char *p = (const unsigned char *) text.data;
	size_t		pad;
	size_t		groups;
	uint8	   *o = out;

	if (!ready)
	{
		static const char alphabet[] =
			"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

		memset(value, -1, sizeof(value));
		for (int i = 0; i < 64; i++)
			value[(unsigned char) alphabet[i]] = (int8) i;
		ready = true;
	}
	if (text.len == 0 || text.len % 4 != 0)
		return -1;
	pad = p[text.len - 1] != '=' ? 0 : p[text.len - 2] != '=' ? 1 : 2;
	groups = text.len / 4;
	for (size_t g = 0; g < groups; g++, p += 4)
	{
		bool		last = (g == groups - 1);
		int			a = value[p[0]];
		int			b = value[p[1]];
		int			c = (last && pad == 2) ? 0 : value[p[2]];
		int			d = (last && pad >= 1) ? 0 : value[p[3]];
		uint32		v;

		if ((a | b | c | d) < 0)
			return -1;
		v = ((uint32) a << 18) | ((uint32) b << 12) | ((uint32) c << 6) | (uint32) d;
		*o++ = (uint8) (v >> 16);
		if (last && pad == 2)
		{
			if ((v & 0xFFFF) != 0)
				return -1;
			break;
		}
		*o++ = (uint8) (v >> 8);
		if (last && pad == 1)
		{
			if ((v & 0xFF) != 0)
				return -1;
			break;
		}
		*o++ = (uint8) v;
	}
	return o - out;
}

/*
 * The bytes of canonical padded standard base64, in memory wiped when the
 * call ends (it may be a key); NULL if s is empty or not exactly that.
 */
uint8 *
idem_decode_base64(Slice s, size_t *len)
{
	uint8	   *out;
	ssize_t		n;

	if (s.len == 0 || s.len % 4 != 0 || s.len > MaxAllocSize)
		return NULL;
	out = idem_verify_secret_alloc(s.len / 4 * 3);
	n = base64_decode_canonical(s, out);
	if (n <= 0)
		return NULL;
	*len = (size_t) n;
	return out;
}

/* Exactly the canonical padded base64 of a 32-byte MAC */
bool
idem_decode_b64_mac(Slice s, uint8 *mac)
{
	uint8		buf[VERIFY_MAC_LEN + 1];

	if (s.len != 44 || base64_decode_canonical(s, buf) != VERIFY_MAC_LEN)
		return false;
	memcpy(mac, buf, VERIFY_MAC_LEN);
	return true;
}

/* Compare two MACs in time independent of where they differ */
bool
idem_mac_equal(const uint8 *a, const uint8 *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}

/* Track an object for idem_verify_release_all; an error if too many */
static void
track(void *object, void (*release) (void *), size_t wipe_len)
{
	if (ntracked >= VERIFY_MAX_TRACKED)
	{
		if (release != NULL)
			release(object);
		else
			explicit_bzero(object, wipe_len);
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many keys or certificates in one webhook verification"),
				 errdetail("At most %d can be used at once.", VERIFY_MAX_TRACKED)));
	}
	tracked[ntracked].object = object;
	tracked[ntracked].release = release;
	tracked[ntracked].wipe_len = wipe_len;
	ntracked++;
}

/* Memory for a secret (or what is derived from one), wiped when the call ends */
void *
idem_verify_secret_alloc(size_t len)
{
	void	   *p = palloc0(len);

	track(p, NULL, len);
	return p;
}

/* Free an OpenSSL object (or run release on anything) when the call ends */
void
idem_verify_track(void *object, void (*release) (void *))
{
	track(object, release, 0);
}

/* What idem_verify_hold took over from the call */
struct VerifyHeld
{
	int			n;
	Tracked		items[FLEXIBLE_ARRAY_MEMBER];
};

/* A mark of what the call tracks now, for idem_verify_hold */
int
idem_verify_tracked_mark(void)
{
	return ntracked;
}

/*
 * Take over what was tracked since mark (a key prepared to be kept past
 * the call): the call's end no longer releases it, idem_verify_held_release
 * does.  The list is allocated in the current memory context.
 */
VerifyHeld *
idem_verify_hold(int mark)
{
	int			n = ntracked - mark;
	VerifyHeld *held = palloc(offsetof(VerifyHeld, items) + n * sizeof(Tracked));

	Assert(mark >= 0 && mark <= ntracked);
	held->n = n;
	memcpy(held->items, &tracked[mark], n * sizeof(Tracked));
	ntracked = mark;
	return held;
}

/* Wipe and free the last n of items, newest first */
static void
release_tracked(Tracked *items, int *n)
{
	while (*n > 0)
	{
		Tracked    *t = &items[--*n];

		if (t->release != NULL)
			t->release(t->object);
		else
		{
			explicit_bzero(t->object, t->wipe_len);
			pfree(t->object);
		}
	}
	clear_openssl_errors();
}

/* Wipe and free what idem_verify_hold took over, newest first */
void
idem_verify_held_release(VerifyHeld *held)
{
	release_tracked(held->items, &held->n);
}

/*
 * Wipe the secrets and free the OpenSSL objects of the call, newest first;
 * the entry point calls it whether the call returns or raises an error
 */
void
idem_verify_release_all(void)
{
	release_tracked(tracked, &ntracked);
}

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
static EVP_PKEY_CTX *
rsa_verifier(EVP_PKEY *key, const EVP_MD *md, bool *new_ctx)
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
		EVP_PKEY_CTX *pctx = dlen > 0 ? rsa_verifier(key, md, &new_ctx) : NULL;

		ok = pctx != NULL && EVP_PKEY_verify(pctx, sig, siglen, dgst, dlen) == 1;
		if (pctx != NULL && new_ctx)
			EVP_PKEY_CTX_free(pctx);
		clear_openssl_errors();
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
	clear_openssl_errors();
	if (msg != NULL)
		pfree(msg);
	return ok;
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

/*
 * Append the characters src[0..n), whole characters of encoding from, to
 * *out in encoding to, advancing *out; false if one of them has no
 * equivalent there.  Goes through UTF-8 when the two encodings have no
 * conversion of their own (EUC_CN to GBK, say).  *out must have room for
 * what the conversion gives, at most MAX_CONVERSION_GROWTH bytes a byte.
 */
static bool
convert_chars(const char *src, size_t n, int from, int to, char **out)
{
	Oid			proc = FindDefaultConversionProc(from, to);
	int			buflen = FORM_CONVERT_CHUNK * MAX_CONVERSION_GROWTH + 8;
	char	   *buf;
	bool		ok = true;

	if (!OidIsValid(proc))
	{
		char	   *utf8;
		char	   *end;

		if (from == PG_UTF8 || to == PG_UTF8)
			return false;
		end = utf8 = palloc_extended(n * MAX_CONVERSION_GROWTH + 1, MCXT_ALLOC_HUGE);
		ok = convert_chars(src, n, from, PG_UTF8, &end) &&
			convert_chars(utf8, end - utf8, PG_UTF8, to, out);
		pfree(utf8);
		return ok;
	}
	buf = palloc(buflen);
	while (n > 0)
	{
		int			chunk = (int) Min(n, FORM_CONVERT_CHUNK);
		int			done;
		size_t		outlen;

		/* stops before a character it cannot convert, or one cut by the chunk */
		done = pg_do_encoding_conversion_buf(proc, from, to,
											 (unsigned char *) src, chunk,
											 (unsigned char *) buf, buflen, true);
		if (done <= 0)
		{
			ok = false;
			break;
		}
		outlen = strlen(buf);
		memcpy(*out, buf, outlen);
		*out += outlen;
		src += done;
		n -= done;
	}
	pfree(buf);
	return ok;
}

/*
 * Decode one name or value of a form to *out, advancing it: "+" is a space
 * and "%XX" the byte XX, taken as they are; bytes above 0x7F that are not
 * %-encoded are characters of the database encoding (from), converted to
 * the form's encoding (to).  False on a "%" without two hex digits after
 * it, or a character the form's encoding lacks.
 */
static bool
form_unescape(Slice raw, int from, int to, char **out)
{
	const char *p = raw.data;
	const char *end = raw.data + raw.len;
	char	   *o = *out;

	/* bytes above 0x7F are copied as they are too when nothing converts */
	bool		copy_high = (from == to || from == PG_SQL_ASCII);

	while (p < end)
	{
		const char *run = p;
		unsigned char c;

		/* a run of bytes copied as they are, at once */
		while (p < end && *p != '+' && *p != '%' &&
			   (copy_high || (unsigned char) *p < 0x80))
			p++;
		if (p > run)
		{
			memcpy(o, run, p - run);
			o += p - run;
		}
		if (p == end)
			break;
		c = (unsigned char) *p;
		if (c == '+')
		{
			*o++ = ' ';
			p++;
		}
		else if (c == '%')
		{
			int			hi;
			int			lo;

			if (end - p < 3 || (hi = hex_value(p[1])) < 0 ||
				(lo = hex_value(p[2])) < 0)
				return false;
			*o++ = (char) ((hi << 4) | lo);
			p += 3;
		}
		else
		{
			/* in a server encoding every byte of a multibyte character is above 0x7F */
			run = p;
			while (p < end && (unsigned char) *p >= 0x80)
				p++;
			if (!convert_chars(run, p - run, from, to, &o))
				return false;
		}
	}
	*out = o;
	return true;
}

/* Order form parameters by name, bytewise, a prefix first */
static int
form_param_cmp(const void *a, const void *b)
{
	const Slice *x = &((const FormParam *) a)->name;
	const Slice *y = &((const FormParam *) b)->name;
	int			c = memcmp(x->data, y->data, Min(x->len, y->len));

	if (c != 0)
		return c;
	return x->len < y->len ? -1 : x->len > y->len ? 1 : 0;
}

/*
 * Decode an application/x-www-form-urlencoded body into form: its
 * parameters ("name=value", "&"-separated; a name alone has an empty
 * value; empty pieces between "&" are skipped), decoded by form_unescape
 * into encoding, and sorted by name.  False, never an error, on a
 * malformed %-escape, an empty name, a name given twice (which of the two
 * the signer meant is unknowable), a character encoding lacks, or more
 * than FORM_MAX_PARAMS pieces.  Sorting once keeps a body of many
 * parameters O(n log n).
 */
static bool
form_decode(Slice body, int encoding, Form *form)
{
	int			db = GetDatabaseEncoding();
	size_t		npieces = 1;
	size_t		buflen;
	char	   *o;
	Slice		rest = body;
	int			n = 0;
	uint8		high = 0;

	form->params = NULL;
	form->nparams = 0;

	for (const char *q = body.data, *end = body.data + body.len;
		 (q = memchr(q, '&', end - q)) != NULL; q++)
	{
		if (++npieces > FORM_MAX_PARAMS)
			return false;
	}
	for (size_t i = 0; i < body.len; i++)
		high |= (uint8) body.data[i];
	form->literal_non_ascii = (high & 0x80) != 0;
	if (body.len == 0)
		return true;

	buflen = body.len + 1;
	if (form->literal_non_ascii && encoding != db)
		buflen = body.len * MAX_CONVERSION_GROWTH + 1;
	o = palloc_extended(buflen, MCXT_ALLOC_HUGE);
	form->params = palloc(npieces * sizeof(FormParam));

	while (rest.len > 0)
	{
		const char *amp = memchr(rest.data, '&', rest.len);
		Slice		piece = {rest.data, amp ? (size_t) (amp - rest.data) : rest.len};
		const char *eq;
		Slice		name;
		Slice		value = {"", 0};
		FormParam  *param = &form->params[n];

		rest.data += piece.len + (amp ? 1 : 0);
		rest.len -= piece.len + (amp ? 1 : 0);
		if (piece.len == 0)
			continue;
		eq = memchr(piece.data, '=', piece.len);
		name.data = piece.data;
		name.len = eq ? (size_t) (eq - piece.data) : piece.len;
		if (eq)
		{
			value.data = eq + 1;
			value.len = piece.len - name.len - 1;
		}
		if (name.len == 0)
			return false;
		param->name.data = o;
		if (!form_unescape(name, db, encoding, &o))
			return false;
		param->name.len = o - param->name.data;
		param->value.data = o;
		if (!form_unescape(value, db, encoding, &o))
			return false;
		param->value.len = o - param->value.data;
		n++;
	}

	qsort(form->params, n, sizeof(FormParam), form_param_cmp);
	for (int i = 1; i < n; i++)
		if (form_param_cmp(&form->params[i - 1], &form->params[i]) == 0)
			return false;
	form->nparams = n;
	return true;
}

/* The database encoding of a form's charset name, or -1 for another */
static int
form_charset(Slice name)
{
	static const struct
	{
		const char *name;
		int			encoding;
	}			charsets[] = {
		{"UTF-8", PG_UTF8}, {"UTF8", PG_UTF8},
		/* GB2312 is a subset of GBK, and encoded alike */
		{"GBK", PG_GBK}, {"GB2312", PG_GBK},
	};

	for (int i = 0; i < lengthof(charsets); i++)
		if (name.len == strlen(charsets[i].name) &&
			pg_strncasecmp(name.data, charsets[i].name, name.len) == 0)
			return charsets[i].encoding;
	return -1;
}

/*
 * Decode a form in the charset its parameter charset_param names (UTF-8
 * when it is absent or empty; UTF-8 or GBK, in any case, else false).  The
 * %-encoded bytes are already in that charset; characters sent unencoded
 * are converted to it from the database encoding, which they arrived in.
 */
bool
idem_form_decode_charset(Slice body, const char *charset_param, Form *form)
{
	int			db = GetDatabaseEncoding();
	int			encoding = PG_UTF8;
	Slice		charset;

	if (!form_decode(body, db, form))
		return false;
	if (idem_form_get(form, charset_param, &charset) && charset.len > 0)
	{
		encoding = form_charset(charset);
		if (encoding < 0)
			return false;
	}
	if (encoding == db || db == PG_SQL_ASCII || !form->literal_non_ascii)
		return true;
	return form_decode(body, encoding, form);
}

/* The decoded value of a form's parameter; false if it has none */
bool
idem_form_get(const Form *form, const char *name, Slice *value)
{
	FormParam	key;
	FormParam  *found;

	if (form->nparams == 0)
		return false;
	key.name.data = name;
	key.name.len = strlen(name);
	found = bsearch(&key, form->params, form->nparams, sizeof(FormParam),
					form_param_cmp);
	if (found == NULL)
		return false;
	*value = found->value;
	return true;
}

/*
 * The string a gateway signs: "name=value" of every parameter, in order,
 * joined by "&", the names of skip (NULL-terminated) left out, and the
 * empty values too when skip_empty.
 */
Slice
idem_form_signed_string(const Form *form, const char *const *skip,
						bool skip_empty)
{
	bool	   *keep = palloc(Max(form->nparams, 1) * sizeof(bool));
	size_t		len = 0;
	char	   *buf;
	char	   *p;
	Slice		result;

	for (int i = 0; i < form->nparams; i++)
	{
		const FormParam *param = &form->params[i];

		keep[i] = !(skip_empty && param->value.len == 0);
		for (const char *const *s = skip; keep[i] && *s != NULL; s++)
			keep[i] = !idem_slice_is(param->name, *s);
		if (keep[i])
			len += param->name.len + param->value.len + 2;
	}
	p = buf = palloc_extended(len + 1, MCXT_ALLOC_HUGE);
	for (int i = 0; i < form->nparams; i++)
	{
		const FormParam *param = &form->params[i];

		if (!keep[i])
			continue;
		if (p != buf)
			*p++ = '&';
		memcpy(p, param->name.data, param->name.len);
		p += param->name.len;
		*p++ = '=';
		memcpy(p, param->value.data, param->value.len);
		p += param->value.len;
	}
	pfree(keep);
	result.data = buf;
	result.len = p - buf;
	return result;
}

/*
 * Check a header of Stripe's shape (TimestampedMacs) with a secret used as
 * given.  Any MAC element may match (the sender lists one per active secret
 * while a secret is rolled); unknown elements and elements without "=" are
 * ignored; no timestamp, two of them, or no MAC element at all is false,
 * and so is a timestamp outside the request's tolerance.
 */
bool
idem_verify_timestamped_macs(const TimestampedMacs *format,
							 const VerifyMacKey *key, const VerifyRequest *req)
{
	Slice		header;
	Slice		rest;
	Slice		item;
	Slice		name;
	Slice		value;
	Slice		ts = {NULL, 0};
	int			nts = 0;
	int			nmacs = 0;
	int64		secs;
	uint8		expected[VERIFY_MAC_LEN];
	uint8		given[VERIFY_MAC_LEN];
	bool		matched = false;
	Slice		parts[3];

	if (!idem_find_header(req->headers, format->header, &header))
		return false;

	/* first pass: the timestamp, and whether there is any MAC */
	rest = header;
	while (idem_next_element(&rest, format->sep, &item))
	{
		if (!idem_split_pair(item, '=', &name, &value))
			continue;
		if (idem_slice_is(name, format->ts_name))
		{
			ts = value;
			nts++;
		}
		else if (idem_slice_is(name, format->mac_name))
			nmacs++;
	}
	if (nts != 1 || nmacs == 0 || !idem_parse_unix_seconds(ts, &secs))
		return false;
	if (!idem_timestamp_acceptable(secs, req->tolerance_usecs))
		return false;

	parts[0] = ts;
	parts[1].data = format->joiner;
	parts[1].len = strlen(format->joiner);
	parts[2] = req->payload;
	idem_verify_mac(key, parts, 3, expected);

	/* second pass: every MAC, without stopping at the first match */
	rest = header;
	while (idem_next_element(&rest, format->sep, &item))
	{
		if (!idem_split_pair(item, '=', &name, &value) ||
			!idem_slice_is(name, format->mac_name))
			continue;
		if (idem_decode_hex(value, given, VERIFY_MAC_LEN))
			matched |= idem_mac_equal(expected, given, VERIFY_MAC_LEN);
	}
	explicit_bzero(expected, sizeof(expected));
	return matched;
}
