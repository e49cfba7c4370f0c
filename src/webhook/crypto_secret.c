/*
 * crypto_secret.c
 *		Crypto layer: the secrets and OpenSSL objects of one call, tracked so
 *		that they are wiped and freed when the call ends, error or not, or
 *		held past it by a cached key.
 *
 * May call: the wire format (wire.h) and OpenSSL's libcrypto.  Raises an
 * error only when a call would track more than VERIFY_MAX_TRACKED objects,
 * or memory runs out.
 */
#include "postgres.h"

#include "utils/memutils.h"

#include "webhook/crypto.h"

/* Secrets and OpenSSL objects one call may hold at once */
#define VERIFY_MAX_TRACKED	64

/* A secret to wipe, or an OpenSSL object to free, when the call ends */
typedef struct Tracked
{
	void	   *object;
	void		(*release) (void *);	/* NULL: a secret, wipe and pfree */
	size_t		wipe_len;
} Tracked;

static Tracked tracked[VERIFY_MAX_TRACKED];
static int	ntracked = 0;

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
	idem_clear_openssl_errors();
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
	n = idem_base64_decode_canonical(s, out);
	if (n <= 0)
		return NULL;
	*len = (size_t) n;
	return out;
}
